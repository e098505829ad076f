// Sequoia's optimal static trees (Chen et al., arXiv 2402.12374; digest 001-sequoia.md §2.1-2.4).
//
// Positional acceptance (Def. 3.1/3.2): the k-th child of an accepted node is the accepted one with
// probability p_k, depending on k only. The events "child k accepted" are disjoint, so p_k >= 0 and
// sum_k p_k <= 1. Under this model a tree T emits F(T) = sum over nodes v (root included) of
// f(v) = prod of p_i over the child ranks i on the root-to-v path (Prop. 3.4). The dynamic program
// finds, for every size n and depth d, the tree maximising F.
//
// Sizes and depths follow the paper, not TokenTree: the size n COUNTS THE ROOT (n tokens go through
// the target) and the depth d counts levels including the root (d = 1 is the root alone; d is also
// the number of draft passes per step). Tree(n, d) therefore returns a TokenTree of n - 1 nodes and
// depth at most d - 1.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "speculate/token_tree.h"
#include "speculate/verify_cost.h"

namespace grove {

// F(T) of Prop. 3.4 for any tree under the acceptance vector p (p[0] = p_1): a node's factor is
// p[rank], 0 for ranks beyond the vector. Ignores the nodes' own prob fields.
double PositionalExpectedLength(const TokenTree& tree, std::span<const double> acceptance);

// Throws grove::Error unless every p_k is in [0, 1] and their sum is at most 1 (a small rounding
// slack is allowed: measured vectors are sums of counts).
void ValidateAcceptanceVector(std::span<const double> acceptance);

// The DP tables G(n) or G(n, d) for n <= max_size, and the argmax pointers to rebuild the trees.
class SequoiaTable {
 public:
  // The most cells (sizes x depth budgets x branchings) a table holds, 12 bytes each: 192 MiB. A
  // spec's size and depth come from users and requests (sequoia:1000000,1000 asked for terabytes);
  // what planners build (depth 16, sizes of a verify batch) holds far fewer.
  static constexpr int64_t kMaxCells = int64_t{1} << 24;

  // max_depth = 0: depth unbounded, Algorithm 1, O(N^2 B). max_depth = D >= 1: Algorithm 4 with the
  // 1-D vector tiled over levels, O(N^2 D B), which gives G(n, d) for every d <= D at once (the
  // rows do not depend on the global D when p does not depend on depth). B, the most children a
  // node may have, is min(|p|, N - 1): a child of rank > |p| is never accepted, so it can only
  // waste a node. Throws grove::Error on a table of more than kMaxCells.
  static SequoiaTable Build(std::span<const double> acceptance, int32_t max_size,
                            int32_t max_depth = 0);
  // Build in place, reusing this table's storage: no allocation once it has held a table as large
  // (the auto planner recomputes its table every few dozen steps).
  void Compute(std::span<const double> acceptance, int32_t max_size, int32_t max_depth);

  int32_t max_size() const { return max_size_; }
  int32_t max_depth() const { return max_depth_; }  // 0: unbounded
  std::span<const double> acceptance() const { return acceptance_; }

  // G(n): unbounded table, or the deepest depth of a bounded one. G(n, d): bounded tables only
  // (any d >= 1; depths above max_depth are clamped to it, which is exact only when d >= n).
  // Values are the best over trees of AT MOST n nodes (root included). This equals the paper's
  // G(n, d) with B = N - 1 and p_k = 0 beyond |p|: a child of rank > |p| is never accepted, so the
  // paper's optimum may pad with such nodes; the trees here leave them out instead.
  double Value(int32_t size) const;
  double Value(int32_t size, int32_t depth) const;

  // The optimal tree itself: at most n - 1 nodes (fewer only when more cannot add value, see
  // above), level order, tokens kNoToken, prob = p_k of the node's rank (so tree.ExpectedLength()
  // equals the value). Ties go to the smaller tree, then the smallest branching and first split.
  TokenTree Tree(int32_t size) const;
  TokenTree Tree(int32_t size, int32_t depth) const;
  // Tree(size, depth) written into `tree` (cleared first; its capacity reused).
  void TreeInto(int32_t size, int32_t depth, TokenTree& tree) const;

