// Sequoia's positional acceptance vector (Def. 3.1), estimated from verified trees: p_k is the
// chance that a node's rank-k child is the one accepted. A verified node with m children whose
// rank-r child was accepted is one observation of "rank i accepted" for each i <= m (yes for
// i = r, no otherwise); with none accepted, a "no" for every i <= m. Under the positional model the
// rate of yes among nodes with at least i children is p_i. Counts fade (Fade), so the estimate
// follows a text whose predictability changes; a prior enters as pseudo-observations of every
// rank. Used by `--spec auto`'s planner (one sequence) and by the server's trees by concurrency
// (every sequence served).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "speculate/token_tree.h"

namespace grove {

class PositionalAcceptance {
 public:
  // Ranks both planners estimate: a node's ninth-ranked child is rarely the one accepted, and the
  // Sequoia table gives trees no wider than this per node.
  static constexpr int32_t kPlannedRanks = 8;

  // `prior` (ranks beyond it count as 0) as `weight` observations of each of `ranks` ranks.
  PositionalAcceptance(int32_t ranks, std::span<const double> prior, double weight);

  // Multiplies every count by `factor` (0 < factor <= 1).
  void Fade(double factor);
  // One verified tree: the root, then each accepted node (root to leaf); the last one's children,
  // if any, were all rejected.
  void Observe(const TokenTree& tree, std::span<const int32_t> accepted);
  // The estimate: each rank's rate of yes; positional acceptance events are disjoint, so a sum
  // above 1 (counting noise) is scaled back. Writes ranks() values.
  void Estimate(std::span<double> out) const;
  int32_t ranks() const { return static_cast<int32_t>(tried_.size()); }

 private:
  std::vector<double> tried_;     // faded count of nodes with >= k children verified
  std::vector<double> accepted_;  // faded count of those that accepted their rank-k child
};

}  // namespace grove
