#include "speculate/sequoia.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "base/error.h"

namespace grove {
namespace {

constexpr double kMinusInf = -std::numeric_limits<double>::infinity();
// Measured vectors are ratios of counts (or means of probabilities) and can exceed 1 by rounding.
constexpr double kSumSlack = 1e-6;

}  // namespace

void ValidateAcceptanceVector(std::span<const double> acceptance) {
  if (acceptance.empty()) Fail("sequoia: acceptance vector is empty");
  double sum = 0.0;
  for (size_t k = 0; k < acceptance.size(); ++k) {
    if (!(acceptance[k] >= 0.0 && acceptance[k] <= 1.0)) {
      Fail("sequoia: acceptance p_", k + 1, " = ", acceptance[k], " is outside [0, 1]");
    }
    sum += acceptance[k];
  }
  if (sum > 1.0 + kSumSlack) {
    Fail("sequoia: acceptance vector sums to ", sum,
         " > 1; p_k must be the probability that child k is the accepted one (disjoint events)");
  }
}

double PositionalExpectedLength(const TokenTree& tree, std::span<const double> acceptance) {
  std::vector<double> f(static_cast<size_t>(tree.size()));
  double total = 1.0;  // f(root) = 1
  for (int32_t v = 0; v < tree.size(); ++v) {
    const size_t rank = static_cast<size_t>(tree.rank(v));
    const double p = rank < acceptance.size() ? acceptance[rank] : 0.0;
    const int32_t parent = tree.node(v).parent;
    f[static_cast<size_t>(v)] = (parent < 0 ? 1.0 : f[static_cast<size_t>(parent)]) * p;
    total += f[static_cast<size_t>(v)];
  }
  return total;
}

SequoiaTable SequoiaTable::Build(std::span<const double> acceptance, int32_t max_size,
                                 int32_t max_depth) {
  SequoiaTable t;
  t.Compute(acceptance, max_size, max_depth);
  return t;
}

void SequoiaTable::Compute(std::span<const double> acceptance, int32_t max_size,
                           int32_t max_depth) {
  ValidateAcceptanceVector(acceptance);
  if (max_size < 1) Fail("sequoia: tree size ", max_size, " must be >= 1 (the root)");
  if (max_depth < 0) Fail("sequoia: depth bound ", max_depth, " must be >= 1, or 0 for none");
  const int64_t branchings =
      std::min<int64_t>(static_cast<int64_t>(acceptance.size()), max_size - 1);
  const int64_t cells = (int64_t{max_size} + 1) * (int64_t{max_depth} + 1) * (branchings + 1);
  if (cells > kMaxCells) {
    Fail("sequoia: trees of up to ", max_size, " tokens", max_depth > 0 ? " and depth " : "",
         max_depth > 0 ? std::to_string(max_depth) : "", " with up to ", branchings,
         " children a node need a table of ", cells, " cells, more than the ", kMaxCells,
         " allowed: ask for a smaller size or depth");
  }
  Reset(acceptance, max_size, max_depth);
  // Slots that exist: 0 when unbounded; depth budgets 1..D when bounded (slot 0 stays -inf).
  const int32_t first_slot = max_depth == 0 ? 0 : 1;
  for (int32_t s = first_slot; s < n_slots_; ++s) {
    value_[At(1, s, 0)] = 1.0;  // the root alone emits one token
    best_[AtBest(1, s)] = 1.0;
    best_size_[AtBest(1, s)] = 1;
  }
  for (int32_t n = 2; n <= max_size; ++n) {
    for (int32_t s = first_slot; s < n_slots_; ++s) FillSize(n, s);
  }
}

void SequoiaTable::Reset(std::span<const double> acceptance, int32_t max_size, int32_t max_depth) {
  acceptance_.assign(acceptance.begin(), acceptance.end());
  max_size_ = max_size;
  max_depth_ = max_depth;
  max_branch_ = std::min<int32_t>(static_cast<int32_t>(acceptance.size()), max_size - 1);
  n_slots_ = max_depth == 0 ? 1 : max_depth + 1;
  const int32_t n_b = max_branch_ + 1;
  value_.assign(static_cast<size_t>(max_size + 1) * n_slots_ * n_b, kMinusInf);
  split_.assign(value_.size(), 0);
  best_.assign(static_cast<size_t>(max_size + 1) * n_slots_, kMinusInf);
  best_b_.assign(best_.size(), 0);
  best_size_.assign(best_.size(), 0);
  queue_.reserve(static_cast<size_t>(max_size));
  child_sizes_.reserve(static_cast<size_t>(max_branch_));
}

void SequoiaTable::FillSize(int32_t n, int32_t s) {
  // T[n][s][b] = max_m T[n-m][s][b-1] + p_b * G[m][child slot] (Eq. 3 / Eq. 4): the root with its
  // first b-1 subtrees (size n-m), plus the b-th child's subtree of size m, reached with prob. p_b.
  const int32_t cs = ChildSlot(s);
  // Depth budget 1 holds the root alone: no b >= 1 term, only the carried-over G[n-1] below.
  const int32_t max_b = max_depth_ != 0 && s == 1 ? 0 : max_branch_;
  double best = kMinusInf;
  int32_t best_b = 0;
  for (int32_t b = 1; b <= max_b; ++b) {
    const double p_b = acceptance_[static_cast<size_t>(b - 1)];
    double value = kMinusInf;
    int32_t split = 0;
    for (int32_t m = 1; m <= n - 1; ++m) {
      const double rest = value_[At(n - m, s, b - 1)];
      const double sub = best_[AtBest(m, cs)];
      if (rest == kMinusInf || sub == kMinusInf) continue;
      const double v = rest + p_b * sub;
      if (v > value) {
        value = v;
        split = m;
      }
    }
    value_[At(n, s, b)] = value;
    split_[At(n, s, b)] = split;
    if (value > best) {
      best = value;
      best_b = b;
    }
  }
  best_b_[AtBest(n, s)] = best_b;
  // G[n] is the best over trees of AT MOST n nodes. With B = |p| some (n, d) admit no tree of
  // exactly n nodes (|p| = 1 and d < n: only chains), and a tree of fewer nodes is what the
  // paper's DP with B = N - 1 would pad with never-accepted children of rank > |p|. Keeping the
  // smaller tree gives the same value without verifying tokens that cannot be accepted; ties
  // prefer it for the same reason.
  const size_t prev = AtBest(n - 1, s);
  if (best_[prev] >= best) {
    best_[AtBest(n, s)] = best_[prev];
    best_size_[AtBest(n, s)] = best_size_[prev];
  } else {
    best_[AtBest(n, s)] = best;
    best_size_[AtBest(n, s)] = n;
  }
}

int32_t SequoiaTable::Slot(int32_t depth) const {
  if (max_depth_ == 0) Fail("sequoia: this table has no depth bound; build it with max_depth > 0");
  if (depth < 1) Fail("sequoia: depth ", depth, " must be >= 1 (the root level)");
  return std::min(depth, max_depth_);
}

double SequoiaTable::Value(int32_t size) const {
  return max_depth_ == 0 ? Value(size, 0) : Value(size, max_depth_);
}

double SequoiaTable::Value(int32_t size, int32_t depth) const {
  if (size < 1 || size > max_size_) {
    Fail("sequoia: tree size ", size, " is outside the table's [1, ", max_size_, "]");
  }
  const int32_t slot = max_depth_ == 0 && depth == 0 ? 0 : Slot(depth);
  return best_[AtBest(size, slot)];
}

TokenTree SequoiaTable::Tree(int32_t size) const {
  if (max_depth_ != 0) return Tree(size, max_depth_);
  TokenTree tree;
  Rebuild(size, 0, tree);
  return tree;
}

TokenTree SequoiaTable::Tree(int32_t size, int32_t depth) const {
  TokenTree tree;
  TreeInto(size, depth, tree);
  return tree;
}

void SequoiaTable::TreeInto(int32_t size, int32_t depth, TokenTree& tree) const {
  Rebuild(size, Slot(depth), tree);
}

void SequoiaTable::Rebuild(int32_t size, int32_t slot, TokenTree& tree) const {
  if (size < 1 || size > max_size_) {
    Fail("sequoia: tree size ", size, " is outside the table's [1, ", max_size_, "]");
  }
  if (best_[AtBest(size, slot)] == kMinusInf) {
    Fail("sequoia: no tree of size ", size, " fits in depth ", slot);
  }
  // Breadth-first expansion of (node, subtree size, slot) so nodes come out in level order. Each
  // subtree is rebuilt from its own pointers: the paper's Python shares subtree objects (a DAG); a
  // flat node array needs a copy per occurrence, which this gives for free.
  tree.Clear();
  queue_.assign(1, {-1, size, slot});
  for (std::size_t head = 0; head < queue_.size(); ++head) {
    const Pending p = queue_[head];
    const int32_t actual = best_size_[AtBest(p.size, p.slot)];  // may be below the bound p.size
    if (actual == 1) continue;
    const int32_t branches = best_b_[AtBest(actual, p.slot)];
    // Peel the last child off first (the recursion splits off child b), then emit in rank order.
    child_sizes_.assign(static_cast<size_t>(branches), 0);
    int32_t rest = actual;
    for (int32_t b = branches; b >= 1; --b) {
      const int32_t m = split_[At(rest, p.slot, b)];
      child_sizes_[static_cast<size_t>(b - 1)] = m;
      rest -= m;
    }
    GROVE_CHECK(rest == 1, "sequoia: split pointers leave ", rest, " nodes for the root");
    for (int32_t b = 1; b <= branches; ++b) {
      const int32_t child = tree.AddChild(
          p.node, kNoToken, static_cast<float>(acceptance_[static_cast<size_t>(b - 1)]));
      queue_.push_back({child, child_sizes_[static_cast<size_t>(b - 1)], ChildSlot(p.slot)});
    }
  }
}

SizeDepthChoice ChooseSizeAndDepth(const SequoiaTable& table, const VerifyCostCurve& verify_cost,
                                   double draft_seconds_per_level) {
  return ChooseSizeAndDepth(table, verify_cost,
                            SizeDepthSearch{.draft_seconds_per_level = draft_seconds_per_level});
}

SizeDepthChoice ChooseSizeAndDepth(const SequoiaTable& table, const VerifyCostCurve& verify_cost,
                                   const SizeDepthSearch& search) {
  if (table.max_depth() == 0) {
    Fail("sequoia: the (n, d) search needs a depth-bounded table (max_depth > 0)");
  }
  const double c = search.draft_seconds_per_level;
  if (!(c >= 0.0) || !std::isfinite(c))
    Fail("sequoia: draft cost ", c, " s per level must be >= 0");
  const double plain_seconds = verify_cost.Seconds(1);
  const int32_t max_n = std::min(table.max_size(), verify_cost.max_size());
  // Plain decoding is a candidate: one token per t(1).
  SizeDepthChoice best{.size = 1,
                       .depth = 1,
                       .expected_tokens = 1.0,
                       .step_seconds = plain_seconds,
                       .tokens_per_second = search.include_plain ? 1.0 / plain_seconds : 0.0,
                       .speedup = 1.0};
  const int32_t passes_offset = search.root_level_drafted ? 0 : 1;
  for (int32_t n = 2; n <= max_n; ++n) {
    const double verify_seconds = verify_cost.Seconds(n);
    for (int32_t d = 2; d <= table.max_depth(); ++d) {
      const double g = table.Value(n, d);
      const double step = verify_seconds + (d - passes_offset) * c;
      const double rate = g / step;
      if (rate > best.tokens_per_second) {
        best = {.size = n,
                .depth = d,
                .expected_tokens = g,
                .step_seconds = step,
                .tokens_per_second = rate,
                .speedup = rate * plain_seconds};
      }
    }
  }
  if (!search.include_plain && best.size == 1) best.tokens_per_second = 1.0 / plain_seconds;
  return best;
}

}  // namespace grove
