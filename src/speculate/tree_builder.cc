#include "speculate/tree_builder.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/error.h"
#include "base/timer.h"
#include "ops/activation.h"

namespace grove {
namespace {

// At temperature 0 plain sampling's distribution is one-hot, which would leave a top-k tree one
// child per node. Greedy verification never reads the draft rows, so rank candidates (and give
// OPT-Tree its probabilities) by the draft's own softmax instead.
SamplerParams DraftSampling(const SamplerParams& sampling) {
  if (!sampling.greedy()) return sampling;
  return SamplerParams{
      .temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = sampling.seed};
}

}  // namespace

DraftState::DraftState(const SamplerParams& draft_sampling, int32_t n_vocab)
    : n_vocab_(n_vocab), sampler_(draft_sampling), ranking_(static_cast<std::size_t>(n_vocab)) {}

void DraftState::Reserve(const TreePlan& plan, ChildDraw draw) {
  const int32_t n = plan.max_nodes();
  tree_.Reserve(n, n);
  if (draw != ChildDraw::kDeterministic) {
    rows_.reserve((static_cast<std::size_t>(n) + 1) * static_cast<std::size_t>(n_vocab_));
  }
  for (auto* v : {&frontier_, &next_frontier_, &shape_frontier_, &next_shape_frontier_}) {
    v->reserve(static_cast<std::size_t>(n) + 1);
  }
  tokens_.reserve(2 * static_cast<std::size_t>(n));  // DrawChildren's scratch
  if (!plan.is_static()) {
    opt_workspace_.Reserve(plan.opt);
    opt_result_.tree.Reserve(n, n);
    opt_result_.e_sub.reserve(static_cast<std::size_t>(plan.opt.depth_cap()));
    opt_result_.drafted_index.reserve(static_cast<std::size_t>(n));
  }
}

TreeBuilder::TreeBuilder(ChildDraw draw, const SamplerParams& sampling)
    : draw_(draw), greedy_(sampling.greedy()), draft_sampling_(DraftSampling(sampling)) {}

std::span<const float> TreeBuilder::Expand(Drafter& drafter, const TokenTree& tree,
                                           std::span<const int32_t> frontier,
                                           DraftState& state) const {
  Timer timer;
  std::span<const float> logits = drafter.Expand(tree, frontier);
  const double seconds = timer.Seconds();
  if (state.expand_calls_ == 0) state.first_expand_seconds_ = seconds;
  state.expand_seconds_ += seconds;
  ++state.expand_calls_;
  GROVE_CHECK(logits.size() == frontier.size() * static_cast<std::size_t>(state.n_vocab_),
              "drafter '", drafter.name(), "' returned ", logits.size(), " logits for ",
              frontier.size(), " rows");
  return logits;
}

std::span<const float> TreeBuilder::TopChildren(std::span<const float> logits, int32_t k,
                                                DraftState& state) const {
  std::vector<float>& r = state.ranking_;
  if (greedy_) {
    // The draft's plain softmax, for the k best only: their logits rank them, one exp pass gives
    // the denominator. No distribution over the vocabulary is written.
    TopTokens(logits, k, -std::numeric_limits<float>::infinity(), state.tokens_);
    if (state.tokens_.empty()) return {};
    const float max = logits[state.tokens_[0]];
    const float inv_sum = 1.0f / SumExp(logits.data(), static_cast<int64_t>(logits.size()), max);
    for (int32_t token : state.tokens_) r[token] = std::exp(logits[token] - max) * inv_sum;
    return r;
  }
  state.sampler_.Distribution(logits, r);
  TopTokens(r, k, 0.0f, state.tokens_);
  return r;
}

void TreeBuilder::Build(const TreePlan& plan, Drafter& drafter, const CounterRng& rng,
                        uint64_t sequence, int64_t root_position, DraftState& state) const {
  if (plan.is_static()) {
    BuildShape(plan.shape, drafter, rng, sequence, root_position, state);
  } else {
    BuildOpt(plan.opt, drafter, state);
  }
}

void TreeBuilder::BuildShape(const TokenTree& shape, Drafter& drafter, const CounterRng& rng,
                             uint64_t sequence, int64_t root_position, DraftState& state) const {
  state.ClearTree();
  if (shape.empty()) return;
  const int32_t nv = state.n_vocab_;
  if (draw_ != ChildDraw::kDeterministic) {
    const std::size_t rows = static_cast<std::size_t>(shape.size() + 1) * nv;
    if (state.rows_.size() < rows) state.rows_.resize(rows);
  }
  TokenTree& tree = state.tree_;
  // Level by level: the frontier is every placed node (the root first) whose shape has children.
  state.frontier_.assign(1, -1);
  state.shape_frontier_.assign(1, -1);
  while (!state.frontier_.empty()) {
    const std::span<const float> logits = Expand(drafter, tree, state.frontier_, state);
    state.next_frontier_.clear();
    state.next_shape_frontier_.clear();
    for (std::size_t i = 0; i < state.frontier_.size(); ++i) {
      const int32_t node = state.frontier_[i];
      const std::span<const float> row = logits.subspan(i * nv, nv);
      const std::span<const int32_t> wanted = shape.children(state.shape_frontier_[i]);
      const int32_t depth = node < 0 ? 1 : tree.node(node).depth + 1;
      std::span<const float> q;
      if (draw_ == ChildDraw::kDeterministic) {
        // Top-k guesses: only tokens the drafter gives mass (a prompt-lookup miss adds no child).
        q = TopChildren(row, static_cast<int32_t>(wanted.size()), state);
      } else {
        // A row of -inf proposes nothing (Drafter::Expand): e.g. a parallel drafter below the
        // depths its masks reach. Its softmax would be undefined, not empty.
        if (std::all_of(row.begin(), row.end(),
                        [](float x) { return x == -std::numeric_limits<float>::infinity(); })) {
          continue;
        }
        const std::span<float> stored(state.rows_.data() + static_cast<std::size_t>(node + 1) * nv,
                                      nv);
        state.sampler_.Distribution(row, stored);
        q = stored;
        if (std::all_of(q.begin(), q.end(), [](float p) { return p <= 0; })) continue;
        DrawChildren(q, static_cast<int32_t>(wanted.size()), draw_, rng, sequence,
                     root_position + depth, state.tokens_);
      }
      for (std::size_t c = 0; c < state.tokens_.size(); ++c) {
        const int32_t token = state.tokens_[c];
        const int32_t child = tree.AddChild(node, token, q[token]);
        const int32_t shape_child = wanted[c];
        if (!shape.children(shape_child).empty()) {
          state.next_frontier_.push_back(child);
          state.next_shape_frontier_.push_back(shape_child);
        }
      }
    }
    state.frontier_.swap(state.next_frontier_);
    state.shape_frontier_.swap(state.next_shape_frontier_);
  }
}

void TreeBuilder::BuildOpt(const OptTreeParams& params, Drafter& drafter, DraftState& state) const {
  state.ClearTree();
  const int32_t nv = state.n_vocab_;
  // OPT-Tree asks for the top-k children of each frontier node by draft probability.
  auto expand = [&](const TokenTree& drafted, std::span<const int32_t> frontier, int32_t k,
                    std::span<std::vector<DraftCandidate>> out) {
    // Drafting ends early, with what it has, when the drafter's cache cannot take another layer
    // (the session checked room for the first): no candidates end Algorithm 1's loop.
    const bool root_level = frontier.size() == 1 && frontier[0] == -1;
    if (!root_level && !drafter.HasRoomFor(static_cast<int32_t>(frontier.size()))) return;
    const std::span<const float> logits = Expand(drafter, drafted, frontier, state);
    for (std::size_t i = 0; i < frontier.size(); ++i) {
      const std::span<const float> q =
          TopChildren(logits.subspan(i * nv, nv), std::min(k, nv), state);
      for (int32_t token : state.tokens_) out[i].push_back({token, q[token]});
    }
  };
  BuildOptTree(params, expand, state.opt_workspace_, state.opt_result_);
  state.opt_built_ = true;
}

}  // namespace grove
