#include "train/feature_drafter_graph.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "train/parallel.h"
#include "train/train_ops.h"

namespace grove {

ParamLayout FeatureDrafterLayout(const TrainShape& target) {
  TrainShape shape = target;
  shape.n_layer = 1;
  ParamLayout layout(shape);
  layout.AddTensor("fc.weight", {2 * static_cast<int64_t>(shape.n_embd), shape.n_embd}, true);
  layout.FreezeEmbeddingAndHead();
  return layout;
}

int64_t FusionOffset(const ParamLayout& layout) {
  const ParamTensor* fc = layout.Find("fc.weight");
  GROVE_CHECK(fc, "not a feature drafter's layout: no fc.weight");
  return fc->offset;
}

FeatureDrafterGraph::FeatureDrafterGraph(const ParamLayout& layout, int n_seq, int seq_len,
                                         ThreadPool* pool)
    : layout_(layout),
      pool_(pool),
      fc_(FusionOffset(layout)),
      graph_(layout, n_seq, seq_len, pool) {
  const auto r = static_cast<std::size_t>(graph_.rows());
  const auto d = static_cast<std::size_t>(layout.shape().n_embd);
  concat_.resize(r * 2 * d);
  fused_.resize(r * d);
  d_final_.resize(r * d);
  d_fused_.resize(r * d);
}

FeatureLoss FeatureDrafterGraph::Forward(const float* params, const int32_t* tokens,
                                         const float* features, const float* teacher_logits,
                                         const float* next_features, float logit_weight,
                                         float feature_weight) {
  const int R = rows(), D = layout_.shape().n_embd, V = layout_.shape().n_vocab;
  const float* embd = params + layout_.token_embd();
  for (int r = 0; r < R; ++r) {
    if (tokens[r] < 0 || tokens[r] >= V)
      Fail("train: token id ", tokens[r], " is outside the vocabulary of ", V);
    float* row = concat_.data() + static_cast<std::size_t>(r) * 2 * D;
    std::memcpy(row, embd + static_cast<int64_t>(tokens[r]) * D, sizeof(float) * D);
    std::memcpy(row + D, features + static_cast<int64_t>(r) * D, sizeof(float) * D);
  }
  LinearForward(concat_.data(), params + fc_, fused_.data(), R, 2 * D, D, pool_);
  FeatureLoss loss;
  loss.kl = graph_.Forward(params, nullptr, nullptr, teacher_logits, fused_.data());
  if (!teacher_logits || !next_features) return loss;
  graph_.ScaleLogitGradient(logit_weight);
  // Smooth L1 (β = 1) of g - f_{t+1}, its gradient into d_final_; sums per range, added in order.
  const int64_t n = static_cast<int64_t>(R) * D;
  const float* g = graph_.final_hidden();
  const float scale = feature_weight / static_cast<float>(n);
  std::vector<double> partial(static_cast<std::size_t>(PoolParts(pool_)), 0.0);
  ForEachRange(pool_, n, [&](int part, int64_t i0, int64_t i1) {
    double sum = 0.0;
    for (int64_t i = i0; i < i1; ++i) {
      const float diff = g[i] - next_features[i];
      const float a = std::fabs(diff);
      sum += a < 1.0f ? 0.5 * diff * diff : a - 0.5;
      d_final_[static_cast<std::size_t>(i)] = scale * std::clamp(diff, -1.0f, 1.0f);
    }
    partial[static_cast<std::size_t>(part)] = sum;
  });
  double sum = 0.0;
  for (double s : partial) sum += s;
  loss.feature = sum / static_cast<double>(n);
  loss.total = logit_weight * loss.kl + feature_weight * loss.feature;
  return loss;
}

void FeatureDrafterGraph::Backward(const float* params, float* grads) {
  const int R = rows(), D = layout_.shape().n_embd;
  graph_.Backward(params, grads, d_final_.data(), d_fused_.data());
  LinearBackward(concat_.data(), params + fc_, d_fused_.data(), nullptr, grads + fc_, R, 2 * D, D,
                 pool_);
}

}  // namespace grove
