#include "speculate/depth_calibration.h"

#include <gtest/gtest.h>

#include <vector>

#include "base/error.h"
#include "speculate/token_tree.h"

namespace grove {
namespace {

TokenTree Chain(int32_t length) {
  TokenTree tree;
  for (int32_t parent = -1, i = 0; i < length; ++i) parent = tree.AddChild(parent, 100 + i, 0.0f);
  return tree;
}

// Each cut of a tree is priced by the vector it is given, whatever the probabilities the tree's
// nodes carry: a chain of 4 at p_1 = 0.5 expects 1.5, 1.75, 1.875 and 1.9375 tokens of its cuts at
// depth 1..4; with 2 nodes accepted they gave 2, 3, 3 and 3.
TEST(DepthCalibration, EachCutGivesWhatItsPartOfThePathGave) {
  DepthCalibration calibration(/*max_levels=*/16, /*prior_tokens=*/1.0, /*half_life_trees=*/64.0);
  EXPECT_EQ(calibration.Ratio(5), 1.0) << "nothing observed";
  const TokenTree chain = Chain(4);
  const std::vector<int32_t> accepted = {0, 1};
  const std::vector<double> p = {0.5};
  calibration.Observe(chain, accepted, p);
  EXPECT_DOUBLE_EQ(calibration.Ratio(2), (1.0 + 2.0) / (1.0 + 1.5));
  EXPECT_DOUBLE_EQ(calibration.Ratio(3), (1.0 + 3.0) / (1.0 + 1.75));
  EXPECT_DOUBLE_EQ(calibration.Ratio(4), (1.0 + 3.0) / (1.0 + 1.875));
  EXPECT_DOUBLE_EQ(calibration.Ratio(5), (1.0 + 3.0) / (1.0 + 1.9375));
  // Deeper than any tree observed: the deepest observed depth's.
  EXPECT_DOUBLE_EQ(calibration.Ratio(9), calibration.Ratio(5));
  EXPECT_DOUBLE_EQ(calibration.Ratio(99), calibration.Ratio(5));
}

// Ranks follow the order children were added: the root's second child is priced at p_2, its
// first child's child at p_1 p_1. The rank-2 child accepted gives each cut 2 tokens.
TEST(DepthCalibration, NodesArePricedByTheRanksAlongTheirPath) {
  DepthCalibration calibration(16, 1.0, 64.0);
  TokenTree tree;
  const int32_t a = tree.AddChild(-1, 10, 0.9f);
  const int32_t b = tree.AddChild(-1, 11, 0.9f);
  tree.AddChild(a, 12, 0.9f);
  const std::vector<int32_t> accepted = {b};
  calibration.Observe(tree, accepted, std::vector<double>{0.6, 0.3});
  EXPECT_DOUBLE_EQ(calibration.Ratio(2), (1.0 + 2.0) / (1.0 + 1.9));
  EXPECT_DOUBLE_EQ(calibration.Ratio(3), (1.0 + 2.0) / (1.0 + 1.9 + 0.36));
}

// Older trees weigh less: with a half-life of one tree, the first of two weighs half.
TEST(DepthCalibration, OldTreesFade) {
  DepthCalibration calibration(16, 1.0, /*half_life_trees=*/1.0);
  const TokenTree chain = Chain(1);
  const std::vector<double> p = {0.5};
  calibration.Observe(chain, std::vector<int32_t>{0}, p);  // gave 2, expected 1.5
  calibration.Observe(chain, {}, p);                       // gave 1, expected 1.5
  EXPECT_DOUBLE_EQ(calibration.Ratio(2), (1.0 + 0.5 * 2.0 + 1.0) / (1.0 + 0.5 * 1.5 + 1.5));
  // Nodes deeper than max_levels are left out; bad arguments are refused.
  DepthCalibration shallow(/*max_levels=*/3, 1.0, 64.0);
  shallow.Observe(Chain(6), std::vector<int32_t>{0, 1, 2, 3, 4}, p);
  EXPECT_DOUBLE_EQ(shallow.Ratio(3), (1.0 + 3.0) / (1.0 + 1.75));
  EXPECT_DOUBLE_EQ(shallow.Ratio(7), shallow.Ratio(3));
  EXPECT_THROW(DepthCalibration(1, 1.0, 64.0), Error);
  EXPECT_THROW(DepthCalibration(16, 0.0, 64.0), Error);
}

}  // namespace
}  // namespace grove
