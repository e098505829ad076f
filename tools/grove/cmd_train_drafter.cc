// grove train-drafter: trains a drafter that reads a target's hidden states against that target,
// resumably, and exports it: the autoregressive feature drafter, or ParallelSpec's parallel one
// (K mask tokens, group-wise training).
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "base/error.h"
#include "commands.h"
#include "io/ggml_type.h"
#include "option_checks.h"
#include "output_path.h"
#include "progress_line.h"
#include "train/feature_trainer.h"
#include "train/gemm.h"
#include "train/model_file.h"
#include "training_options.h"
#include "training_run.h"

namespace grove::cli {
namespace {

struct TrainDrafterOptions {
  FeatureTrainOptions train;
  std::string kind = "feature";
  std::string visibility = "group-wise";
  std::string export_path;
  std::string export_type = "q8_0";
  int64_t log_every = 10;
};

// --drafter, --masks and --mask-visibility, checked together; the visibility set in o.
void CheckDrafterKind(TrainDrafterOptions& c) {
  FeatureTrainOptions& o = c.train;
  if (c.kind != "feature" && c.kind != "parallel")
    Fail("train-drafter: --drafter ", c.kind, " is not one of feature, parallel");
  if (c.kind == "parallel" && o.masks < 1)
    Fail("train-drafter: --drafter parallel needs --masks K of at least 1");
  if (c.kind == "feature" && o.masks != 0)
    Fail("train-drafter: --masks is for --drafter parallel (the feature drafter has none)");
  if (c.visibility != "group-wise" && c.visibility != "across-groups")
    Fail("train-drafter: --mask-visibility ", c.visibility, " is not group-wise or across-groups");
  o.visibility =
      c.visibility == "group-wise" ? MaskVisibility::kGroupWise : MaskVisibility::kAcrossGroups;
}

// The run's log.tsv, opened (with the run's announcement) at the first step, as train's.
void OpenDrafterLog(const TrainDrafterOptions& c, const std::string& log_path, std::ofstream& log) {
  const FeatureTrainOptions& o = c.train;
  std::fprintf(stderr,
               "train-drafter: %s drafter (%d masks) for %s, batch %d x %d tokens, %lld steps, "
               "%d threads, %s\n",
               c.kind.c_str(), o.masks, o.target_path.c_str(), o.batch, o.seq_len,
               static_cast<long long>(o.optimizer.steps), o.threads, GemmBackendName().c_str());
  const bool new_log = !std::filesystem::exists(log_path);
  log.open(log_path, std::ios::app);
  if (!log) Fail("train-drafter: cannot write '", log_path, "'");
  if (new_log)
    log << "step\tloss\tvalid_loss\tvalid_agreement\tlr\tgrad_norm\ttokens_per_s\telapsed_s\n";
}

void PrintDrafterProgress(const TrainProgress& p, int64_t log_every, bool tty) {
  const bool evaluated = !std::isnan(p.valid_loss);
  const bool line = p.step % log_every == 0 || evaluated || p.step == p.steps;
  if (!tty && !line) return;
  std::string valid;
  if (evaluated) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "  valid %.4f agree", p.valid_loss);
    valid = buf;
    for (double a : p.valid_agreement_by_depth) {
      std::snprintf(buf, sizeof(buf), " %.3f", a);
      valid += buf;
    }
  }
  std::fprintf(
      stderr, "%sstep %lld/%lld  loss %.4f%s  lr %.2e  |g| %.2f  %.0f tokens/s  ETA %s%s%s",
      tty ? "\r\033[K" : "", static_cast<long long>(p.step), static_cast<long long>(p.steps),
      p.loss, valid.c_str(), p.lr, p.grad_norm, p.tokens_per_s, FormatDuration(p.eta_s).c_str(),
      p.checkpointed ? "  [saved]" : "", tty && !line ? "" : "\n");
  std::fflush(stderr);
}

