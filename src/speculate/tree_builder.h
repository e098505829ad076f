// Builds each step's draft tree with a drafter: static shapes (chain, kconfig, file, sequoia) are
// filled level by level, each level one Expand call; OPT-Tree grows its own shape from the draft
// probabilities. Children are drawn the way the verification rule needs (speculate/verify.h):
// deterministic top-k, or sampled with or without replacement using draws the verifier never uses.
#pragma once

#include <vector>

#include "sample/rng.h"
#include "speculate/drafter.h"
#include "speculate/tree_plan.h"
#include "speculate/verify.h"

namespace grove {

class TreeBuilder {
 public:
  TreeBuilder(TreePlan spec, ChildDraw draw, int32_t n_vocab, uint64_t seed);

  const TreePlan& spec() const { return spec_; }
  ChildDraw draw() const { return draw_; }

  // Drafts this step's tree after the root at root_position.
  void Build(Drafter& drafter, uint64_t sequence, int64_t root_position);

  const TokenTree& tree() const { return tree_; }
  // Draft distributions the children were drawn from: row 0 the root's, row i + 1 node i's (rows of
  // nodes without children are unspecified). Valid until the next Build.
  ProbRows draft_rows() const { return {rows_.data(), n_vocab_, tree_.size() + 1}; }
  // Expand calls (draft forward passes) of the last Build.
  int32_t draft_calls() const { return draft_calls_; }

 private:
  void BuildStatic(Drafter& drafter, uint64_t sequence, int64_t root_position);
  void BuildOpt(Drafter& drafter);
  void ExpandInto(Drafter& drafter, const TokenTree& tree, std::span<const int32_t> frontier);

  TreePlan spec_;
  ChildDraw draw_;
  int32_t n_vocab_;
  CounterRng rng_;
  TokenTree tree_;
  std::vector<float> rows_;     // (max_nodes + 1, n_vocab)
  std::vector<float> scratch_;  // (frontier, n_vocab) rows of one Expand call
  // Level-by-level frontiers of the tree being built and of the shape; swapped, never reallocated
  // once grown.
  std::vector<int32_t> frontier_, next_frontier_;
  std::vector<int32_t> shape_frontier_, next_shape_frontier_;
  std::vector<int32_t> tokens_;
  int32_t draft_calls_ = 0;
};

}  // namespace grove
