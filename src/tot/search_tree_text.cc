#include "base/error.h"
#include "tot/search_tree_writers.h"

namespace grove {
namespace {

void WriteNode(const SearchTree& tree, int32_t id, std::string* out) {
  const ThoughtNode& node = tree.nodes[static_cast<std::size_t>(id)];
  out->append(2 * static_cast<std::size_t>(node.depth), ' ');
  *out += ThoughtNodeTitle(node);
  std::string notes = ThoughtNodeValueText(node);
  auto note = [&](const char* s) { notes += notes.empty() ? s : StrCat(", ", s); };
  if (node.kept && node.parent >= 0) note("kept");
  if (id == tree.answer) {
    note("answer");
  } else if (node.on_answer_path) {
    note("answer path");
  }
  if (!notes.empty()) *out += StrCat("  [", notes, "]");
  *out += '\n';
  for (int32_t child : tree.Children(id)) WriteNode(tree, child, out);
}

}  // namespace

std::string FormatSearchTreeText(const SearchTree& tree) {
  std::string out;
  if (!tree.nodes.empty()) WriteNode(tree, 0, &out);
  return out;
}

}  // namespace grove
