#include "speculate/tree_builder.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "base/error.h"

namespace grove {

TreeBuilder::TreeBuilder(TreePlan spec, ChildDraw draw, int32_t n_vocab, uint64_t seed)
    : spec_(std::move(spec)), draw_(draw), n_vocab_(n_vocab), rng_(seed) {
  rows_.resize(static_cast<std::size_t>(spec_.max_nodes() + 1) * n_vocab_);
}

void TreeBuilder::Build(Drafter& drafter, uint64_t sequence, int64_t root_position) {
  tree_.Clear();
  draft_calls_ = 0;
  if (spec_.is_static()) {
    BuildStatic(drafter, sequence, root_position);
  } else {
    BuildOpt(drafter);
  }
}

void TreeBuilder::ExpandInto(Drafter& drafter, const TokenTree& tree, std::span<const int32_t> frontier) {
  scratch_.resize(frontier.size() * static_cast<std::size_t>(n_vocab_));
  drafter.Expand(tree, frontier, scratch_);
  ++draft_calls_;
}

void TreeBuilder::BuildStatic(Drafter& drafter, uint64_t sequence, int64_t root_position) {
  const TokenTree& shape = spec_.shape;
  // Level by level: the frontier is every placed node (the root first) whose shape has children.
  frontier_.assign(1, -1);
  shape_frontier_.assign(1, -1);
  while (!frontier_.empty()) {
    ExpandInto(drafter, tree_, frontier_);
    next_frontier_.clear();
    next_shape_frontier_.clear();
    for (std::size_t i = 0; i < frontier_.size(); ++i) {
      const int32_t node = frontier_[i];
      std::span<const float> q(scratch_.data() + i * n_vocab_, n_vocab_);
      std::copy(q.begin(), q.end(), rows_.begin() + static_cast<std::size_t>(node + 1) * n_vocab_);
      std::span<const int32_t> wanted = shape.children(shape_frontier_[i]);
      const int32_t depth = node < 0 ? 1 : tree_.node(node).depth + 1;
      int32_t k = static_cast<int32_t>(wanted.size());
      if (draw_ == ChildDraw::kDeterministic) {
        // Top-k guesses: only tokens the drafter gives mass (a prompt-lookup miss adds no child).
        k = std::min<int32_t>(k, static_cast<int32_t>(std::count_if(q.begin(), q.end(), [](float p) { return p > 0; })));
      } else if (std::all_of(q.begin(), q.end(), [](float p) { return p <= 0; })) {
        k = 0;
      }
      if (k == 0) continue;
      DrawChildren(q, k, draw_, rng_, sequence, root_position + depth, tokens_);
      for (int32_t c = 0; c < k; ++c) {
        const int32_t child = tree_.AddChild(node, tokens_[c], q[tokens_[c]]);
        const int32_t shape_child = wanted[c];
        if (!shape.children(shape_child).empty()) {
          next_frontier_.push_back(child);
          next_shape_frontier_.push_back(shape_child);
        }
      }
    }
    frontier_.swap(next_frontier_);
    shape_frontier_.swap(next_shape_frontier_);
  }
}

void TreeBuilder::BuildOpt(Drafter& drafter) {
  // OPT-Tree asks for the top-k children of each frontier node by draft probability.
  DraftExpandFn expand = [&](const TokenTree& drafted, std::span<const int32_t> frontier, int32_t k,
                             std::vector<std::vector<DraftCandidate>>& out) {
    ExpandInto(drafter, drafted, frontier);
    for (std::size_t i = 0; i < frontier.size(); ++i) {
      std::span<const float> q(scratch_.data() + i * n_vocab_, n_vocab_);
      DrawChildren(q, std::min<int32_t>(k, n_vocab_), ChildDraw::kDeterministic, rng_, 0, 0, tokens_);
      for (int32_t token : tokens_) {
        if (q[token] > 0) out[i].push_back({token, q[token]});
      }
    }
  };
  tree_ = BuildOptTree(spec_.opt, expand).tree;
}

}  // namespace grove
