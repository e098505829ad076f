// The record of one tree-of-thought search (tot/thought_search.h): every state it reached, how it
// was valued, which states the breadth limit kept, and the path to the answer. Writers for people
// and for Graphviz are in tot/search_tree_writers.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tasks/game24.h"

namespace grove {

struct ThoughtNode {
  int32_t id = 0;       // index in SearchTree::nodes
  int32_t parent = -1;  // -1 for the root
  int32_t depth = 0;    // 0 for the root (the puzzle), t for a state reached at step t
  int32_t sample = -1;  // which of the parent's generations first proposed the step (-1: root)
  std::string step;     // the step as FormatGame24Step writes it; empty for the root
  std::vector<Rational> numbers;       // the state: the numbers left, ascending
  double value = 0;                    // the evaluator's value (0 for the root)
  std::optional<Game24Label> label;    // the label it was valued by; nullopt: none could be read
  bool value_generated = false;        // false: not valued, or one number left (thought_search.h)
  std::string value_text;              // the value generation's text
  std::vector<std::string> proposals;  // texts of the generations that expanded this state
  bool kept = false;                   // among the `breadth` best of its step (the root is kept)
  bool solved = false;                 // the numbers are exactly {24}
  bool on_answer_path = false;         // the answer state or one of its ancestors
};

struct SearchTree {
  std::vector<ThoughtNode> nodes;  // nodes[0] is the root; parents come before their children
  int32_t answer = -1;             // id of the answer state, -1 when none was found

  // Ids of the root..answer path, root first; empty when there is no answer.
  std::vector<int32_t> AnswerPath() const;
  // Ids of the children of `id`, in the order they were found.
  std::vector<int32_t> Children(int32_t id) const;
};

}  // namespace grove
