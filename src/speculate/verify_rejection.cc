// The rejection step at one node, shared by three rules (Sequoia Algorithm 2, §3.2.1):
//
//   R <- P ; D <- Q
//   for child s_i, i = 1..k:
//     if u_i < R(s_i) / D(s_i): accept s_i
//     R <- norm(max(R - D, 0))              (uses D before the update below)
//     sequoia only (the "blue" lines 10-16):
//       D(s_i) <- 0 ; if sum(D) = 0: D <- 1 on every token not yet drawn, 0 on the drawn ; D <-
//       norm(D)
//   all rejected: emit x ~ R
//
// specinfer keeps D = Q for every child (children drawn i.i.d. from Q); chain is the same with one
// child per node (Leviathan et al.; Sequoia App. D, Algorithm 3). Lossless by App. F.2.1: for any
// sequence of proposal distributions d_i that depends only on earlier proposals, the output is
// distributed as P — which holds as long as child i really was drawn from the D the verifier
// replays (CheckLossless's job).
#include <algorithm>

#include "sample/sampler.h"
#include "speculate/verify.h"

namespace grove {
namespace {

// Inverse-CDF draw from unnormalised non-negative weights; the same walk as Sampler::DrawFrom.
int32_t DrawFromWeights(std::span<const double> weights, double u) {
  double total = 0.0;
  for (double w : weights) total += w;
  const double target = u * total;
  double acc = 0.0;
  int32_t last = -1;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (weights[i] <= 0.0) continue;
    acc += weights[i];
    last = static_cast<int32_t>(i);
    if (target < acc) return last;
  }
  return last;
}

}  // namespace

// D <- Q with the drawn tokens removed, renormalised; uniform over the undrawn tokens when no
// undrawn token has Q > 0 (Algorithm 2 lines 12-16). "sum(D) = 0" is decided on the support, not on
// a floating-point sum, so the verifier and DrawChildren switch to the fallback at the same draw.
void Verifier::LoadSequoiaDraft(std::span<const float> q) {
  const size_t n = q.size();
  double remaining = 0.0;
  size_t undrawn = 0;
  for (size_t x = 0; x < n; ++x) {
    if (drawn_[x]) continue;
    ++undrawn;
    if (q[x] > 0.0f) remaining += q[x];
  }
  if (remaining > 0.0) {
    for (size_t x = 0; x < n; ++x) draft_[x] = drawn_[x] || !(q[x] > 0.0f) ? 0.0 : q[x] / remaining;
  } else {
    const double uniform = undrawn > 0 ? 1.0 / static_cast<double>(undrawn) : 0.0;
    for (size_t x = 0; x < n; ++x) draft_[x] = drawn_[x] ? 0.0 : uniform;
  }
}

int32_t Verifier::RejectAtNode(VerifyRule rule, const TokenTree& tree, int32_t node,
                               std::span<const float> p, std::span<const float> q,
                               const CounterRng& rng, uint64_t sequence, int64_t position,
                               int32_t& next_token) {
  const size_t n = p.size();
  if (residual_.size() < n) {
    residual_.resize(n);
    draft_.resize(n);
    drawn_.assign(n, 0);
  }
  const std::span<double> residual(residual_.data(), n);
  const std::span<double> draft(draft_.data(), n);
  // R and D stay views of P and Q until the first rejection (D_1 = Q for every rule): most nodes
  // accept their first child, and copying a 128k-entry row for nothing would dominate the step.
  // Only Sequoia ever makes D differ from Q.
  bool residual_live = false;
  bool draft_live = false;
  auto R = [&](size_t x) -> double { return residual_live ? residual[x] : p[x]; };
  auto D = [&](size_t x) -> double { return draft_live ? draft[x] : q[x]; };
  const std::span<const int32_t> children = tree.children(node);
  const uint64_t pos = static_cast<uint64_t>(position);
  int32_t accepted = -1;
  for (size_t i = 0; i < children.size(); ++i) {
    const int32_t s = tree.node(children[i]).token;
    // u < R/D written without the division: a child with D(s) = 0 cannot come from a draw (only
    // from a greedy top-k tree, whose target rows are one-hot) and is accepted iff R(s) > 0.
    if (rng.Uniform(sequence, pos, 1 + static_cast<uint32_t>(i)) * D(s) < R(s)) {
      accepted = children[i];
      break;
    }
    // R <- norm(max(R - D, 0)). The residual mass is the rejection probability (Lemma F.5); it is 0
    // only when R <= D everywhere, i.e. R = D and the rejection was a rounding accident (or the
    // child was not drawn from D). Then R is kept, which is what exact arithmetic implies.
    double mass = 0.0;
    for (size_t x = 0; x < n; ++x) mass += std::max(R(x) - D(x), 0.0);
    if (mass > 0.0) {
      const double inv = 1.0 / mass;
      for (size_t x = 0; x < n; ++x) residual[x] = std::max(R(x) - D(x), 0.0) * inv;
    } else if (!residual_live) {
      std::copy(p.begin(), p.end(), residual.begin());
    }
    residual_live = true;
    if (rule == VerifyRule::kSequoia && i + 1 < children.size()) {
      drawn_[s] = 1;
      LoadSequoiaDraft(q);
      draft_live = true;
    }
  }
  if (rule == VerifyRule::kSequoia) {
    for (int32_t c : children) drawn_[tree.node(c).token] = 0;
  }
  if (accepted >= 0) return accepted;
  const double u = rng.Uniform(sequence, pos, 0);
  next_token = residual_live ? DrawFromWeights(residual, u) : Sampler::DrawFrom(p, u);
  return -1;
}

}  // namespace grove
