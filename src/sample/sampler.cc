#include "sample/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "base/error.h"
#include "kernels/kernel_set.h"
#include "ops/activation.h"

namespace grove {
namespace {

// Top-p sorts only as much of the vocabulary as it needs: the most likely kFirstSortedChunk
// candidates first (one O(vocab) selection), then four times more each time the mass is still
// short. A peaked distribution stops after the first chunk, a flat one after a few rounds; never a
// sort of the whole vocabulary up front.
constexpr int32_t kFirstSortedChunk = 64;

// Scores TopTokens scans per SIMD call (a stack buffer of candidate indices this long).
constexpr int32_t kTopTokensBlock = 512;

// The sum of x[0, n) in double with eight partial sums: one running sum waited on each add's
// latency (0.2 ms for a 152k vocabulary). The order depends only on n.
double SumInDouble(const float* x, int32_t n) {
  double part[8] = {};
  int32_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int32_t j = 0; j < 8; ++j) part[j] += x[i + j];
  }
  for (; i < n; ++i) part[0] += x[i];
  return ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
}

}  // namespace

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
  GROVE_CHECK(probs.size() == logits.size() && n > 0);
  std::fill(probs.begin(), probs.end(), 0.0f);
  kept_ = 0;
  if (params_.greedy()) {
    probs[Argmax(logits)] = 1.0f;
    return;
  }
  // With top-k, order_ comes in the candidate order already (top-p need not sort).
  const bool ordered = params_.top_k > 0 && params_.top_k < n;
  int32_t kept = ordered ? KeepTopK(logits) : KeepAll(n);
  if (kept == 0) {  // every logit -inf or NaN: nothing has mass; one-hot, as greedy
    probs[Argmax(logits)] = 1.0f;
    return;
  }
  ScaledExp(logits, kept, ordered);
  // Summed again in double: the kernel's float sum drifts by ~1e-5 over a large vocabulary, which
  // would move top-p's cut by several candidates of the flat tail.
  const double sum = SumInDouble(values_.data(), kept);
  // min-p and top-p both keep a prefix of the candidate order, so the kept set is the shorter of
  // the two prefixes: drop every candidate under min_p first (no order needed), then find top-p's
  // cut among the rest. top-p's masses stay relative to the top-k set, as when it runs first.
  if (params_.min_p > 0.0f) kept = ordered ? KeepMinPOrdered(kept) : KeepMinPScanned(kept);
  if (params_.top_p < 1.0f) kept = KeepTopP(logits, kept, sum, ordered);
  double total = 0.0;
  for (int32_t i = 0; i < kept; ++i) total += values_[i];
  const double inv_total = 1.0 / total;
  for (int32_t i = 0; i < kept; ++i) probs[order_[i]] = static_cast<float>(values_[i] * inv_total);
  kept_ = kept;
}

int32_t Sampler::KeepTopK(std::span<const float> logits) {
  // The k best in order, by TopTokens' SIMD scan: an nth_element over the vocabulary's indices
  // cost 7 ns a token through its indirect comparisons (1.1 ms a row of a 152k vocabulary).
  // TopTokens skips tokens at -inf, which would carry no mass here either.
  TopTokens(logits, params_.top_k, -std::numeric_limits<float>::infinity(), order_);
  return static_cast<int32_t>(order_.size());
}

int32_t Sampler::KeepAll(int32_t n) {
  order_.resize(n);
  if (!(params_.min_p > 0.0f)) std::iota(order_.begin(), order_.end(), 0);  // else min-p's scan
  return n;
}

// exp((l - max) / T) once per candidate; the top candidate's value is exactly 1, so the min-p
// test compares values with min_p directly, and top-p reads each candidate's mass as value / sum.
void Sampler::ScaledExp(std::span<const float> logits, int32_t kept, bool ordered) {
  const float inv_t = 1.0f / params_.temperature;
  values_.resize(logits.size());
  if (ordered) {
    for (int32_t i = 0; i < kept; ++i) values_[i] = logits[order_[i]] * inv_t;
  } else {
    for (int32_t i = 0; i < kept; ++i) values_[i] = logits[i] * inv_t;  // candidate i is token i
  }
  ExpSubMax(values_.data(), kept);
}

int32_t Sampler::KeepMinPOrdered(int32_t kept) {
  int32_t out = 0;
  for (int32_t i = 0; i < kept; ++i) {
    if (values_[i] >= params_.min_p) {
      values_[out] = values_[i];
      order_[out++] = order_[i];
    }
  }
  return out;
}

// The whole vocabulary: a SIMD scan lists the few at or above min_p (x > the float just below it),
// block by block; each lands at or before its own index, so compacting in place is safe.
int32_t Sampler::KeepMinPScanned(int32_t kept) {
  const IndicesAboveFn indices_above = ActiveKernels().indices_above;
  const float below_min_p = std::nextafter(params_.min_p, 0.0f);
  int32_t found[kTopTokensBlock];
  int32_t out = 0;
  for (int32_t block = 0; block < kept; block += kTopTokensBlock) {
    const int32_t len = std::min(kTopTokensBlock, kept - block);
    const int32_t count = indices_above(values_.data() + block, len, below_min_p, found);
    for (int32_t c = 0; c < count; ++c) {
      values_[out] = values_[block + found[c]];
      order_[out++] = block + found[c];
    }
  }
  return out;
}

