// AdamW with decoupled weight decay, a linear warm-up then cosine learning-rate schedule, and
// clipping of the gradient's global norm: the recipe of GPT-2/Llama-style pre-training.
#pragma once

#include <cstdint>
#include <vector>

#include "train/train_model.h"

namespace grove {

class ThreadPool;

struct OptimizerConfig {
  double lr = 1e-3;           // peak learning rate
  double min_lr_ratio = 0.1;  // the cosine ends at lr * min_lr_ratio
  int64_t warmup = 100;       // steps of linear warm-up from lr / warmup
  int64_t steps = 1000;       // total steps (the cosine spans warmup..steps)
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;  // matrices only
  double clip = 1.0;          // max global gradient norm; 0 disables
};

// Throws grove::Error naming the hyper-parameter that is out of range.
void ValidateOptimizerConfig(const OptimizerConfig& c);

// Learning rate at 0-based step: (step + 1) / warmup * lr during warm-up, then a cosine from lr to
// lr * min_lr_ratio at the last step.
double LearningRate(const OptimizerConfig& c, int64_t step);

// sqrt(sum of squares), accumulated in double (per thread of the pool, then in range order).
double GlobalNorm(const std::vector<float>& v, ThreadPool* pool = nullptr);

class AdamW {
 public:
  AdamW(const ParamLayout& layout, const OptimizerConfig& config);

  // One update at 0-based step `step` (bias correction uses step + 1), with the gradient scaled
  // down to norm config.clip if it is longer (grads itself is left as it is). Returns the norm
  // before clipping. With a pool, the elements are split over its threads.
  double Step(std::vector<float>& params, std::vector<float>& grads, int64_t step,
              ThreadPool* pool = nullptr);

  std::vector<float>& m() { return m_; }
  std::vector<float>& v() { return v_; }
  const std::vector<float>& m() const { return m_; }
  const std::vector<float>& v() const { return v_; }

 private:
  const ParamLayout& layout_;
  OptimizerConfig config_;
  std::vector<float> m_, v_;
};

}  // namespace grove
