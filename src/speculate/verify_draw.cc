// The draft side of the verification rules: how a node's children are drawn from its draft row so
// that the rule verifying them replays the same proposal distributions (see verify.h).
#include <algorithm>
#include <limits>

#include "base/error.h"
#include "sample/sampler.h"
#include "speculate/verify.h"

namespace grove {
namespace {

// Inverse-CDF draw over the tokens not in `drawn_sorted`, weighted by q, or uniformly when no
// undrawn token has q > 0 (Sequoia Algorithm 2, lines 10-16). Whether the fallback applies is
// decided on the support, as Verifier::LoadSequoiaDraft does, so both switch at the same draw.
// O(vocab) per draw: the sorted drawn list is walked beside the vocabulary.
int32_t DrawWithoutReplacement(std::span<const float> q, std::span<const int32_t> drawn_sorted,
                               double u) {
  const int32_t n = static_cast<int32_t>(q.size());
  double remaining = 0.0;
  size_t next_drawn = 0;
  for (int32_t x = 0; x < n; ++x) {
    if (next_drawn < drawn_sorted.size() && drawn_sorted[next_drawn] == x) {
      ++next_drawn;
    } else if (q[x] > 0.0f) {
      remaining += q[x];
    }
  }
  const bool fallback = !(remaining > 0.0);
  const double total =
      fallback ? static_cast<double>(n) - static_cast<double>(drawn_sorted.size()) : remaining;
  const double target = u * total;
  double acc = 0.0;
  int32_t last = -1;
  next_drawn = 0;
  for (int32_t x = 0; x < n; ++x) {
    if (next_drawn < drawn_sorted.size() && drawn_sorted[next_drawn] == x) {
      ++next_drawn;
      continue;
    }
    const double w = fallback ? 1.0 : static_cast<double>(q[x]);
    if (!(w > 0.0)) continue;
    acc += w;
    last = x;
    if (target < acc) return x;
  }
  return last;  // rounding left u just above the total: the last token with weight
}

}  // namespace

void DrawChildren(std::span<const float> q, int32_t k, ChildDraw draw, const CounterRng& rng,
                  uint64_t sequence, int64_t position, std::vector<int32_t>& tokens) {
  const int32_t n = static_cast<int32_t>(q.size());
  tokens.clear();
  if (k < 0) Fail("draw children: k = ", k, " is negative");
  if (draw != ChildDraw::kWithReplacement && k > n) {
    Fail("draw children: ", k, " children ", ChildDrawName(draw), " from a vocabulary of ", n,
         " tokens");
  }
  const uint64_t pos = static_cast<uint64_t>(position);
  switch (draw) {
    case ChildDraw::kDeterministic:
      TopTokens(q, k, -std::numeric_limits<float>::infinity(), tokens);
      return;
    case ChildDraw::kWithReplacement: {
      double total = 0.0;
      for (float v : q) total += v > 0.0f ? v : 0.0f;
      if (k > 0 && !(total > 0.0)) Fail("draw children: the draft row has no probability mass");
      for (int32_t i = 0; i < k; ++i) {
        tokens.push_back(Sampler::DrawFrom(
            q, rng.Uniform(sequence, pos, kDraftDrawBase + static_cast<uint32_t>(i))));
      }
      return;
    }
    case ChildDraw::kWithoutReplacement: {
      // `tokens` doubles as the sorted list of drawn tokens while drawing (no scratch to allocate),
      // and is put back in draw order at the end from the draw order kept in its tail.
      tokens.resize(2 * static_cast<size_t>(k));
      const auto drawn_sorted = tokens.begin();
      const auto in_order = tokens.begin() + k;
      for (int32_t i = 0; i < k; ++i) {
        const std::span<const int32_t> drawn(&*drawn_sorted, static_cast<size_t>(i));
        const int32_t x = DrawWithoutReplacement(
            q, drawn, rng.Uniform(sequence, pos, kDraftDrawBase + static_cast<uint32_t>(i)));
        in_order[i] = x;
        auto at = std::upper_bound(drawn_sorted, drawn_sorted + i, x);
        std::copy_backward(at, drawn_sorted + i, drawn_sorted + i + 1);
        *at = x;
      }
      std::copy(in_order, in_order + k, tokens.begin());
      tokens.resize(static_cast<size_t>(k));
      return;
    }
  }
}

}  // namespace grove
