#include "train/train_loop.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "base/timer.h"

namespace grove {

void ValidateSharedTrainOptions(std::string_view command, const OptimizerConfig& optimizer,
                                const SharedTrainOptions& o) {
  ValidateOptimizerConfig(optimizer);
  auto check = [&](bool ok, const char* what, int64_t v) {
    if (!ok) Fail(command, ": ", what, " ", v, " is out of range");
  };
  check(o.batch >= 1 && o.batch <= 4096, "--batch", o.batch);
  check(o.seq_len >= 2 && o.seq_len <= 65536, "--seq-len", o.seq_len);
  check(o.eval_every >= 1, "--eval-every", o.eval_every);
  check(o.eval_batches >= 1, "--eval-batches", o.eval_batches);
  check(o.checkpoint_every >= 1, "--checkpoint-every", o.checkpoint_every);
  check(o.threads >= 1 && o.threads <= 1024, "--threads", o.threads);
}

bool RunTrainLoop(const OptimizerConfig& optimizer, const TrainLoopConfig& config, RunState& state,
                  AdamW& adam, ThreadPool* pool, const TrainLoopHooks& hooks,
                  const std::function<void(const TrainProgress&)>& progress,
                  const std::atomic<bool>* stop) {
  std::vector<float> grads(state.params.size());
  const double elapsed_before = state.elapsed_s;
  const int64_t first_step = state.step;
  Timer timer;
  while (state.step < optimizer.steps) {
    std::fill(grads.begin(), grads.end(), 0.0f);
    const double loss = hooks.gradient(state.step, grads);
    if (!std::isfinite(loss)) {
      Fail(config.command, ": the loss became ", loss, " at step ", state.step + 1,
           "; the last checkpoint is kept. Try a lower --lr or a longer --warmup");
    }
    TrainProgress p;
    p.lr = LearningRate(optimizer, state.step);
    p.grad_norm = adam.Step(state.params, grads, state.step, pool);
    ++state.step;
    p.step = state.step;
    p.steps = optimizer.steps;
    p.loss = loss;
    const double sitting_s = timer.Seconds();
    state.elapsed_s = elapsed_before + sitting_s;
    p.elapsed_s = state.elapsed_s;
    const auto done = static_cast<double>(state.step - first_step);
    p.tokens_per_s = done * static_cast<double>(config.tokens_per_step) / sitting_s;
    p.eta_s = sitting_s / done * static_cast<double>(optimizer.steps - state.step);
    const bool last = state.step == optimizer.steps;
    const bool stopping = stop && stop->load();
    if (state.step % config.eval_every == 0 || last) {
      hooks.validate(p);
      state.last_valid_loss = p.valid_loss;
    }
    if (state.step % config.checkpoint_every == 0 || last || stopping) {
      hooks.save();
      p.checkpointed = true;
    }
    if (progress) progress(p);
    if (stopping && !last) return true;
  }
  return false;
}

}  // namespace grove
