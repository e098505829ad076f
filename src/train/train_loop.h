// The step loop every trainer runs (`grove train`, `grove train-drafter`): from the checkpoint's
// step to the last, each step a gradient, an AdamW update and a progress record; validation every
// eval_every steps and at the end; a checkpoint every checkpoint_every steps, at the end, and when
// stopped (Ctrl-C finishes the step in progress and saves it). What differs between trainers (the
// batch, the graph, what validation measures, what the checkpoint holds) comes in as hooks.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "train/checkpoint.h"
#include "train/optimizer.h"
#include "train/trainer.h"

namespace grove {

class ThreadPool;

struct TrainLoopConfig {
  int64_t eval_every = 200;
  int64_t checkpoint_every = 200;
  int64_t tokens_per_step = 0;    // for the tokens/s of the progress record
  const char* command = "train";  // names the command in errors
};

struct TrainLoopHooks {
  // Adds the gradient of step `step` into `grads` (zero on entry); returns the step's loss.
  std::function<double(int64_t step, std::vector<float>& grads)> gradient;
  // Fills the validation fields of the record (valid_loss at least).
  std::function<void(TrainProgress&)> validate;
  // Writes the checkpoint of the state as it is.
  std::function<void()> save;
};

// What every trainer's options share, checked as one: the optimizer, sequences per step and their
// length, the evaluation and checkpoint cadence, threads. Throws grove::Error naming the option,
// prefixed by `command` ("train", "train-drafter").
struct SharedTrainOptions {
  int32_t batch = 0;
  int32_t seq_len = 0;
  int64_t eval_every = 0;
  int32_t eval_batches = 0;
  int64_t checkpoint_every = 0;
  int32_t threads = 0;
};
void ValidateSharedTrainOptions(std::string_view command, const OptimizerConfig& optimizer,
                                const SharedTrainOptions& o);
// Those fields of a trainer's options (TrainOptions, FeatureTrainOptions).
template <class Options>
SharedTrainOptions SharedTrainOptionsOf(const Options& o) {
  return {.batch = o.batch,
          .seq_len = o.seq_len,
          .eval_every = o.eval_every,
          .eval_batches = o.eval_batches,
          .checkpoint_every = o.checkpoint_every,
          .threads = o.threads};
}

// Runs the loop on `state` (its step, parameters, elapsed time and last validation loss advance).
// Returns true when *stop ended it before the last step. Throws grove::Error, the last checkpoint
// kept, when the loss stops being finite.
bool RunTrainLoop(const OptimizerConfig& optimizer, const TrainLoopConfig& config, RunState& state,
                  AdamW& adam, ThreadPool* pool, const TrainLoopHooks& hooks,
                  const std::function<void(const TrainProgress&)>& progress,
                  const std::atomic<bool>* stop);

}  // namespace grove
