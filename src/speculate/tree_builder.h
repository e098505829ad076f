// Drafts each step's token tree with a drafter. Static plans (chain, kconfig, file, sequoia, and
// what the auto planner picks) fill a fixed shape level by level, each level one Drafter::Expand
// call; OPT-Tree grows its own shape from the draft probabilities. Children are drawn the way the
// verification rule needs (speculate/verify.h): deterministic top-k, or sampled with or without
// replacement using draws the verifier never uses.
//
// The builder is policy only (how children are drawn, how draft logits become distributions) and
// may be shared; everything one sequence's step writes lives in its DraftState, which the session
// owns and reuses, so a step allocates nothing once the state has grown.
#pragma once

#include <vector>

#include "sample/rng.h"
#include "sample/sampler.h"
#include "speculate/drafter.h"
#include "speculate/opt_tree.h"
#include "speculate/tree_plan.h"
#include "speculate/verify.h"

namespace grove {

// One sequence's drafting state.
class DraftState {
 public:
  DraftState(const SamplerParams& draft_sampling, int32_t n_vocab);

  // This step's tree (empty for a plain step).
  const TokenTree& tree() const { return opt_built_ ? opt_result_.tree : tree_; }
  // Draft distributions the children were drawn from, for the rejection rules: row 0 the root's,
  // row v + 1 node v's. Written for sampled draws only, and only for nodes with children.
  ProbRows draft_rows() const { return {rows_.data(), n_vocab_, tree().size() + 1}; }
  // Of the last Build: seconds inside Drafter::Expand (draft forwards), and the number of calls.
  double expand_seconds() const { return expand_seconds_; }
  int32_t expand_calls() const { return expand_calls_; }
  // The first call's share: it also feeds the tokens the drafter has not seen yet.
  double first_expand_seconds() const { return first_expand_seconds_; }
  // The tree the drafter was asked to expand, and node v of tree() in it: the same tree for static
  // shapes; for OPT-Tree every drafted layer, of which tree() is the selection. The drafter knows
  // nodes by these ids (Drafter::Commit).
  const TokenTree& drafted_tree() const { return opt_built_ ? opt_workspace_.drafted() : tree_; }
  int32_t drafted_node(int32_t v) const { return opt_built_ ? opt_result_.drafted_index[v] : v; }
  // Grows every buffer to what trees of `plan` need with children drawn as `draw`, so that no
  // Build allocates.
  void Reserve(const TreePlan& plan, ChildDraw draw);
  // Empties the tree: this step verifies the root alone (plain decoding).
  void ClearTree() {
    tree_.Clear();
    opt_built_ = false;
    expand_seconds_ = 0.0;
    first_expand_seconds_ = 0.0;
    expand_calls_ = 0;
  }

 private:
  friend class TreeBuilder;
  int32_t n_vocab_;
  Sampler sampler_;             // turns draft logits into the draft distribution (see TreeBuilder)
  TokenTree tree_;              // a static shape's filled tree (OPT-Tree's is opt_result_.tree)
  std::vector<float> rows_;     // (max_nodes + 1, n_vocab), see draft_rows()
  std::vector<float> ranking_;  // (n_vocab) one row's ranking distribution
  std::vector<int32_t> frontier_, next_frontier_;
  std::vector<int32_t> shape_frontier_, next_shape_frontier_;
  std::vector<int32_t> tokens_;
  OptTreeWorkspace opt_workspace_;
  OptTreeResult opt_result_;
  bool opt_built_ = false;  // the last Build was OPT-Tree's
  double expand_seconds_ = 0.0;
  double first_expand_seconds_ = 0.0;
  int32_t expand_calls_ = 0;
};

class TreeBuilder {
 public:
  // `sampling` are the target's sampling parameters: the draft distribution of a node is the
  // drafter's logits shaped by the same temperature and filters, as plain sampling from the draft
  // would shape them. At temperature 0 (greedy verification reads no draft distribution) the
  // children are ranked by the drafter's plain softmax instead, which also gives OPT-Tree its
  // probabilities.
  TreeBuilder(ChildDraw draw, const SamplerParams& sampling);

  ChildDraw draw() const { return draw_; }
  DraftState NewState(int32_t n_vocab) const { return DraftState(draft_sampling_, n_vocab); }

  // Drafts the tree of `plan` (a static shape, or OPT-Tree) after the root at root_position into
  // state. Random draws use (sequence, position of the drawn token, kDraftDrawBase + i).
  void Build(const TreePlan& plan, Drafter& drafter, const CounterRng& rng, uint64_t sequence,
             int64_t root_position, DraftState& state) const;
  // The same for a static shape given directly (the auto planner's choice).
  void BuildShape(const TokenTree& shape, Drafter& drafter, const CounterRng& rng,
                  uint64_t sequence, int64_t root_position, DraftState& state) const;

 private:
  // Expand, timed into the state.
  std::span<const float> Expand(Drafter& drafter, const TokenTree& tree,
                                std::span<const int32_t> frontier, DraftState& state) const;
  // The up-to-k deterministic children of one frontier row: state.tokens_ in rank order; their
  // probabilities under the ranking distribution are read from the returned span.
  std::span<const float> TopChildren(std::span<const float> logits, int32_t k,
                                     DraftState& state) const;
  void BuildOpt(const OptTreeParams& params, Drafter& drafter, DraftState& state) const;

  ChildDraw draw_;
  bool greedy_;
  SamplerParams draft_sampling_;
};

}  // namespace grove
