#include "speculate/opt_tree.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace grove {

void OptTreeParams::Validate() const {
  if (n_nodes < 1) Fail("opt-tree: node budget ", n_nodes, " must be >= 1");
  if (!std::isfinite(delta)) Fail("opt-tree: threshold delta ", delta, " must be finite");
  // A layer adds at most one expected token (E_sub grows by at most the mass of one level), so a
  // threshold above 1 could never be passed: the tree would silently stay one level deep. (Below 0
  // drafting goes on to the depth cap even when a layer adds nothing.)
  if (delta > 1.0)
    Fail("opt-tree: threshold delta ", delta,
         " must be at most 1 (the expected tokens a layer adds)");
  if (max_depth < 0) Fail("opt-tree: depth cap ", max_depth, " must be >= 1, or 0 for the default");
}

void OptTreeWorkspace::Reserve(const OptTreeParams& params) {
  const size_t n = static_cast<size_t>(params.n_nodes);
  const size_t drafted_max = n * static_cast<size_t>(params.depth_cap());
  drafted_.Reserve(static_cast<int32_t>(drafted_max), params.n_nodes);
  for (auto* v : {&path_prob, &top_sum}) v->reserve(drafted_max);
  for (auto* v : {&keep, &new_index}) v->reserve(drafted_max);
  frontier.reserve(n);
  tokens.reserve(n);
  layer.reserve(n * n);
  if (out.size() < n) out.resize(n);
  for (auto& list : out) list.reserve(n);
}

void OptTreeWorkspace::Start() {
  drafted_.Clear();
  path_prob.clear();
  frontier.assign(1, -1);
}

void OptTreeWorkspace::DraftLayer(DraftExpandRef expand, int32_t n) {
  // One drafting step: the top-n children of every frontier node. n per node suffices: a child
  // outside its parent's top n has n siblings with larger p̂ and cannot make the layer's top n.
  if (out.size() < frontier.size()) out.resize(frontier.size());
  const std::span<std::vector<DraftCandidate>> lists(out.data(), frontier.size());
  for (auto& list : lists) list.clear();
  expand(drafted_, frontier, n, lists);
  layer.clear();
  for (size_t i = 0; i < frontier.size(); ++i) {
    std::vector<DraftCandidate>& cands = lists[i];
    RankChildren(frontier[i], n, cands);
    const double parent_prob = frontier[i] < 0 ? 1.0 : path_prob[static_cast<size_t>(frontier[i])];
    for (const DraftCandidate& c : cands) {
      if (!(c.prob >= 0.0f && c.prob <= 1.0f)) {
        Fail("opt-tree: draft probability ", c.prob, " of token ", c.token, " under node ",
             frontier[i], " is outside [0, 1]");
      }
      if (c.prob == 0.0f) continue;  // adds nothing to E(A), would only cost a verify row
      layer.push_back({.path_prob = parent_prob * c.prob,
                       .order = static_cast<int32_t>(layer.size()),
                       .parent = frontier[i],
                       .token = c.token,
                       .prob = c.prob});
    }
  }
}

void OptTreeWorkspace::RankChildren(int32_t node, int32_t n, std::vector<DraftCandidate>& cands) {
  if (cands.size() > static_cast<size_t>(n)) {
    Fail("opt-tree: expand returned ", cands.size(), " candidates for node ", node,
         ", more than the ", n, " asked for");
  }
  // Rank order = descending draft probability (the order verification tries siblings in),
  // equal ones in the order given. An insertion sort: stable without std::stable_sort's
  // temporary buffer, and linear for the drafter's candidates, which come sorted.
  for (size_t j = 1; j < cands.size(); ++j) {
    const DraftCandidate c = cands[j];
    size_t at = j;
    for (; at > 0 && cands[at - 1].prob < c.prob; --at) cands[at] = cands[at - 1];
    cands[at] = c;
  }
  tokens.clear();
  for (const DraftCandidate& c : cands) tokens.push_back(c.token);
  std::sort(tokens.begin(), tokens.end());
  if (auto dup = std::adjacent_find(tokens.begin(), tokens.end()); dup != tokens.end()) {
    Fail("opt-tree: token ", *dup, " drafted twice under node ", node);
  }
}

