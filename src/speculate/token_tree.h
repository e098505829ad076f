// A draft token tree: what every tree builder (chain, Sequoia, OPT-Tree, ...) produces and every
// verifier walks.
//
// The root is the last committed token (the "bonus" token of the previous step, not yet in the
// target KV cache). It is NOT a node of the tree: nodes are the speculated tokens only, so a tree
// of size() nodes is verified by a batch of size() + 1 tokens. Nodes at depth 1 are the root's
// children and have parent -1. This matches OPT-Tree's node budget n (root excluded); Sequoia
// counts the root in its tree size, so a Sequoia tree of size n has n - 1 nodes here (see
// speculate/sequoia.h).
//
// Nodes are stored in level order: every node's parent comes before it and depths never decrease
// with the index. Hence the depth-d nodes are contiguous, a node's position in the verify batch is
// prefix + depth - 1 (siblings share a position) and ancestor masks can be built in one pass. The
// children of a node need not be contiguous; children(i) lists them in the order they were added,
// which is their rank (child 1, 2, ...) for positional acceptance and for verification.
//
// Each node carries `prob`: the probability that it is accepted given that its parent is, as the
// builder estimates it (the draft probability q(v) for OPT-Tree, the positional acceptance p_k for
// a Sequoia shape). ExpectedLength() turns these into E(A) (OPT-Tree Eq. 2, Sequoia Prop. 3.4).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/batch.h"

namespace grove {

// Token id of a node whose token is not chosen yet (a tree shape from the Sequoia DP).
inline constexpr int32_t kNoToken = -1;

struct TreeNode {
  int32_t token = kNoToken;
  int32_t parent = -1;  // index of the parent node, -1 for a child of the root
  int32_t depth = 1;    // 1 for a child of the root
  float prob = 0.0f;    // acceptance probability given the parent (see the file comment)
};

// For each node, the set {ancestors} ∪ {itself} as a bitset over node indices: what the node's row
// may see among the tree's rows. Any tree size: each node's set takes words() 64-bit words.
class AncestorMasks {
 public:
  AncestorMasks() = default;
  explicit AncestorMasks(int32_t n_nodes);

  int32_t words() const { return words_; }
  // Whether node `row` may see node `col` (col is row itself or one of its ancestors).
  bool Sees(int32_t row, int32_t col) const {
    return (bits_[static_cast<size_t>(row) * words_ + col / 64] >> (col % 64)) & 1u;
  }
  std::span<const uint64_t> Row(int32_t row) const {
    return {bits_.data() + static_cast<size_t>(row) * words_, static_cast<size_t>(words_)};
  }

 private:
  friend class TokenTree;
  std::span<uint64_t> MutableRow(int32_t row) {
    return {bits_.data() + static_cast<size_t>(row) * words_, static_cast<size_t>(words_)};
  }
  int32_t words_ = 0;
  std::vector<uint64_t> bits_;  // (n_nodes, words_)
};

class TokenTree {
 public:
  TokenTree() : children_(1) {}

  // Removes every node. Capacity is kept (child lists included), so a tree rebuilt every step
  // stops allocating once it has reached its largest size.
  void Clear() {
    nodes_.clear();
    ranks_.clear();
    children_[0].clear();
  }

  // Reserves room for n_nodes nodes of at most max_children children each, so that building any
  // tree within those bounds (again and again: a tree rebuilt every step) never allocates.
  void Reserve(int32_t n_nodes, int32_t max_children);

  int32_t size() const { return static_cast<int32_t>(nodes_.size()); }
  bool empty() const { return nodes_.empty(); }
  // Depth of the deepest node; 0 for an empty tree.
  int32_t depth() const { return nodes_.empty() ? 0 : nodes_.back().depth; }
  const TreeNode& node(int32_t i) const { return nodes_.at(static_cast<size_t>(i)); }
  std::span<const TreeNode> nodes() const { return nodes_; }

  // Appends a child of `parent` (-1: of the root) and returns its index. Throws grove::Error if
  // parent is not an existing node, if the child would break level order (its depth is smaller than
  // the last node's), or if prob is not in [0, 1].
  int32_t AddChild(int32_t parent, int32_t token, float prob);

  // Children of node i in rank order; i = -1 gives the root's children.
  std::span<const int32_t> children(int32_t i) const;
  // Rank of node i among its siblings, 0 for the first child.
  int32_t rank(int32_t i) const { return ranks_.at(static_cast<size_t>(i)); }

  // The nodes from depth 1 down to i (inclusive), i.e. the tokens the root-to-i path speculates.
  std::vector<int32_t> Path(int32_t i) const;
  AncestorMasks Masks() const;

  // E(A) = 1 + sum over nodes of the product of prob along the root-to-node path: the expected
  // number of tokens one verification emits (accepted nodes plus the bonus token) when each node is
  // accepted with probability prob given its parent and siblings are mutually exclusive.
  double ExpectedLength() const;

  // Appends every node to `batch` for sequence `seq`, in node order, and returns the batch index of
  // node 0 (node i lands at that index + i). prefix_len counts the tokens before the depth-1 nodes,
  // the root included, so node v sits at position prefix_len + depth(v) - 1. root_index is the
  // batch index of the root token (usually placed just before the tree), or -1 when the root is
  // already in the KV cache; depth-1 nodes take it as their parent. Every node asks for logits (the
  // verifier needs each node's next-token distribution). Throws grove::Error, leaving the batch
  // unchanged, if a node has no token, the root index is not an earlier token of `seq`, or its
  // position is not prefix_len - 1.
  int32_t AppendToBatch(Batch& batch, int32_t prefix_len, int32_t seq, int32_t root_index) const;

  // One line per node in depth-first order, indented two spaces per level under a "root" line:
  //   root
  //     #0 tok=15 p=0.5
  //       #2 tok=7 p=0.8
  std::string ToText() const;
  // Graphviz DOT: node "r" for the root, "n<i>" for node i, edges labelled with prob.
  std::string ToDot() const;

 private:
  std::vector<TreeNode> nodes_;
  std::vector<int32_t> ranks_;
  // children_[i + 1]: children of node i (0: the root), for i < size(); lists past size() are
  // kept from earlier, larger trees and cleared when their node is added again.
  std::vector<std::vector<int32_t>> children_;
};

}  // namespace grove