void RunTrainDrafter(TrainDrafterOptions& c) {
  FeatureTrainOptions& o = c.train;
  CheckDrafterKind(c);
  ValidateFeatureTrainOptions(o);
  CheckOutputDirectory(o.out_dir, "-o", {"log.tsv"});  // the log is appended to
  const auto type = ParseGgmlType(c.export_type);
  if (!type || !IsTrainerExportType(*type))
    Fail("train-drafter: --export-type '", c.export_type, "' is not one of f32, f16, bf16, q8_0");
  const std::filesystem::path export_dir =
      CheckExportPath(c.export_path, {.inputs = {o.target_path, CheckpointPath(o.out_dir)}});
  const std::string log_path = (std::filesystem::path(o.out_dir) / "log.tsv").string();
  std::ofstream log;
  const bool tty = isatty(fileno(stderr));
  auto progress = [&](const TrainProgress& p) {
    if (!log.is_open()) OpenDrafterLog(c, log_path, log);
    const bool evaluated = !std::isnan(p.valid_loss);
    log << p.step << '\t' << p.loss << '\t' << (evaluated ? std::to_string(p.valid_loss) : "")
        << '\t' << (evaluated ? std::to_string(p.valid_agreement) : "") << '\t' << p.lr << '\t'
        << p.grad_norm << '\t' << p.tokens_per_s << '\t' << p.elapsed_s << '\n';
    PrintDrafterProgress(p, c.log_every, tty);
  };
  const TrainResult r = RunStoppable(
      [&](const std::atomic<bool>* stop) { return TrainFeatureDrafter(o, progress, stop); });
  log.flush();
  std::fprintf(stderr, "%s at step %lld of %lld (%s%.2f M trained parameters); checkpoint %s\n",
               r.interrupted ? "stopped" : "done", static_cast<long long>(r.step),
               static_cast<long long>(o.optimizer.steps), r.resumed ? "resumed, " : "",
               static_cast<double>(r.n_params) / 1e6, r.checkpoint.c_str());
  FailIfInterrupted(r, "train-drafter");
  if (!c.export_path.empty()) {
    CreateExportDirectory(export_dir);
    ExportFeatureDrafter(r.checkpoint, c.export_path, *type);
    std::fprintf(stderr, "wrote %s (%.2f MB)\n", c.export_path.c_str(),
                 static_cast<double>(std::filesystem::file_size(c.export_path)) / 1e6);
  }
}

}  // namespace

void AddTrainDrafterCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "train-drafter",
      "Train a drafter that reads a target's hidden states (feature drafter), resumably");
  auto c = std::make_shared<TrainDrafterOptions>();
  FeatureTrainOptions& o = c->train;
  o.optimizer.lr = 1e-3;
  o.optimizer.warmup = 40;
  o.optimizer.steps = 600;
  cmd->add_option("--drafter", c->kind,
                  "Kind of drafter: feature (autoregressive) or parallel (ParallelSpec, --masks)")
      ->capture_default_str();
  cmd->add_option("--masks", o.masks,
                  "Mask tokens K of a parallel drafter: depths 1..K+1 from one forward");
  cmd->add_option("--mask-decay", o.mask_decay, "Mask j's losses weigh DECAY^j")
      ->capture_default_str();
  cmd->add_option("--mask-visibility", c->visibility,
                  "group-wise (ParallelSpec's training), or across-groups (its ablation: later "
                  "rows see earlier groups' masks)")
      ->capture_default_str();
  cmd->add_option("--target", o.target_path, "The target GGUF the drafter reads")->required();
  cmd->add_option("--corpus", o.corpus_dir,
                  "Corpus directory (train.txt, valid.txt), e.g. from `grove corpus`")
      ->required();
  cmd->add_option("-o,--out", o.out_dir,
                  "Run directory: checkpoint.gguf and log.tsv; an existing checkpoint is resumed")
      ->required();
  cmd->add_option("--name", o.name, "general.name of the drafter files")->capture_default_str();
  cmd->add_option("--steps", o.optimizer.steps, "Optimizer steps")->capture_default_str();
  cmd->add_option("--warmup", o.optimizer.warmup, "Warm-up steps")->capture_default_str();
  cmd->add_option("--lr", o.optimizer.lr, "Peak learning rate")->capture_default_str();
  cmd->add_option("--batch", o.batch, "Windows per step")->capture_default_str();
  cmd->add_option("--seq-len", o.seq_len, "Tokens per window")->capture_default_str();
  cmd->add_option("--seed", o.seed, "Seed of initialisation and batch order")
      ->capture_default_str();
  cmd->add_option("--logit-weight", o.logit_weight,
                  "Weight of KL(target || drafter) of the next token")
      ->capture_default_str();
  cmd->add_option("--feature-weight", o.feature_weight,
                  "Weight of the smooth L1 between the drafter's output and the target's feature")
      ->capture_default_str();
  AddTrainingRunOptions(cmd, *c, "drafter");
  cmd->callback([c] { RunTrainDrafter(*c); });
}

}  // namespace grove::cli
