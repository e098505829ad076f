#include "speculate/token_tree.h"

#include <algorithm>
#include <sstream>

#include "base/error.h"

namespace grove {

AncestorMasks::AncestorMasks(int32_t n_nodes)
    : words_((n_nodes + 63) / 64), bits_(static_cast<size_t>(n_nodes) * words_, 0) {}

void TokenTree::Reserve(int32_t n_nodes, int32_t max_children) {
  nodes_.reserve(static_cast<size_t>(n_nodes));
  ranks_.reserve(static_cast<size_t>(n_nodes));
  if (children_.size() < static_cast<size_t>(n_nodes) + 1)
    children_.resize(static_cast<size_t>(n_nodes) + 1);
  for (auto& list : children_) list.reserve(static_cast<size_t>(max_children));
}

int32_t TokenTree::AddChild(int32_t parent, int32_t token, float prob) {
  const int32_t index = size();
  if (parent < -1 || parent >= index) {
    Fail("token tree: node ", index, ": parent ", parent, " is not an existing node (tree has ",
         index, " nodes; -1 is the root)");
  }
  if (!(prob >= 0.0f && prob <= 1.0f)) {
    Fail("token tree: node ", index, ": probability ", prob, " is outside [0, 1]");
  }
  const int32_t depth = parent < 0 ? 1 : nodes_[static_cast<size_t>(parent)].depth + 1;
  if (depth < this->depth()) {
    Fail("token tree: node ", index, " at depth ", depth, " follows a node at depth ",
         this->depth(), "; nodes must be added in level order");
  }
  auto& siblings = children_[static_cast<size_t>(parent) + 1];
  nodes_.push_back({.token = token, .parent = parent, .depth = depth, .prob = prob});
  ranks_.push_back(static_cast<int32_t>(siblings.size()));
  siblings.push_back(index);
  if (children_.size() <= static_cast<size_t>(index) + 1) {
    children_.emplace_back();
  } else {
    children_[static_cast<size_t>(index) + 1].clear();
  }
  return index;
}

std::span<const int32_t> TokenTree::children(int32_t i) const {
  if (i < -1 || i >= size()) Fail("token tree: no node ", i, " (tree has ", size(), " nodes)");
  return children_[static_cast<size_t>(i) + 1];
}

std::vector<int32_t> TokenTree::Path(int32_t i) const {
  if (i < 0 || i >= size()) Fail("token tree: no node ", i, " (tree has ", size(), " nodes)");
  std::vector<int32_t> path(static_cast<size_t>(nodes_[static_cast<size_t>(i)].depth));
  for (int32_t v = i; v >= 0; v = nodes_[static_cast<size_t>(v)].parent) {
    path[static_cast<size_t>(nodes_[static_cast<size_t>(v)].depth - 1)] = v;
  }
  return path;
}

AncestorMasks TokenTree::Masks() const {
  AncestorMasks masks(size());
  // Level order puts every parent first, so one pass suffices: mask(v) = mask(parent) ∪ {v}.
  for (int32_t v = 0; v < size(); ++v) {
    auto row = masks.MutableRow(v);
    const int32_t parent = nodes_[static_cast<size_t>(v)].parent;
    if (parent >= 0) {
      auto from = masks.Row(parent);
      std::copy(from.begin(), from.end(), row.begin());
    }
    row[static_cast<size_t>(v / 64)] |= uint64_t{1} << (v % 64);
  }
  return masks;
}

double TokenTree::ExpectedLength() const {
  // Level order again: the path product of a node is its parent's times its own prob.
  std::vector<double> path_prob(nodes_.size());
  double expected = 1.0;  // the bonus token is always emitted
  for (size_t v = 0; v < nodes_.size(); ++v) {
    const int32_t parent = nodes_[v].parent;
    path_prob[v] = (parent < 0 ? 1.0 : path_prob[static_cast<size_t>(parent)]) * nodes_[v].prob;
    expected += path_prob[v];
  }
  return expected;
}

int32_t TokenTree::AppendToBatch(Batch& batch, int32_t prefix_len, int32_t seq,
                                 int32_t root_index) const {
  if (prefix_len < 1) Fail("token tree: prefix length ", prefix_len, " must count the root (>= 1)");
  if (root_index >= 0) {
    if (root_index >= batch.size()) {
      Fail("token tree: root index ", root_index, " is not in the batch (", batch.size(),
           " tokens)");
    }
    if (batch.seq_ids[static_cast<size_t>(root_index)] != seq) {
      Fail("token tree: root token at batch index ", root_index, " belongs to sequence ",
           batch.seq_ids[static_cast<size_t>(root_index)], ", not ", seq);
    }
    if (batch.positions[static_cast<size_t>(root_index)] != prefix_len - 1) {
      Fail("token tree: root token at batch index ", root_index, " sits at position ",
           batch.positions[static_cast<size_t>(root_index)],
           ", expected prefix length - 1 = ", prefix_len - 1);
    }
  } else if (root_index != -1) {
    Fail("token tree: root index ", root_index, " must be a batch index or -1");
  }
  for (int32_t v = 0; v < size(); ++v) {
    if (nodes_[static_cast<size_t>(v)].token == kNoToken) {
      Fail("token tree: node ", v, " has no token (a shape must be filled before verification)");
    }
  }
  const int32_t offset = batch.size();
  for (const TreeNode& node : nodes_) {
    const int32_t parent = node.parent < 0 ? root_index : offset + node.parent;
    batch.Add(node.token, prefix_len + node.depth - 1, seq, parent, /*want_logits=*/true);
  }
  return offset;
}

namespace {

void PrintNode(std::ostringstream& out, const TreeNode& node, int32_t index) {
  out << '#' << index << " tok=";
  if (node.token == kNoToken) {
    out << '?';
  } else {
    out << node.token;
  }
  out << " p=" << node.prob;
}

}  // namespace

std::string TokenTree::ToText() const {
  std::ostringstream out;
  out.precision(4);
  out << "root\n";
  // Depth-first with an explicit stack, children in rank order.
  std::vector<int32_t> stack(children_[0].rbegin(), children_[0].rend());
  while (!stack.empty()) {
    const int32_t v = stack.back();
    stack.pop_back();
    const TreeNode& node = nodes_[static_cast<size_t>(v)];
    out << std::string(static_cast<size_t>(2 * node.depth), ' ');
    PrintNode(out, node, v);
    out << '\n';
    const auto& kids = children_[static_cast<size_t>(v) + 1];
    stack.insert(stack.end(), kids.rbegin(), kids.rend());
  }
  return out.str();
}

std::string TokenTree::ToDot() const {
  std::ostringstream out;
  out.precision(4);
  out << "digraph token_tree {\n  r [label=\"root\"];\n";
  for (int32_t v = 0; v < size(); ++v) {
    const TreeNode& node = nodes_[static_cast<size_t>(v)];
    out << "  n" << v << " [label=\"";
    PrintNode(out, node, v);
    out << "\"];\n";
    out << "  ";
    if (node.parent < 0) {
      out << 'r';
    } else {
      out << 'n' << node.parent;
    }
    out << " -> n" << v << " [label=\"" << node.prob << "\"];\n";
  }
  out << "}\n";
  return out.str();
}

}  // namespace grove
