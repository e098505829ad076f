#include "sample/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/error.h"

namespace grove {

void SamplerParams::Validate() const {
  if (!(temperature >= 0.0f) || !std::isfinite(temperature)) {
    Fail("temperature ", temperature, " must be a finite number >= 0");
  }
  if (top_k < 0) Fail("top-k ", top_k, " must be >= 0 (0 disables it)");
  if (!(top_p > 0.0f && top_p <= 1.0f)) Fail("top-p ", top_p, " is outside (0, 1]");
  if (!(min_p >= 0.0f && min_p <= 1.0f)) Fail("min-p ", min_p, " is outside [0, 1]");
}

Sampler::Sampler(SamplerParams params) : params_(params), rng_(params.seed) { params_.Validate(); }

int32_t Sampler::Argmax(std::span<const float> logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

void Sampler::Distribution(std::span<const float> logits, std::span<float> probs) {
  const int32_t n = static_cast<int32_t>(logits.size());
  GROVE_CHECK(probs.size() == logits.size());
  std::fill(probs.begin(), probs.end(), 0.0f);
  if (params_.greedy()) {
    probs[Argmax(logits)] = 1.0f;
    return;
  }
  // Candidates sorted by logit (ties: lower id first) so each filter is a prefix cut.
  order_.resize(n);
  std::iota(order_.begin(), order_.end(), 0);
  int32_t kept = n;
  if (params_.top_k > 0 && params_.top_k < n) kept = params_.top_k;
  auto by_logit = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  std::partial_sort(order_.begin(), order_.begin() + kept, order_.end(), by_logit);

  const double inv_t = 1.0 / params_.temperature;
  const double max = logits[order_[0]] * inv_t;
  double sum = 0.0;
  for (int32_t i = 0; i < kept; ++i) sum += std::exp(logits[order_[i]] * inv_t - max);
  // top-p: the smallest prefix whose mass reaches p.
  if (params_.top_p < 1.0f) {
    double mass = 0.0;
    for (int32_t i = 0; i < kept; ++i) {
      mass += std::exp(logits[order_[i]] * inv_t - max) / sum;
      if (mass >= params_.top_p) {
        kept = i + 1;
        break;
      }
    }
  }
  // min-p: drop tokens below min_p times the top probability (exp(0) = 1 after max subtraction).
  if (params_.min_p > 0.0f) {
    int32_t i = 1;
    while (i < kept && std::exp(logits[order_[i]] * inv_t - max) >= params_.min_p) ++i;
    kept = i;
  }
  double total = 0.0;
  for (int32_t i = 0; i < kept; ++i) total += std::exp(logits[order_[i]] * inv_t - max);
  for (int32_t i = 0; i < kept; ++i) {
    probs[order_[i]] = static_cast<float>(std::exp(logits[order_[i]] * inv_t - max) / total);
  }
}

int32_t Sampler::DrawFrom(std::span<const float> probs, double u) {
  double total = 0.0;
  for (float p : probs) total += p;
  const double target = u * total;
  double acc = 0.0;
  int32_t last = -1;
  for (std::size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] <= 0.0f) continue;
    acc += probs[i];
    last = static_cast<int32_t>(i);
    if (target < acc) return last;
  }
  return last;  // rounding left u just above the total: the last token with mass
}

int32_t Sampler::Sample(std::span<const float> logits, uint64_t sequence, uint64_t position, uint32_t draw) {
  if (params_.greedy()) return Argmax(logits);
  probs_.resize(logits.size());
  Distribution(logits, probs_);
  return DrawFrom(probs_, rng_.Uniform(sequence, position, draw));
}

}  // namespace grove
