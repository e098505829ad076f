#include "speculate/opt_tree.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "base/error.h"

namespace grove {
namespace {

// One drafted child of a frontier node, before the layer's top-n cut.
struct Candidate {
  double path_prob;  // p̂ = p̂(parent) * prob
  int32_t order;     // generation order: frontier position, then draft rank (the tie-break)
  int32_t parent;    // node index in the drafted tree, -1 for the root
  int32_t token;
  float prob;
};

bool MorePromising(const Candidate& a, const Candidate& b) {
  return a.path_prob != b.path_prob ? a.path_prob > b.path_prob : a.order < b.order;
}

// E_sub: the sum of the n largest p̂ drafted so far.
double TopSum(std::vector<double> values, int32_t n) {
  const auto keep = std::min(values.size(), static_cast<size_t>(n));
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(keep), values.end(),
                   std::greater<>());
  double sum = 0.0;
  for (size_t i = 0; i < keep; ++i) sum += values[i];
  return sum;
}

}  // namespace

void OptTreeParams::Validate() const {
  if (n_nodes < 1) Fail("opt-tree: node budget ", n_nodes, " must be >= 1");
  if (!std::isfinite(delta)) Fail("opt-tree: threshold delta ", delta, " must be finite");
  if (max_depth < 0) Fail("opt-tree: depth cap ", max_depth, " must be >= 1, or 0 for the default");
}

OptTreeResult BuildOptTree(const OptTreeParams& params, const DraftExpandFn& expand) {
  params.Validate();
  const int32_t n = params.n_nodes;
  const int32_t max_depth = params.max_depth == 0 ? n : params.max_depth;

  OptTreeResult result;
  TokenTree drafted;              // every layer drafted so far, L[1] ∪ L[2] ∪ ...
  std::vector<double> path_prob;  // p̂ per drafted node
  std::vector<int32_t> frontier = {-1};
  std::vector<std::vector<DraftCandidate>> out;
  std::vector<Candidate> layer;
  std::unordered_set<int32_t> seen;
  double e_prev = 0.0;
  while (true) {
    // One drafting step: the top-n children of every frontier node. n per node suffices: a child
    // outside its parent's top n has n siblings with larger p̂ and cannot make the layer's top n.
    out.assign(frontier.size(), {});
    expand(drafted, frontier, n, out);
    ++result.draft_steps;
    if (out.size() != frontier.size()) {
      Fail("opt-tree: expand returned ", out.size(), " candidate lists for ", frontier.size(),
           " frontier nodes");
    }
    layer.clear();
    for (size_t i = 0; i < frontier.size(); ++i) {
      auto& cands = out[i];
      if (cands.size() > static_cast<size_t>(n)) {
        Fail("opt-tree: expand returned ", cands.size(), " candidates for node ", frontier[i],
             ", more than the ", n, " asked for");
      }
      // Rank order = descending draft probability (the order verification tries siblings in).
      std::stable_sort(cands.begin(), cands.end(),
                       [](const auto& a, const auto& b) { return a.prob > b.prob; });
      seen.clear();
      const double parent_prob =
          frontier[i] < 0 ? 1.0 : path_prob[static_cast<size_t>(frontier[i])];
      for (const DraftCandidate& c : cands) {
        if (!(c.prob >= 0.0f && c.prob <= 1.0f)) {
          Fail("opt-tree: draft probability ", c.prob, " of token ", c.token, " under node ",
               frontier[i], " is outside [0, 1]");
        }
        if (!seen.insert(c.token).second) {
          Fail("opt-tree: token ", c.token, " drafted twice under node ", frontier[i]);
        }
        if (c.prob == 0.0f) continue;  // adds nothing to E(A), would only cost a verify row
        layer.push_back({.path_prob = parent_prob * c.prob,
                         .order = static_cast<int32_t>(layer.size()),
                         .parent = frontier[i],
                         .token = c.token,
                         .prob = c.prob});
      }
    }
    if (layer.empty()) break;  // the drafter's support ran out
    // The next layer: the n best candidates, then back in generation order so each parent's
    // children stay together in rank order.
    if (layer.size() > static_cast<size_t>(n)) {
      std::partial_sort(layer.begin(), layer.begin() + n, layer.end(), MorePromising);
      layer.resize(static_cast<size_t>(n));
    }
    std::sort(layer.begin(), layer.end(),
              [](const Candidate& a, const Candidate& b) { return a.order < b.order; });
    frontier.clear();
    for (const Candidate& c : layer) {
      frontier.push_back(drafted.AddChild(c.parent, c.token, c.prob));
      path_prob.push_back(c.path_prob);
    }
    const double e_cur = TopSum(path_prob, n);
    result.e_sub.push_back(e_cur);
    // Algorithm 1: continue while D(T) < n (here the cap) and E_sub grew by more than δ.
    if (drafted.depth() >= max_depth || !(e_cur - e_prev > params.delta)) break;
    e_prev = e_cur;
  }

  // T_opt: the n drafted nodes with the largest p̂; ties to the smaller index, which is level order,
  // so a parent (p̂ >= its child's, as every prob <= 1) always precedes its child.
  std::vector<int32_t> keep(static_cast<size_t>(drafted.size()));
  for (int32_t v = 0; v < drafted.size(); ++v) keep[static_cast<size_t>(v)] = v;
  auto better = [&](int32_t a, int32_t b) {
    const double pa = path_prob[static_cast<size_t>(a)], pb = path_prob[static_cast<size_t>(b)];
    return pa != pb ? pa > pb : a < b;
  };
  if (keep.size() > static_cast<size_t>(n)) {
    std::partial_sort(keep.begin(), keep.begin() + n, keep.end(), better);
    keep.resize(static_cast<size_t>(n));
  }
  std::sort(keep.begin(), keep.end());
  std::vector<int32_t> new_index(static_cast<size_t>(drafted.size()), -1);
  for (int32_t v : keep) {
    const TreeNode& node = drafted.node(v);
    const int32_t parent = node.parent < 0 ? -1 : new_index[static_cast<size_t>(node.parent)];
    GROVE_CHECK(node.parent < 0 || parent >= 0, "opt-tree: selected node ", v,
                " without its parent ", node.parent);
    new_index[static_cast<size_t>(v)] = result.tree.AddChild(parent, node.token, node.prob);
    result.expected_length += path_prob[static_cast<size_t>(v)];
  }
  return result;
}

}  // namespace grove
