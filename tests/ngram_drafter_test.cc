// Prompt lookup: the n-gram drafter guesses the token that FOLLOWED the most recent earlier
// occurrence of the text's suffix (longest n-gram first), at the root and below tree nodes, and
// keeps its history in step with what the session commits.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "speculate/ngram_drafter.h"
#include "speculate/token_tree.h"

namespace grove {
namespace {

constexpr int32_t kVocab = 16;

// The one token a row of Expand gives mass (0 logit), or -1 when none; every other entry -inf.
int32_t Guess(std::span<const float> row) {
  int32_t guess = -1;
  for (int32_t t = 0; t < static_cast<int32_t>(row.size()); ++t) {
    if (row[t] == 0.0f) {
      EXPECT_EQ(guess, -1) << "two guesses in one row";
      guess = t;
    } else {
      EXPECT_TRUE(std::isinf(row[t]) && row[t] < 0) << "token " << t << ": " << row[t];
    }
  }
  return guess;
}

TEST(NgramDrafter, PredictsTheTokenAfterTheMatch) {
  NgramDrafter d(kVocab, 64);
  // "5 6" occurred before, followed by 7: the guess is 7, not the matched 5 or 6.
  EXPECT_EQ(d.Predict(std::vector<int32_t>{5, 6, 7, 8, 5, 6}), 7);
  // The longest n-gram wins: "1 2 3" was followed by 9, the shorter "2 3" (more recent) by 4.
  EXPECT_EQ(d.Predict(std::vector<int32_t>{1, 2, 3, 9, 2, 3, 4, 1, 2, 3}), 9);
  // Among matches of one length, the most recent: "1" was followed by 7, then by 8.
  EXPECT_EQ(d.Predict(std::vector<int32_t>{1, 7, 1, 8, 1}), 8);
  EXPECT_EQ(d.Predict(std::vector<int32_t>{1, 2, 3, 4}), -1);  // nothing repeats
  EXPECT_EQ(d.Predict(std::vector<int32_t>{3}), -1);
}

TEST(NgramDrafter, ExpandsTheRootAndTreeNodesFromTheirPaths) {
  NgramDrafter d(kVocab, 64);
  d.Begin(std::vector<int32_t>{5, 6, 7, 8, 5});  // the root (last token) is 5
  TokenTree tree;
  const std::vector<int32_t> root = {-1};
  EXPECT_EQ(Guess(d.Expand(tree, root)), 6);  // "5" was followed by 6
  // Below the root: a node holding 6 extends the text to "... 5 6", followed by 7 before; a node
  // holding 9 matches nothing.
  const int32_t six = tree.AddChild(-1, 6, 1.0f);
  const int32_t nine = tree.AddChild(-1, 9, 1.0f);
  const int32_t seven = tree.AddChild(six, 7, 1.0f);
  const std::vector<int32_t> frontier = {six, nine, seven};
  const std::span<const float> rows = d.Expand(tree, frontier);
  ASSERT_EQ(rows.size(), 3u * kVocab);
  EXPECT_EQ(Guess(rows.subspan(0, kVocab)), 7);
  EXPECT_EQ(Guess(rows.subspan(kVocab, kVocab)), -1);
  EXPECT_EQ(Guess(rows.subspan(2 * kVocab, kVocab)), 8);  // "5 6 7" was followed by 8
}

TEST(NgramDrafter, CommitExtendsTheHistory) {
  NgramDrafter d(kVocab, 64);
  d.Begin(std::vector<int32_t>{2, 3, 4, 2});
  TokenTree tree;
  const int32_t three = tree.AddChild(-1, 3, 1.0f);
  // Accepting "3" and then the target's next token 11: the text is "2 3 4 2 3 11".
  d.Commit(tree, std::vector<int32_t>{three}, 11);
  TokenTree empty;
  const std::vector<int32_t> root = {-1};
  EXPECT_EQ(Guess(d.Expand(empty, root)), -1);  // 11 never occurred before
  d.Commit(empty, {}, 2);  // "... 3 11 2": "11 2" is new, "2" -> 3 most recently
  EXPECT_EQ(Guess(d.Expand(empty, root)), 3);
}

}  // namespace
}  // namespace grove
