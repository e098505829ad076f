// How many tokens trees of each depth gave, against what Sequoia's positional model expected of
// them. The model (positional_acceptance.h) prices every node by its rank alone, whatever its
// depth; a text's acceptance need not be that of independent ranks. On Game of 24 prompts with the
// bundled mixture (p_1 about 0.77, p_2 under 0.1) a chain of 5 gave 3.6 tokens a step where the
// model said 3.44, and a chain of 10 gave 3.9 where it said 4.1: the model, right about the rate of
// first guesses over all depths, overrates deep nodes and underrates shallow ones.
//
// Every tree verified is also read as each of its shallower cuts (its nodes down to depth j, for
// every j up to its own): the tokens the cut would have given, 1 + min(accepted, j), against those
// the model expects of it, 1 + the sum over its nodes of the product of p_k of the ranks along the
// node's path. Both are faded by the number of trees observed since (half-life `half_life_trees`).
// Ratio(d) is their quotient for trees of d levels (root included), with `prior_tokens` tokens of
// ratio 1 in both; a depth deeper than any observed takes the deepest observed one's.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "speculate/token_tree.h"

namespace grove {

class DepthCalibration {
 public:
  // Depths of up to max_levels levels (root included) are kept; deeper nodes are left out.
  DepthCalibration(int32_t max_levels, double prior_tokens, double half_life_trees);

  // One verified tree, its accepted path (root to leaf), and the vector its ranks are priced by.
  void Observe(const TokenTree& tree, std::span<const int32_t> accepted,
               std::span<const double> acceptance);
  // Tokens given over tokens the model expected, for trees of `levels` levels (>= 2).
  double Ratio(int32_t levels) const;

 private:
  struct Record {
    double expected = 0.0;  // tokens the model expected of the cuts
    double given = 0.0;     // tokens they gave
    int64_t tick = 0;       // trees_ when last faded
  };
  double Fade(const Record& record) const;

  std::vector<Record> records_;  // [levels]
  double prior_tokens_;
  double half_life_trees_;
  int64_t trees_ = 0;
  std::vector<double> path_prob_;  // Observe's scratch: by node
  std::vector<double> at_depth_;   // ... path probabilities summed by depth
};

}  // namespace grove
