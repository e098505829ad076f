// The draft side of the verification rules: how a node's children are drawn from its draft row so
// that the rule verifying them replays the same proposal distributions (see verify.h).
#include <algorithm>

#include "base/error.h"
#include "sample/sampler.h"
#include "speculate/verify.h"

namespace grove {
namespace {

// Inverse-CDF draw over the tokens not in `drawn_sorted`, weighted by q, or uniformly when no
// undrawn token has q > 0 (Sequoia Algorithm 2, lines 10-16). Whether the fallback applies is
// decided on the support, as Verifier::LoadSequoiaDraft does, so both switch at the same draw.
// O(vocab) per draw: the sorted drawn list is walked beside the vocabulary.
int32_t DrawWithoutReplacement(std::span<const float> q, const std::vector<int32_t>& drawn_sorted, double u) {
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
  const double total = fallback ? static_cast<double>(n) - static_cast<double>(drawn_sorted.size()) : remaining;
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

void DrawChildren(std::span<const float> q, int32_t k, ChildDraw draw, const CounterRng& rng, uint64_t sequence,
                  int64_t position, std::vector<int32_t>& tokens) {
  const int32_t n = static_cast<int32_t>(q.size());
  tokens.clear();
  if (k < 0) Fail("draw children: k = ", k, " is negative");
  if (draw != ChildDraw::kWithReplacement && k > n) {
    Fail("draw children: ", k, " children ", ChildDrawName(draw), " from a vocabulary of ", n, " tokens");
  }
  const uint64_t pos = static_cast<uint64_t>(position);
  switch (draw) {
    case ChildDraw::kDeterministic: {
      // The k largest q in the order (q descending, id ascending): each pick is the best token
      // strictly after the previous pick in that order, so O(vocab) per child and no membership test.
      auto before = [&](int32_t a, int32_t b) { return q[a] > q[b] || (q[a] == q[b] && a < b); };
      for (int32_t i = 0; i < k; ++i) {
        int32_t best = -1;
        for (int32_t x = 0; x < n; ++x) {
          if (!tokens.empty() && !before(tokens.back(), x)) continue;
          if (best < 0 || before(x, best)) best = x;
        }
        tokens.push_back(best);
      }
      return;
    }
    case ChildDraw::kWithReplacement: {
      double total = 0.0;
      for (float v : q) total += v > 0.0f ? v : 0.0f;
      if (k > 0 && !(total > 0.0)) Fail("draw children: the draft row has no probability mass");
      for (int32_t i = 0; i < k; ++i) {
        tokens.push_back(Sampler::DrawFrom(q, rng.Uniform(sequence, pos, kDraftDrawBase + static_cast<uint32_t>(i))));
      }
      return;
    }
    case ChildDraw::kWithoutReplacement: {
      std::vector<int32_t> drawn_sorted;  // one allocation per node, none per draw
      drawn_sorted.reserve(static_cast<size_t>(k));
      for (int32_t i = 0; i < k; ++i) {
        const int32_t x =
            DrawWithoutReplacement(q, drawn_sorted, rng.Uniform(sequence, pos, kDraftDrawBase + static_cast<uint32_t>(i)));
        tokens.push_back(x);
        drawn_sorted.insert(std::upper_bound(drawn_sorted.begin(), drawn_sorted.end(), x), x);
      }
      return;
    }
  }
}

}  // namespace grove
