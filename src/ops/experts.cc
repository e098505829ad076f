#include "ops/experts.h"

#include <algorithm>
#include <cmath>

#include "ops/feed_forward.h"
#include "ops/parallel.h"

namespace grove {

WeightView ExpertWeights::Slice(const WeightView& w, int32_t n_expert, int32_t e) {
  WeightView part = w;
  part.n_out = w.n_out / n_expert;
  part.data = static_cast<const uint8_t*>(w.data) + e * part.n_out * w.row_bytes;
  return part;
}

namespace {

// The softmax as ggml computes it: exponentials in f32, their sum in double, one scale.
void SoftmaxAsGgml(const float* x, int32_t n, float* p) {
  const float max = *std::max_element(x, x + n);
  double sum = 0.0;
  for (int32_t e = 0; e < n; ++e) sum += (p[e] = std::exp(x[e] - max));
  const auto scale = static_cast<float>(1.0 / sum);
  for (int32_t e = 0; e < n; ++e) p[e] *= scale;
}

// The top n_used of scores by repeated selection, with their scores: n_used is small (8 of 128),
// and a full sort would cost more than the router's matmul row.
void TopK(const float* scores, int32_t n_expert, int32_t n_used, int32_t* experts, float* chosen) {
  for (int32_t j = 0; j < n_used; ++j) {
    int32_t best = -1;
    for (int32_t e = 0; e < n_expert; ++e) {
      if (std::find(experts, experts + j, e) != experts + j) continue;
      if (best < 0 || scores[e] > scores[best]) best = e;
    }
    experts[j] = best;
    chosen[j] = scores[best];
  }
}

}  // namespace

void RouteRow(RouterRule rule, const float* logits, int32_t n_expert, int32_t n_used,
              int32_t* experts, float* weights, float* probs) {
  if (rule == RouterRule::kTopKSoftmax) {
    TopK(logits, n_expert, n_used, experts, probs);
    SoftmaxAsGgml(probs, n_used, weights);
    return;
  }
  SoftmaxAsGgml(logits, n_expert, probs);
  TopK(probs, n_expert, n_used, experts, weights);
  double chosen = 0.0;
  for (int32_t j = 0; j < n_used; ++j) chosen += weights[j];
  const float norm = std::max(static_cast<float>(chosen), 6.103515625e-5f);
  for (int32_t j = 0; j < n_used; ++j) weights[j] /= norm;
}

ExpertScratch::ExpertScratch(int32_t max_rows, int32_t n_expert, int32_t n_used, int64_t n_embd,
                             int64_t n_ff)
    : max_rows_(max_rows), n_used_(n_used) {
  const auto rows = static_cast<std::size_t>(max_rows);
  const std::size_t copies = rows * static_cast<std::size_t>(n_used);
  logits_.Resize(rows * static_cast<std::size_t>(n_expert));
  probs_.Resize(rows * static_cast<std::size_t>(n_expert));
  chosen_.Resize(copies);
  weights_.Resize(copies);
  slot_.Resize(copies);
  first_.Resize(static_cast<std::size_t>(n_expert) + 1);
  filled_.Resize(static_cast<std::size_t>(n_expert));
  x_.Resize(copies * static_cast<std::size_t>(n_embd));
  gate_.Resize(copies * static_cast<std::size_t>(n_ff));
  up_.Resize(copies * static_cast<std::size_t>(n_ff));
  out_.Resize(copies * static_cast<std::size_t>(n_embd));
}

uint64_t ExpertScratch::bytes() const {
  uint64_t n = (chosen_.size() + slot_.size() + first_.size() + filled_.size()) * sizeof(int32_t);
  for (const AlignedBuffer<float>* f : {&logits_, &probs_, &weights_, &x_, &gate_, &up_, &out_}) {
    n += f->size() * sizeof(float);
  }
  return n;
}

void ExpertScratch::Prefault(int32_t rows) {
  if (max_rows_ == 0) return;
  const auto r = static_cast<std::size_t>(std::min(rows, max_rows_));
  const auto b = static_cast<std::size_t>(max_rows_);
  for (AlignedBuffer<float>* f : {&logits_, &probs_, &weights_, &x_, &gate_, &up_, &out_}) {
    f->ZeroFirst(f->size() / b * r);
  }
  for (AlignedBuffer<int32_t>* f : {&chosen_, &slot_}) f->ZeroFirst(f->size() / b * r);
  first_.Zero();
  filled_.Zero();
}

void ExpertFeedForward(const ExpertWeights& w, GateActivation activation, const float* x, int32_t n,
                       float* out, ExpertScratch& s, MatMulScratch& matmul_scratch,
                       ThreadPool& pool) {
  const int32_t n_expert = w.n_expert;
  const int32_t k = w.n_used;
  const int64_t n_embd = w.router.n_in;
  const int64_t n_ff = w.gate.n_out / n_expert;

  // 1. Route: the router's logits, then each row's k experts and weights.
  MatMul(w.router, x, n, s.logits_.data(), matmul_scratch, pool);
  ParallelForWork(pool, n, ElementwiseMacs(int64_t{n} * n_expert), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      float* row = s.logits_.data() + r * n_expert;
      AddBiasRows(w.router_bias, row, 1);
      RouteRow(w.rule, row, n_expert, k, s.chosen_.data() + r * k, s.weights_.data() + r * k,
               s.probs_.data() + r * n_expert);
    }
  });

  // 2. Group: each expert's rows become one contiguous block of x_ (in row order), so that the
  // expert multiplies them all in one call.
  std::fill(s.first_.data(), s.first_.data() + n_expert + 1, 0);
  for (int64_t c = 0; c < int64_t{n} * k; ++c)
    ++s.first_[static_cast<std::size_t>(s.chosen_[c]) + 1];
  s.last_experts_read_ = 0;
  for (int32_t e = 0; e < n_expert; ++e) {
    s.last_experts_read_ += s.first_[e + 1] > 0 ? 1 : 0;
    s.first_[e + 1] += s.first_[e];
  }
  std::fill(s.filled_.data(), s.filled_.data() + n_expert, 0);
  for (int64_t r = 0; r < n; ++r) {
    for (int32_t j = 0; j < k; ++j) {
      const int32_t e = s.chosen_[r * k + j];
      const int32_t slot = s.first_[e] + s.filled_[e]++;
      s.slot_[r * k + j] = slot;
      std::copy(x + r * n_embd, x + (r + 1) * n_embd, s.x_.data() + slot * n_embd);
    }
  }

  // 3. Each expert that a row chose, over all of its rows: its weights are read once.
  for (int32_t e = 0; e < n_expert; ++e) {
    const int32_t first = s.first_[e];
    const int32_t rows = s.first_[e + 1] - first;
    if (rows == 0) continue;
    const WeightView gate = ExpertWeights::Slice(w.gate, n_expert, e);
    const WeightView up = ExpertWeights::Slice(w.up, n_expert, e);
    const WeightView down = ExpertWeights::Slice(w.down, n_expert, e);
    auto bias = [e](const std::vector<float>& b, int64_t width) {
      return b.empty() ? nullptr : b.data() + e * width;
    };
    GatedFeedForward({gate, up, down, activation, bias(w.gate_bias, n_ff), bias(w.up_bias, n_ff),
                      bias(w.down_bias, n_embd)},
                     s.x_.data() + first * n_embd, rows, s.gate_.data() + first * n_ff,
                     s.up_.data() + first * n_ff, s.out_.data() + first * n_embd, matmul_scratch,
                     pool);
  }

  // 4. Each row's weighted sum over its ranks, in rank order (as llama.cpp adds its experts'
  // views): the same operations whatever else is in the batch.
  ParallelForWork(pool, n, ElementwiseMacs(int64_t{n} * k * n_embd),
                  [&](int64_t begin, int64_t end) {
                    for (int64_t r = begin; r < end; ++r) {
                      float* o = out + r * n_embd;
                      for (int32_t j = 0; j < k; ++j) {
                        const float wj = s.weights_[r * k + j];
                        const float* y = s.out_.data() + int64_t{s.slot_[r * k + j]} * n_embd;
                        if (j == 0) {
                          for (int64_t d = 0; d < n_embd; ++d) o[d] = wj * y[d];
                        } else {
                          for (int64_t d = 0; d < n_embd; ++d) o[d] += wj * y[d];
                        }
                      }
                    }
                  });
}

}  // namespace grove
