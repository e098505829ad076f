#include "train/optimizer.h"

#include <cmath>

#include "base/error.h"
#include "train/parallel.h"

namespace grove {

void ValidateOptimizerConfig(const OptimizerConfig& c) {
  auto check = [](bool ok, const char* what, double v) {
    if (!ok) Fail("train: ", what, " ", v, " is out of range");
  };
  check(c.lr > 0 && c.lr <= 1, "learning rate (--lr)", c.lr);
  check(c.min_lr_ratio >= 0 && c.min_lr_ratio <= 1, "--min-lr-ratio", c.min_lr_ratio);
  check(c.steps >= 1, "--steps", static_cast<double>(c.steps));
  check(c.warmup >= 0 && c.warmup <= c.steps, "--warmup (must not exceed --steps)",
        static_cast<double>(c.warmup));
  check(c.beta1 >= 0 && c.beta1 < 1, "--beta1", c.beta1);
  check(c.beta2 >= 0 && c.beta2 < 1, "--beta2", c.beta2);
  check(c.eps > 0, "Adam epsilon", c.eps);
  check(c.weight_decay >= 0 && c.weight_decay < 1, "--weight-decay", c.weight_decay);
  check(c.clip >= 0, "--clip", c.clip);
}

double LearningRate(const OptimizerConfig& c, int64_t step) {
  if (step < c.warmup) return c.lr * static_cast<double>(step + 1) / static_cast<double>(c.warmup);
  const int64_t span = c.steps - c.warmup;
  const double progress =
      span <= 1
          ? 1.0
          : std::min(1.0, static_cast<double>(step - c.warmup) / static_cast<double>(span - 1));
  const double min_lr = c.lr * c.min_lr_ratio;
  return min_lr + 0.5 * (c.lr - min_lr) * (1.0 + std::cos(M_PI * progress));
}

double GlobalNorm(const std::vector<float>& v, ThreadPool* pool) {
  std::vector<double> partial(static_cast<std::size_t>(PoolParts(pool)), 0.0);
  ForEachRange(pool, static_cast<int64_t>(v.size()), [&](int part, int64_t i0, int64_t i1) {
    double sum = 0.0;
    for (int64_t i = i0; i < i1; ++i) {
      const double x = v[static_cast<std::size_t>(i)];
      sum += x * x;
    }
    partial[static_cast<std::size_t>(part)] = sum;
  });
  double sum = 0.0;
  for (double x : partial) sum += x;
  return std::sqrt(sum);
}

AdamW::AdamW(const ParamLayout& layout, const OptimizerConfig& config)
    : layout_(layout),
      config_(config),
      m_(static_cast<std::size_t>(layout.total())),
      v_(static_cast<std::size_t>(layout.total())) {
  ValidateOptimizerConfig(config);
}

double AdamW::Step(std::vector<float>& params, std::vector<float>& grads, int64_t step,
                   ThreadPool* pool) {
  GROVE_CHECK(params.size() == m_.size() && grads.size() == m_.size());
  const double norm = GlobalNorm(grads, pool);
  const float clip_scale =
      config_.clip > 0 && norm > config_.clip ? static_cast<float>(config_.clip / norm) : 1.0f;
  const double lr = LearningRate(config_, step);
  const double t = static_cast<double>(step + 1);
  const float b1 = static_cast<float>(config_.beta1), b2 = static_cast<float>(config_.beta2);
  const float correction1 = static_cast<float>(1.0 / (1.0 - std::pow(config_.beta1, t)));
  const float correction2 = static_cast<float>(1.0 / (1.0 - std::pow(config_.beta2, t)));
  const float eps = static_cast<float>(config_.eps);
  const float step_size = static_cast<float>(lr);
  for (const ParamTensor& tensor : layout_.tensors()) {
    if (tensor.frozen) continue;
    const float decay = tensor.is_matrix ? static_cast<float>(lr * config_.weight_decay) : 0.0f;
    ForEachRange(pool, tensor.size, [&](int, int64_t begin, int64_t end) {
      for (int64_t i = tensor.offset + begin; i < tensor.offset + end; ++i) {
        const float g = grads[static_cast<std::size_t>(i)] * clip_scale;
        float& m = m_[static_cast<std::size_t>(i)];
        float& v = v_[static_cast<std::size_t>(i)];
        m = b1 * m + (1.0f - b1) * g;
        v = b2 * v + (1.0f - b2) * g * g;
        float& p = params[static_cast<std::size_t>(i)];
        p -= decay * p;
        p -= step_size * (m * correction1) / (std::sqrt(v * correction2) + eps);
      }
    });
  }
  return norm;
}

}  // namespace grove
