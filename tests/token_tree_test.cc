// TokenTree: level-order validation, children and ranks, paths, ancestor masks (including trees
// wider than one 64-bit word), E(A), the text and DOT renderings, and placement into a Batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "base/error.h"
#include "speculate/token_tree.h"

namespace grove {
namespace {

// OPT-Tree's Figure 4 tree (digest 003 §4.8): root -> a 0.5, b 0.4; a -> 0.8, 0.1; a.0.8 -> 0.5,
// 0.2; b -> 0.6, 0.2; b.0.6 -> 0.5. Tokens are 10 + node index.
TokenTree Figure4Tree() {
  TokenTree t;
  const int a = t.AddChild(-1, 10, 0.5f);  // 0
  const int b = t.AddChild(-1, 11, 0.4f);  // 1
  const int a1 = t.AddChild(a, 12, 0.8f);  // 2
  t.AddChild(a, 13, 0.1f);                 // 3
  const int b1 = t.AddChild(b, 14, 0.6f);  // 4
  t.AddChild(b, 15, 0.2f);                 // 5
  t.AddChild(a1, 16, 0.5f);                // 6
  t.AddChild(a1, 17, 0.2f);                // 7
  t.AddChild(b1, 18, 0.5f);                // 8
  return t;
}

TEST(TokenTree, TracksDepthParentsChildrenAndRanks) {
  TokenTree t = Figure4Tree();
  ASSERT_EQ(t.size(), 9);
  EXPECT_EQ(t.depth(), 3);
  EXPECT_EQ(t.node(0).parent, -1);
  EXPECT_EQ(t.node(0).depth, 1);
  EXPECT_EQ(t.node(4).parent, 1);
  EXPECT_EQ(t.node(4).depth, 2);
  EXPECT_EQ(t.node(8).depth, 3);
  EXPECT_EQ(std::vector<int32_t>(t.children(-1).begin(), t.children(-1).end()),
            (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(std::vector<int32_t>(t.children(2).begin(), t.children(2).end()),
            (std::vector<int32_t>{6, 7}));
  EXPECT_TRUE(t.children(3).empty());
  EXPECT_EQ(t.rank(0), 0);
  EXPECT_EQ(t.rank(1), 1);
  EXPECT_EQ(t.rank(5), 1);
  EXPECT_EQ(t.rank(8), 0);
}

TEST(TokenTree, RejectsBrokenLevelOrderAndBadInput) {
  TokenTree t;
  EXPECT_THROW(t.AddChild(0, 1, 0.5f), Error);  // no node 0 yet
  const int a = t.AddChild(-1, 1, 0.5f);
  EXPECT_THROW(t.AddChild(-2, 1, 0.5f), Error);
  EXPECT_THROW(t.AddChild(-1, 2, 1.5f), Error);
  EXPECT_THROW(t.AddChild(-1, 2, -0.1f), Error);
  t.AddChild(a, 2, 0.5f);  // depth 2
  try {
    t.AddChild(-1, 3, 0.5f);  // depth 1 after depth 2
    FAIL() << "level order not enforced";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("level order"), std::string::npos) << e.what();
  }
  EXPECT_EQ(t.size(), 2);  // a rejected node leaves the tree unchanged
  EXPECT_THROW(t.children(2), Error);
}

TEST(TokenTree, PathRunsFromDepthOneToTheNode) {
  TokenTree t = Figure4Tree();
  EXPECT_EQ(t.Path(6), (std::vector<int32_t>{0, 2, 6}));
  EXPECT_EQ(t.Path(8), (std::vector<int32_t>{1, 4, 8}));
  EXPECT_EQ(t.Path(1), (std::vector<int32_t>{1}));
  EXPECT_THROW(t.Path(9), Error);
}

TEST(TokenTree, MasksHoldExactlyTheAncestorsAndSelf) {
  TokenTree t = Figure4Tree();
  AncestorMasks m = t.Masks();
  EXPECT_EQ(m.words(), 1);
  for (int32_t row = 0; row < t.size(); ++row) {
    std::vector<int32_t> path = t.Path(row);
    for (int32_t col = 0; col < t.size(); ++col) {
      const bool on_path = std::find(path.begin(), path.end(), col) != path.end();
      EXPECT_EQ(m.Sees(row, col), on_path) << "row " << row << " col " << col;
    }
  }
}

TEST(TokenTree, MasksSpanSeveralWordsForLargeTrees) {
  // A 130-node chain: node i sees 0..i, which crosses two word boundaries.
  TokenTree t;
  for (int i = 0; i < 130; ++i) t.AddChild(i - 1, i, 0.9f);
  AncestorMasks m = t.Masks();
  EXPECT_EQ(m.words(), 3);
  EXPECT_TRUE(m.Sees(129, 0));
  EXPECT_TRUE(m.Sees(129, 64));
  EXPECT_TRUE(m.Sees(129, 128));
  EXPECT_FALSE(m.Sees(64, 65));
  EXPECT_FALSE(m.Sees(63, 64));
  EXPECT_TRUE(m.Sees(64, 63));
  EXPECT_EQ(m.Row(129)[2], 0x3u);  // bits 128 and 129
}

TEST(TokenTree, ExpectedLengthIsTheFigure4Value) {
  // Digest 003 §4.8: E(A) = 3.07 for the Figure 4 tree.
  EXPECT_NEAR(Figure4Tree().ExpectedLength(), 3.07, 1e-6);
  EXPECT_DOUBLE_EQ(TokenTree().ExpectedLength(), 1.0);
}

TEST(TokenTree, RendersTextAndDot) {
  TokenTree t;
  const int a = t.AddChild(-1, 7, 0.5f);
  t.AddChild(-1, 8, 0.25f);
  t.AddChild(a, kNoToken, 1.0f);
  EXPECT_EQ(t.ToText(),
            "root\n"
            "  #0 tok=7 p=0.5\n"
            "    #2 tok=? p=1\n"
            "  #1 tok=8 p=0.25\n");
  const std::string dot = t.ToDot();
  EXPECT_EQ(dot.rfind("digraph token_tree {", 0), 0u) << dot;
  EXPECT_NE(dot.find("r -> n0 [label=\"0.5\"];"), std::string::npos) << dot;
  EXPECT_NE(dot.find("r -> n1 [label=\"0.25\"];"), std::string::npos) << dot;
  EXPECT_NE(dot.find("n0 -> n2 [label=\"1\"];"), std::string::npos) << dot;
  EXPECT_NE(dot.find("n2 [label=\"#2 tok=? p=1\"];"), std::string::npos) << dot;
  EXPECT_EQ(dot.back(), '\n');
}

TEST(TokenTree, AppendsAfterTheRootWithPositionsAndParents) {
  TokenTree t = Figure4Tree();
  Batch batch;
  // Another sequence's token first, so the tree's offsets are not 0.
  batch.Add(99, 3, /*seq=*/1, -1, true);
  const int32_t prefix_len = 20;  // 19 committed tokens in the cache + the root
  batch.Add(5, prefix_len - 1, /*seq=*/0, -1, true);
  const int32_t offset = t.AppendToBatch(batch, prefix_len, /*seq=*/0, /*root_index=*/1);
  ASSERT_EQ(offset, 2);
  ASSERT_EQ(batch.size(), 2 + t.size());
  for (int32_t v = 0; v < t.size(); ++v) {
    const size_t i = static_cast<size_t>(offset + v);
    EXPECT_EQ(batch.tokens[i], t.node(v).token);
    EXPECT_EQ(batch.positions[i], prefix_len + t.node(v).depth - 1);
    EXPECT_EQ(batch.seq_ids[i], 0);
    EXPECT_EQ(batch.logits[i], 1);
    const int32_t want_parent = t.node(v).parent < 0 ? 1 : offset + t.node(v).parent;
    EXPECT_EQ(batch.parents[i], want_parent) << "node " << v;
  }
  EXPECT_EQ(batch.positions[2], prefix_len);       // depth 1 sits at prefix_len
  EXPECT_EQ(batch.positions[10], prefix_len + 2);  // node 8, depth 3
}

TEST(TokenTree, AppendsWithTheRootInTheCache) {
  TokenTree t = Figure4Tree();
  Batch batch;
  EXPECT_EQ(t.AppendToBatch(batch, 8, 0, -1), 0);
  EXPECT_EQ(batch.parents[0], -1);
  EXPECT_EQ(batch.parents[1], -1);
  EXPECT_EQ(batch.parents[2], 0);
  EXPECT_EQ(batch.positions[0], 8);
}

TEST(TokenTree, AppendRejectsBadRootsAndShapesWithoutTokens) {
  TokenTree t = Figure4Tree();
  Batch batch;
  batch.Add(5, 9, 0, -1, true);
  EXPECT_THROW(t.AppendToBatch(batch, 10, 1, 0), Error);  // root belongs to sequence 0
  EXPECT_THROW(t.AppendToBatch(batch, 11, 0, 0), Error);  // root at 9, expected 10
  EXPECT_THROW(t.AppendToBatch(batch, 10, 0, 1), Error);  // no batch index 1
  EXPECT_THROW(t.AppendToBatch(batch, 0, 0, -1), Error);
  TokenTree shape;
  shape.AddChild(-1, kNoToken, 0.5f);
  try {
    shape.AppendToBatch(batch, 10, 0, 0);
    FAIL() << "placeholder token accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no token"), std::string::npos) << e.what();
  }
  EXPECT_EQ(batch.size(), 1);  // every rejection left the batch unchanged
}

}  // namespace
}  // namespace grove
