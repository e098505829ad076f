// The options every training command shares (train, train-drafter): when to validate, checkpoint
// and log, the threads, and the export at the end. `cli` is the command's options: its `train`
// (a trainer's options with eval_every, eval_batches, checkpoint_every and threads), log_every,
// export_path and export_type; `what` names what --export writes.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "engine_options.h"
#include "option_checks.h"

namespace grove::cli {

template <typename CliOptions>
void AddTrainingRunOptions(CLI::App* cmd, CliOptions& cli, const std::string& what) {
  auto& o = cli.train;
  cmd->add_option("--eval-every", o.eval_every, "Steps between validation losses")
      ->capture_default_str();
  cmd->add_option("--eval-batches", o.eval_batches, "Validation batches per evaluation")
      ->capture_default_str();
  cmd->add_option("--checkpoint-every", o.checkpoint_every, "Steps between checkpoints")
      ->capture_default_str();
  cmd->add_option("--log-every", cli.log_every,
                  "Steps between progress lines when not on a terminal")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1'000'000'000}));
  AddPositiveThreadsOption(*cmd, o.threads, "of the matrix products");
  cmd->add_option("--export", cli.export_path, "When training ends, write the " + what + " here");
  cmd->add_option("--export-type", cli.export_type, "Weight type of --export: f32, f16, bf16, q8_0")
      ->capture_default_str();
}

}  // namespace grove::cli
