// Views of a tree-of-thought search tree (tot/search_tree.h): indented text for logs and terminals,
// Graphviz DOT, and a self-contained SVG drawn here (no external tools). Kept states are
// highlighted and the path to the answer is drawn bold in the DOT and SVG views.
#pragma once

#include <string>

#include "tot/search_tree.h"

namespace grove {

// What a node shows: its step, or the puzzle's numbers for the root ("13 - 9 = 4 (left: 4 4 10)").
std::string ThoughtNodeTitle(const ThoughtNode& node);
// Its value and label: "20 sure", "0.001 no label", "20 sure (one number left)"; empty for the
// root.
std::string ThoughtNodeValueText(const ThoughtNode& node);

// One line per node, children under their parent indented by two spaces, in the order found:
//   4 9 10 13  [answer path]
//     13 - 9 = 4 (left: 4 4 10)  [20 sure, kept, answer path]
//     ...
//         4 * 6 = 24 (left: 24)  [20 sure (one number left), kept, answer]
std::string FormatSearchTreeText(const SearchTree& tree);

// A digraph with one box per node labelled with its title and value; kept nodes filled, answer path
// (nodes and edges) bold. Render with e.g. `dot -Tsvg`.
std::string SearchTreeDot(const SearchTree& tree);

// An SVG picture: one row per depth (the puzzle on top), a box per node with its title and value,
// a line from each box to its parent's; kept boxes green, the answer path bold.
std::string SearchTreeSvg(const SearchTree& tree);

}  // namespace grove
