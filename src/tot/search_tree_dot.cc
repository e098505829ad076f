#include "base/error.h"
#include "tot/search_tree_writers.h"

namespace grove {
namespace {

// A DOT string literal's contents.
std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::string SearchTreeDot(const SearchTree& tree) {
  std::string out =
      "digraph thought_search {\n"
      "  node [shape=box, fontname=\"monospace\", fontsize=10];\n"
      "  edge [color=\"#888888\"];\n";
  for (const ThoughtNode& node : tree.nodes) {
    std::string label = Escape(ThoughtNodeTitle(node));
    const std::string value = ThoughtNodeValueText(node);
    if (!value.empty()) label += "\\n" + Escape(value);
    std::string style = node.kept ? "style=\"filled" : "style=\"solid";
    style += node.on_answer_path ? ",bold\", penwidth=3" : "\"";
    if (node.kept) style += ", fillcolor=\"#d4edda\"";
    if (!node.kept) style += ", fontcolor=\"#666666\"";
    out += StrCat("  n", node.id, " [label=\"", label, "\", ", style, "];\n");
  }
  for (const ThoughtNode& node : tree.nodes) {
    if (node.parent < 0) continue;
    out += StrCat("  n", node.parent, " -> n", node.id,
                  node.on_answer_path ? " [penwidth=3, color=\"#000000\"]" : "", ";\n");
  }
  out += "}\n";
  return out;
}

}  // namespace grove
