// OPT-Tree: an adaptive draft tree rebuilt at every step from the drafter's own probabilities
// (Wang et al., arXiv 2406.17276, Algorithm 1; digest 003-opt-tree.md §3-4).
//
// The tree maximises E(A) = sum over nodes of p̂(v) (Eq. 2-4), where p̂(v) is the product of draft
// probabilities along the root-to-v path and the root counts 1, over all trees of n non-root nodes.
// Layer by layer, the n frontier nodes are expanded by their top-n draft tokens and the n
// candidates with the largest p̂ form the next layer (a beam of width n loses nothing: digest §4.3).
// After each layer E_sub = the sum of the n largest p̂ drafted so far; drafting stops once a layer
// raises E_sub by no more than δ or the depth cap is reached. The tree is the n drafted nodes with
// the largest p̂, which is ancestor-closed (Theorem 3.1) and optimal for the drafted depth.
//
// Driving it: the builder asks an expand callback for the top-k children of each frontier node. The
// callback sees the candidate tree drafted so far (every layer, not only the nodes that will be
// kept) so a real drafter can place the frontier in a batch with TokenTree::AppendToBatch-style
// positions and masks.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "base/function_ref.h"
#include "speculate/token_tree.h"

namespace grove {

struct DraftCandidate {
  int32_t token = 0;
  float prob = 0.0f;  // draft probability of the token given the frontier node's path
};

// Fills out[i] with up to k candidates for frontier[i] (a node of `drafted`, or -1 for the root),
// in any order. Tokens must be distinct per node and probabilities in [0, 1]; out arrives with
// frontier.size() empty vectors (their capacity kept from earlier calls).
using DraftExpandFn =
    std::function<void(const TokenTree& drafted, std::span<const int32_t> frontier, int32_t k,
                       std::span<std::vector<DraftCandidate>> out)>;
using DraftExpandRef = FunctionRef<void(const TokenTree& drafted, std::span<const int32_t> frontier,
                                        int32_t k, std::span<std::vector<DraftCandidate>> out)>;

struct OptTreeParams {
  int32_t n_nodes = 50;  // node budget n, root excluded (the verify batch has n + 1 tokens)
  double delta = 0.2;  // stop threshold δ on the E_sub gain of one layer; the paper: μ <= δ <= 1
  int32_t max_depth = 0;  // draft layers at most; 0: the paper's cap (drafts while depth < n)
  // Throws grove::Error naming the bad value.
  void Validate() const;
  int32_t depth_cap() const { return max_depth == 0 ? n_nodes : max_depth; }
};

struct OptTreeResult {
  TokenTree tree;  // the selected nodes, level order, prob = draft probability
  // drafted_index[v]: node v's index in the tree the expand callback saw (every drafted layer),
  // which is what a drafter knows it by.
  std::vector<int32_t> drafted_index;
  double expected_length = 1.0;  // E(A) = 1 + E_sub(tree, n), the estimate to log per step
  int32_t draft_steps = 0;       // expand calls (one draft forward each)
  std::vector<double> e_sub;     // E_sub after each drafted layer (non-decreasing, Theorem 3.2)
};

// Scratch of one sequence's OPT-Tree builds, kept across steps so a build allocates nothing once
// the buffers have grown to the budget (n candidates per frontier node, n frontier nodes).
class OptTreeWorkspace {
 public:
  // Grows every buffer to what builds with `params` need at most (n nodes per layer, up to the
  // depth cap), so that no build allocates.
  void Reserve(const OptTreeParams& params);
  // Every layer drafted by the last build (the tree the expand callback saw).
  const TokenTree& drafted() const { return drafted_; }

 private:
  friend void BuildOptTree(const OptTreeParams&, DraftExpandRef, OptTreeWorkspace&, OptTreeResult&);
  // BuildOptTree's steps: the root as the frontier; the candidates of the frontier's children
  // (each node's in rank order, checked); the n best of them as the next layer; E_sub; the tree.
  void Start();
  void DraftLayer(DraftExpandRef expand, int32_t n);
  void RankChildren(int32_t node, int32_t n, std::vector<DraftCandidate>& cands);
  void AddBestOfLayer(int32_t n);
  double TopSum(int32_t n);
  void Select(int32_t n, OptTreeResult& result);

  struct Candidate {
    double path_prob;  // p̂ = p̂(parent) * prob
    int32_t order;     // generation order: frontier position, then draft rank (the tie-break)
    int32_t parent;    // node index in the drafted tree, -1 for the root
    int32_t token;
    float prob;
  };
  TokenTree drafted_;             // every layer drafted so far, L[1] ∪ L[2] ∪ ...
  std::vector<double> path_prob;  // p̂ per drafted node
  std::vector<double> top_sum;    // scratch of E_sub
  std::vector<int32_t> frontier;
  std::vector<std::vector<DraftCandidate>> out;
  std::vector<Candidate> layer;
  std::vector<int32_t> tokens;  // duplicate check
  std::vector<int32_t> keep;
  std::vector<int32_t> new_index;
};

// Algorithm 1. Candidates with zero probability are dropped (they add nothing to E(A) and would
// cost a verify row), so the tree has fewer than n nodes when the drafter's support runs out.
// Ties in p̂ prefer the node drafted first, hence a parent before its child and a shallower node
// before a deeper one (digest §4.3: needed for ancestor-closure when a probability is exactly 1).
// `result` is overwritten (its tree keeps its capacity).
void BuildOptTree(const OptTreeParams& params, DraftExpandRef expand, OptTreeWorkspace& workspace,
                  OptTreeResult& result);
// The same with a fresh workspace (allocates: for tests and one-off trees).
OptTreeResult BuildOptTree(const OptTreeParams& params, DraftExpandRef expand);

}  // namespace grove