// Sorts the candidates' (value, id) pairs chunk by chunk until the mass reaches top_p.
int32_t Sampler::KeepTopP(std::span<const float> logits, int32_t kept, double sum, bool ordered) {
  // The order every filter cuts along: logit descending, lower id first on ties.
  auto pair_before = [&](const Candidate& a, const Candidate& b) {
    return logits[a.token] > logits[b.token] ||
           (logits[a.token] == logits[b.token] && a.token < b.token);
  };
  pairs_.reserve(logits.size());  // kept varies from row to row; grow once
  pairs_.resize(kept);
  for (int32_t i = 0; i < kept; ++i) pairs_[i] = {order_[i], values_[i]};
  const double target = params_.top_p * sum;
  double mass = 0.0;
  int32_t sorted = 0, cut = kept;
  while (sorted < kept && cut == kept) {
    const int32_t chunk_end = std::min(kept, std::max(kFirstSortedChunk, 4 * sorted));
    if (!ordered) {
      if (chunk_end < kept) {
        std::nth_element(pairs_.begin() + sorted, pairs_.begin() + (chunk_end - 1), pairs_.end(),
                         pair_before);
      }
      std::sort(pairs_.begin() + sorted, pairs_.begin() + chunk_end, pair_before);
    }
    for (int32_t i = sorted; i < chunk_end; ++i) {
      mass += pairs_[i].value;
      if (mass >= target) {
        cut = i + 1;
        break;
      }
    }
    sorted = chunk_end;
  }
  for (int32_t i = 0; i < cut; ++i) {
    order_[i] = pairs_[i].token;
    values_[i] = pairs_[i].value;
  }
  return cut;
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

int32_t Sampler::Sample(std::span<const float> logits, uint64_t sequence, uint64_t position,
                        uint32_t draw) {
  if (params_.greedy()) return Argmax(logits);
  probs_.resize(logits.size());
  Distribution(logits, probs_);
  const double u = rng_.Uniform(sequence, position, draw);
  if (kept_ == 0) return DrawFrom(probs_, u);
  // DrawFrom's draw without its two passes over the whole vocabulary (a 152k one spent 0.3 ms a
  // token there): it sums and scans the masses in id order, and every token outside the kept
  // candidates has mass 0, which changes no sum. So the kept ones in id order give its token.
  std::sort(order_.begin(), order_.begin() + kept_);
  double total = 0.0;
  for (int32_t i = 0; i < kept_; ++i) total += probs_[order_[i]];
  const double target = u * total;
  double acc = 0.0;
  int32_t last = -1;
  for (int32_t i = 0; i < kept_; ++i) {
    const float p = probs_[order_[i]];
    if (p <= 0.0f) continue;
    acc += p;
    last = order_[i];
    if (target < acc) return last;
  }
  return last;
}

void TopTokens(std::span<const float> scores, int32_t k, float floor,
               std::vector<int32_t>& tokens) {
  tokens.clear();
  if (k <= 0) return;
  const int32_t n = static_cast<int32_t>(scores.size());
  const IndicesAboveFn indices_above = ActiveKernels().indices_above;
  // Scanning ids upward, a token enters only if strictly better than the current k-th: on ties
  // the earlier (lower) id stays ahead, which is the order's tie rule. A SIMD scan of each block
  // lists the tokens above the k-th as it stood at the block's start (a superset of the ones that
  // can enter), so the sorted insertion runs for a few dozen tokens of a vocabulary row.
  float kth = floor;
  tokens.reserve(static_cast<std::size_t>(k) + 1);
  auto offer = [&](int32_t x) {
    const float s = scores[x];
    if (!(s > kth)) return;
    // Sorted insertion, shifting by hand (vector::insert calls memmove for a few elements).
    std::size_t at = tokens.size();
    tokens.push_back(x);
    for (; at > 0 && scores[tokens[at - 1]] < s; --at) tokens[at] = tokens[at - 1];
    tokens[at] = x;
    if (static_cast<int32_t>(tokens.size()) > k) tokens.pop_back();
    if (static_cast<int32_t>(tokens.size()) == k) kth = scores[tokens.back()];
  };
  // The first k tokens fill the list directly, so the scans that follow start from a k-th best.
  const int32_t head = std::min(k, n);
  for (int32_t x = 0; x < head; ++x) offer(x);
  // Blocks grow from 64 to kTopTokensBlock: the k-th best rises fastest early on, and a small
  // first block keeps the candidates of its stale threshold few.
  int32_t candidates[kTopTokensBlock];
  int32_t block_size = 64;
  for (int32_t block = head; block < n;
       block += block_size, block_size = std::min(2 * block_size, kTopTokensBlock)) {
    const int32_t len = std::min(block_size, n - block);
    const int32_t found = indices_above(scores.data() + block, len, kth, candidates);
    for (int32_t c = 0; c < found; ++c) offer(block + candidates[c]);
  }
}

}  // namespace grove
