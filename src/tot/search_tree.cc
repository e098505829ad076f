#include "tot/search_tree.h"

#include <algorithm>

#include "base/error.h"
#include "tot/search_tree_writers.h"

namespace grove {

std::vector<int32_t> SearchTree::AnswerPath() const {
  std::vector<int32_t> path;
  for (int32_t id = answer; id >= 0; id = nodes[static_cast<std::size_t>(id)].parent) {
    path.push_back(id);
  }
  std::reverse(path.begin(), path.end());
  return path;
}

std::vector<int32_t> SearchTree::Children(int32_t id) const {
  std::vector<int32_t> children;
  for (const ThoughtNode& node : nodes) {
    if (node.parent == id) children.push_back(node.id);
  }
  return children;
}

std::string ThoughtNodeTitle(const ThoughtNode& node) {
  return node.parent < 0 ? FormatGame24Numbers(node.numbers) : node.step;
}

std::string ThoughtNodeValueText(const ThoughtNode& node) {
  if (node.parent < 0) return "";
  const std::string label = node.label ? std::string(Game24LabelName(*node.label)) : "no label";
  const bool unvalued_by_model = !node.value_generated && node.numbers.size() == 1;
  return StrCat(node.value, " ", label, unvalued_by_model ? " (one number left)" : "");
}

}  // namespace grove