 private:
  // Compute's steps: the table's shape and storage, then T[n][slot][*] and G[n][slot] of one
  // size from the smaller ones.
  void Reset(std::span<const double> acceptance, int32_t max_size, int32_t max_depth);
  void FillSize(int32_t n, int32_t slot);
  int32_t Slot(int32_t depth) const;  // table slot of a depth budget
  int32_t ChildSlot(int32_t slot) const { return max_depth_ == 0 ? 0 : slot - 1; }
  size_t At(int32_t n, int32_t slot, int32_t b) const {
    return (static_cast<size_t>(n) * n_slots_ + slot) * (max_branch_ + 1) + b;
  }
  size_t AtBest(int32_t n, int32_t slot) const { return static_cast<size_t>(n) * n_slots_ + slot; }
  void Rebuild(int32_t size, int32_t slot, TokenTree& tree) const;

  std::vector<double> acceptance_;
  int32_t max_size_ = 0;
  int32_t max_depth_ = 0;
  int32_t max_branch_ = 0;
  int32_t n_slots_ = 1;          // 1 when unbounded, else max_depth + 1 (slot d = depth budget d)
  std::vector<double> value_;    // T[n][slot][b]: best F with root branching b (Eq. 1)
  std::vector<int32_t> split_;   // size m of the last child's subtree achieving T[n][slot][b]
  std::vector<double> best_;     // G[n][slot]: best over trees of at most n nodes
  std::vector<int32_t> best_b_;  // argmax_b T[n][slot][b] at exactly n
  std::vector<int32_t> best_size_;  // size <= n of the tree achieving G[n][slot]
  struct Pending {
    int32_t node;  // -1: the root
    int32_t size;
    int32_t slot;
  };
  mutable std::vector<Pending> queue_;        // Rebuild's breadth-first queue
  mutable std::vector<int32_t> child_sizes_;  // Rebuild's scratch
};

// Hardware-aware choice of (n, d) (digest §2.4, Eq. 5; paper §4.1 and App. G.5).
//
// The paper maximises Speedup(n, d) = G(n, d) / (t(n) + d c) with t(n) = tau_v(n) / tau_v(1) and
// c = tau_d / tau_v(1). Multiplying by tau_v(1) gives the form implemented here, in seconds:
//   tokens_per_second(n, d) = G(n, d) / (tau_v(n) + d * tau_d),
// which has the same argmax; speedup = tokens_per_second * tau_v(1) (plain decoding emits one token
// per tau_v(1)). tau_v is a measured curve (speculate/verify_cost.h).

struct SizeDepthChoice {
  int32_t size = 1;              // n, root included; 1 is plain decoding (no tree)
  int32_t depth = 1;             // d, root level included = draft passes per step
  double expected_tokens = 1.0;  // G(n, d)
  double step_seconds = 0.0;     // tau_v(n) + d * tau_d
  double tokens_per_second = 0.0;
  double speedup = 0.0;  // against plain decoding, tokens_per_second * tau_v(1)
};

// Searches every n in [2, min(table.max_size(), curve.max_size())] and d in [2, table.max_depth()]
// (the paper's ranges) for the best tokens_per_second, against plain decoding (n = d = 1: one token
// per t(1)), which wins unless a tree is strictly faster; ties keep the smaller n, then the smaller
// d. The table must be depth-bounded. draft_seconds_per_level >= 0.
SizeDepthChoice ChooseSizeAndDepth(const SequoiaTable& table, const VerifyCostCurve& verify_cost,
                                   double draft_seconds_per_level);

// The same search with grove's own cost model options.
struct SizeDepthSearch {
  double draft_seconds_per_level = 0.0;
  // Draft passes of a tree of depth d: d in the paper's model (§4.1); d - 1 for grove's builders,
  // which never feed the deepest level to the draft (one pass per level of nodes).
  bool root_level_drafted = true;
  bool include_plain = true;  // false: the best tree even if plain decoding is faster
};
SizeDepthChoice ChooseSizeAndDepth(const SequoiaTable& table, const VerifyCostCurve& verify_cost,
                                   const SizeDepthSearch& search);

}  // namespace grove