void OptTreeWorkspace::AddBestOfLayer(int32_t n) {
  // The next layer: the n best candidates, then back in generation order so each parent's
  // children stay together in rank order.
  if (layer.size() > static_cast<size_t>(n)) {
    std::nth_element(layer.begin(), layer.begin() + (n - 1), layer.end(),
                     [](const Candidate& a, const Candidate& b) {
                       return a.path_prob != b.path_prob ? a.path_prob > b.path_prob
                                                         : a.order < b.order;
                     });
    layer.resize(static_cast<size_t>(n));
  }
  std::sort(layer.begin(), layer.end(),
            [](const Candidate& a, const Candidate& b) { return a.order < b.order; });
  frontier.clear();
  for (const Candidate& c : layer) {
    frontier.push_back(drafted_.AddChild(c.parent, c.token, c.prob));
    path_prob.push_back(c.path_prob);
  }
}

double OptTreeWorkspace::TopSum(int32_t n) {
  // E_sub: the sum of the n largest p̂ drafted so far.
  top_sum.assign(path_prob.begin(), path_prob.end());
  const auto top = std::min(top_sum.size(), static_cast<size_t>(n));
  std::nth_element(top_sum.begin(), top_sum.begin() + static_cast<std::ptrdiff_t>(top) - 1,
                   top_sum.end(), std::greater<>());
  double sum = 0.0;
  for (size_t i = 0; i < top; ++i) sum += top_sum[i];
  return sum;
}

void OptTreeWorkspace::Select(int32_t n, OptTreeResult& result) {
  // T_opt: the n drafted nodes with the largest p̂; ties to the smaller index, which is level order,
  // so a parent (p̂ >= its child's, as every prob <= 1) always precedes its child.
  const int32_t n_drafted = drafted_.size();
  keep.resize(static_cast<size_t>(n_drafted));
  for (int32_t v = 0; v < n_drafted; ++v) keep[static_cast<size_t>(v)] = v;
  auto better = [&](int32_t a, int32_t b) {
    const double pa = path_prob[static_cast<size_t>(a)], pb = path_prob[static_cast<size_t>(b)];
    return pa != pb ? pa > pb : a < b;
  };
  if (keep.size() > static_cast<size_t>(n)) {
    std::nth_element(keep.begin(), keep.begin() + (n - 1), keep.end(), better);
    keep.resize(static_cast<size_t>(n));
  }
  std::sort(keep.begin(), keep.end());
  new_index.assign(static_cast<size_t>(n_drafted), -1);
  for (int32_t v : keep) {
    const TreeNode& node = drafted_.node(v);
    const int32_t parent = node.parent < 0 ? -1 : new_index[static_cast<size_t>(node.parent)];
    GROVE_CHECK(node.parent < 0 || parent >= 0, "opt-tree: selected node ", v,
                " without its parent ", node.parent);
    new_index[static_cast<size_t>(v)] = result.tree.AddChild(parent, node.token, node.prob);
    result.drafted_index.push_back(v);
    result.expected_length += path_prob[static_cast<size_t>(v)];
  }
}

void BuildOptTree(const OptTreeParams& params, DraftExpandRef expand, OptTreeWorkspace& ws,
                  OptTreeResult& result) {
  params.Validate();
  const int32_t n = params.n_nodes;
  result.tree.Clear();
  result.drafted_index.clear();
  result.expected_length = 1.0;
  result.draft_steps = 0;
  result.e_sub.clear();
  ws.Start();
  double e_prev = 0.0;
  while (true) {
    ws.DraftLayer(expand, n);
    ++result.draft_steps;
    if (ws.layer.empty()) break;  // the drafter's support ran out
    ws.AddBestOfLayer(n);
    const double e_cur = ws.TopSum(n);
    result.e_sub.push_back(e_cur);
    // Algorithm 1: continue while D(T) < n (here the cap) and E_sub grew by more than δ.
    if (ws.drafted_.depth() >= params.depth_cap() || !(e_cur - e_prev > params.delta)) break;
    e_prev = e_cur;
  }
  ws.Select(n, result);
}

OptTreeResult BuildOptTree(const OptTreeParams& params, DraftExpandRef expand) {
  OptTreeWorkspace workspace;
  OptTreeResult result;
  BuildOptTree(params, expand, workspace, result);
  return result;
}

}  // namespace grove
