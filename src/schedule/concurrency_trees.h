// Batched verification verifies the trees of every sequence in flight in one target forward, so a
// tree's worth depends on how many share the forward: each sequence pays its share of it, t(k n) /
// k for k trees of n tokens, plus what a step costs besides the forward (waking its drafter,
// queueing, accepting, streaming). The second part is measured while serving: on this 2-core
// machine it was 0.15 ms per sequence step, more than a plain step's share of the forward at 4
// sequences (0.065 ms), and it is what makes trees pay even when many share a forward. The table
// holds, for k = 1..max sequences, the Sequoia tree maximising G(n, d) / (t(k n) / k + o), with
// at most node_budget tokens in a forward and never more nodes than the tree chosen for one
// sequence alone (whose buffers every session reserved).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "speculate/sequoia.h"
#include "speculate/token_tree.h"

namespace grove {

class ConcurrencyTrees {
 public:
  ConcurrencyTrees() = default;
  // curve: t(n) up to at least the largest forward; acceptance: p_k; max_size: tokens (root
  // included) of the tree for one sequence; max_concurrency >= 1. Until the first Update the
  // overhead is taken to be t(1), a plain step's forward (what it was on the bundled pair).
  ConcurrencyTrees(VerifyCostCurve curve, std::vector<double> acceptance, int32_t max_size,
                   int32_t max_concurrency, int32_t node_budget);

  bool empty() const { return trees_.empty(); }
  // Rechooses every tree for this cost per sequence step besides the forward (seconds >= 0).
  void Update(double step_overhead_seconds);
  // The tree for each of k sequences (clamped to 1..max_concurrency); empty: plain steps.
  const TokenTree& For(int32_t k) const;
  double step_overhead_seconds() const { return overhead_; }

 private:
  std::optional<VerifyCostCurve> curve_;  // t(n), as measured
  SequoiaTable table_;
  int32_t max_size_ = 1;
  int32_t node_budget_ = 1;
  double overhead_ = 0.0;
  std::vector<TokenTree> trees_;  // [k - 1]
};

}  // namespace grove
