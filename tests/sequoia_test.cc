// Sequoia: the positional-acceptance value F of a tree (closed forms, Monte Carlo), the dynamic
// program against brute force over every ordered tree, and the hardware-aware (n, d) choice.
#include <gtest/gtest.h>

#include <cmath>
#include <deque>
#include <random>
#include <vector>

#include "base/error.h"
#include "speculate/sequoia.h"

namespace grove {
namespace {

// ---- Brute force: every ordered tree with a given number of non-root nodes. ----

struct Shape {
  std::vector<Shape> kids;
};
using Forest = std::vector<Shape>;

// forests[k]: every ordered forest of k nodes (Catalan(k) of them), memoised.
const std::vector<std::vector<Forest>>& AllForests(int max_nodes) {
  static std::vector<std::vector<Forest>> forests = {{Forest{}}};
  while (static_cast<int>(forests.size()) <= max_nodes) {
    const int k = static_cast<int>(forests.size());
    std::vector<Forest> all;
    for (int first = 1; first <= k; ++first) {          // nodes in the first tree
      for (const Forest& below : forests[first - 1]) {  // its root's subtrees
        for (const Forest& rest : forests[k - first]) {
          Forest f;
          f.push_back(Shape{below});
          f.insert(f.end(), rest.begin(), rest.end());
          all.push_back(std::move(f));
        }
      }
    }
    forests.push_back(std::move(all));
  }
  return forests;
}

TokenTree ToTree(const Forest& forest) {
  TokenTree tree;
  std::deque<std::pair<const Shape*, int32_t>> queue;
  for (const Shape& s : forest) queue.emplace_back(&s, tree.AddChild(-1, 0, 0.0f));
  while (!queue.empty()) {
    auto [shape, node] = queue.front();
    queue.pop_front();
    for (const Shape& s : shape->kids) queue.emplace_back(&s, tree.AddChild(node, 0, 0.0f));
  }
  return tree;
}

// max F over trees of at most `size` tokens (root included) whose TokenTree depth is at most
// max_levels - 1. (With unbounded branching, as here, "at most" and "exactly" agree whenever a tree
// of exactly `size` tokens fits; it does not at max_levels = 1.)
double BruteForceBest(std::span<const double> p, int size, int max_levels) {
  double best = -1.0;
  for (int nodes = 0; nodes <= size - 1; ++nodes) {
    for (const Forest& f : AllForests(size - 1)[static_cast<size_t>(nodes)]) {
      TokenTree t = ToTree(f);
      if (t.depth() > max_levels - 1) continue;
      best = std::max(best, PositionalExpectedLength(t, p));
    }
  }
  return best;
}

// The last two are flat and long enough that the branching cap binds at the sizes tested: for
// n = 8 the best tree is the star of 7 children (1 + 7 x 0.12 beats any tree with a grandchild),
// which needs a cap of min(|p|, n - 1) = 7 exactly, with |p| = 8 and with |p| = 7; a cap one lower
// on either side would lose it.
const std::vector<std::vector<double>> kVectors = {
    {0.6, 0.2, 0.1},
    {0.8},
    {0.3, 0.25, 0.2, 0.15, 0.05},
    {0.45, 0.3, 0.05, 0.05},
    std::vector<double>(8, 0.12),
    std::vector<double>(7, 0.13),
};

TokenTree Chain(int length) {
  TokenTree t;
  for (int i = 0; i < length; ++i) t.AddChild(i - 1, 0, 1.0f);
  return t;
}

// k independent sequences of length L (SpecInfer's k x L).
TokenTree KByL(int k, int length) {
  TokenTree t;
  std::vector<int32_t> tips(static_cast<size_t>(k), -1);
  for (int level = 0; level < length; ++level) {
    for (auto& tip : tips) tip = t.AddChild(tip, 0, 1.0f);
  }
  return t;
}

TEST(PositionalExpectedLength, ChainClosedForm) {
  // F(chain of L) = sum_{j=0..L} p_1^j (digest 001 §2.10).
  const std::vector<double> p = {0.7, 0.2};
  for (int length : {0, 1, 5, 12}) {
    const double want = (1 - std::pow(0.7, length + 1)) / (1 - 0.7);
    EXPECT_NEAR(PositionalExpectedLength(Chain(length), p), want, 1e-12) << length;
  }
}

TEST(PositionalExpectedLength, KByLClosedForm) {
  // F(k x L) = 1 + (p_1 + ... + p_k)(1 - p_1^L)/(1 - p_1): only the first token gains from width.
  const std::vector<double> p = {0.5, 0.2, 0.1, 0.05};
  for (auto [k, length] : {std::pair{1, 4}, {2, 3}, {3, 5}, {4, 2}, {6, 3}}) {
    double first = 0;
    for (int i = 0; i < std::min<int>(k, p.size()); ++i) first += p[static_cast<size_t>(i)];
    const double want = 1 + first * (1 - std::pow(0.5, length)) / (1 - 0.5);
    EXPECT_NEAR(PositionalExpectedLength(KByL(k, length), p), want, 1e-12) << k << "x" << length;
  }
}

TEST(PositionalExpectedLength, MatchesASimulatedVerifier) {
  // Prop. 3.4 checked by simulation, not by the formula: at an accepted node, child k is the
  // accepted one with probability p_k (disjoint), else the step ends; tokens = accepted + 1.
  const std::vector<double> p = {0.5, 0.25, 0.15};
  TokenTree t;
  const int a = t.AddChild(-1, 0, 0), b = t.AddChild(-1, 0, 0);
  t.AddChild(-1, 0, 0);
  const int a1 = t.AddChild(a, 0, 0);
  t.AddChild(a, 0, 0);
  t.AddChild(b, 0, 0);
  t.AddChild(a1, 0, 0);
  std::mt19937_64 rng(1234);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  const int trials = 400000;
  double sum = 0, sum_sq = 0;
  for (int i = 0; i < trials; ++i) {
    int node = -1, tokens = 1;
    while (true) {
      const double u = uniform(rng);
      auto kids = t.children(node);
      double edge = 0;
      int next = -1;
      for (size_t k = 0; k < kids.size() && k < p.size(); ++k) {
        edge += p[k];
        if (u < edge) {
          next = kids[k];
          break;
        }
      }
      if (next < 0) break;
      node = next;
      ++tokens;
    }
    sum += tokens;
    sum_sq += double(tokens) * tokens;
  }
  const double mean = sum / trials;
  const double se = std::sqrt((sum_sq / trials - mean * mean) / trials);
  EXPECT_NEAR(mean, PositionalExpectedLength(t, p), 5 * se);
}

TEST(SequoiaTable, UnboundedMatchesBruteForce) {
  for (const auto& p : kVectors) {
    SequoiaTable table = SequoiaTable::Build(p, 8);
    for (int n = 1; n <= 8; ++n) {
      const double want = BruteForceBest(p, n, n);
      EXPECT_NEAR(table.Value(n), want, 1e-12) << "n " << n << " |p| " << p.size();
      TokenTree tree = table.Tree(n);
      EXPECT_LE(tree.size(), n - 1);
      EXPECT_NEAR(PositionalExpectedLength(tree, p), want, 1e-12);
      EXPECT_NEAR(tree.ExpectedLength(), want, 1e-6);  // prob fields carry p_rank
    }
  }
}

TEST(SequoiaTable, DepthBoundedMatchesBruteForce) {
  for (const auto& p : kVectors) {
    SequoiaTable table = SequoiaTable::Build(p, 8, 5);
    for (int n = 1; n <= 8; ++n) {
      for (int d = 1; d <= 5; ++d) {
        const double want = BruteForceBest(p, n, d);
        EXPECT_NEAR(table.Value(n, d), want, 1e-12) << "n " << n << " d " << d;
        TokenTree tree = table.Tree(n, d);
        EXPECT_LE(tree.size(), n - 1);
        EXPECT_LE(tree.depth(), d - 1);
        EXPECT_NEAR(PositionalExpectedLength(tree, p), want, 1e-12);
      }
    }
  }
}

TEST(SequoiaTable, SingleEntryVectorGivesChains) {
  // Only the first child can be accepted, so the best tree is a chain: G(n) = sum_{j<n} p_1^j, and
  // with depth d < n the chain stops at d levels (the extra nodes would never be accepted).
  const std::vector<double> p = {0.8};
  SequoiaTable table = SequoiaTable::Build(p, 30, 10);
  for (int n = 1; n <= 30; ++n) {
    for (int d = 1; d <= 10; ++d) {
      const int levels = std::min(n, d);
      EXPECT_NEAR(table.Value(n, d), (1 - std::pow(0.8, levels)) / 0.2, 1e-12);
      TokenTree tree = table.Tree(n, d);
      EXPECT_EQ(tree.size(), levels - 1);
      EXPECT_EQ(tree.depth(), levels - 1);
    }
  }
}

TEST(SequoiaTable, StarValueAtDepthTwo) {
  // Depth 2 (root + one level): the root's children in rank order, G(n, 2) = 1 + p_1 + ... +
  // p_{n-1}.
  const std::vector<double> p = {0.4, 0.3, 0.1, 0.05};
  SequoiaTable table = SequoiaTable::Build(p, 8, 2);
  double want = 1;
  for (int n = 1; n <= 8; ++n) {
    if (n >= 2 && n - 2 < static_cast<int>(p.size())) want += p[static_cast<size_t>(n - 2)];
    EXPECT_NEAR(table.Value(n, 2), want, 1e-12) << n;
  }
}

TEST(SequoiaTable, MonotoneAndDepthBoundVanishesAtDepthN) {
  const std::vector<double> p = {0.55, 0.2, 0.1, 0.06, 0.04, 0.02};
  const int N = 48;
  SequoiaTable unbounded = SequoiaTable::Build(p, N);
  SequoiaTable bounded = SequoiaTable::Build(p, N, N);
  for (int n = 1; n <= N; ++n) {
    if (n > 1) {
      EXPECT_GT(unbounded.Value(n), unbounded.Value(n - 1)) << n;  // p_1 > 0: a node always helps
    }
    EXPECT_NEAR(bounded.Value(n, n), unbounded.Value(n), 1e-12) << n;
    EXPECT_NEAR(bounded.Value(n, N), unbounded.Value(n), 1e-12) << n;
    for (int d = 2; d <= N; ++d) {
      EXPECT_GE(bounded.Value(n, d), bounded.Value(n, d - 1)) << n << " " << d;
    }
  }
  TokenTree tree = unbounded.Tree(N);
  EXPECT_EQ(tree.size(), N - 1);
  EXPECT_NEAR(PositionalExpectedLength(tree, p), unbounded.Value(N), 1e-12);
}

TEST(SequoiaTable, BeatsHandDesignedShapesAndRespectsTheBinaryBound) {
  // Optimal by construction: no chain, k x L or binary tree of the same size does better; with two
  // useful ranks F <= 1 / (1 - p_1 - p_2) for any tree (digest 001 §2.10).
  const std::vector<double> p = {0.5, 0.3};
  SequoiaTable table = SequoiaTable::Build(p, 64);
  const double g = table.Value(64);  // 63 speculated nodes
  EXPECT_GE(g, PositionalExpectedLength(Chain(63), p));
  EXPECT_GE(g, PositionalExpectedLength(KByL(7, 9), p));
  EXPECT_GE(g, PositionalExpectedLength(KByL(3, 21), p));
  TokenTree binary;  // complete binary, depths 1..5: 62 nodes
  std::vector<int32_t> level = {-1};
  for (int depth = 1; depth <= 5; ++depth) {
    std::vector<int32_t> next;
    for (int32_t parent : level) {
      next.push_back(binary.AddChild(parent, 0, 0));
      next.push_back(binary.AddChild(parent, 0, 0));
    }
    level = next;
  }
  EXPECT_GT(g, PositionalExpectedLength(binary, p));
  for (int n = 1; n <= 64; ++n) EXPECT_LT(table.Value(n), 1 / (1 - 0.5 - 0.3));
}

TEST(SequoiaTable, RejectsBadInput) {
  EXPECT_THROW(SequoiaTable::Build(std::vector<double>{}, 8), Error);
  EXPECT_THROW(SequoiaTable::Build(std::vector<double>{0.7, 0.5}, 8), Error);  // sums past 1
  EXPECT_THROW(SequoiaTable::Build(std::vector<double>{-0.1}, 8), Error);
  EXPECT_THROW(SequoiaTable::Build(std::vector<double>{NAN}, 8), Error);
  EXPECT_THROW(SequoiaTable::Build(std::vector<double>{0.5}, 0), Error);
  EXPECT_NO_THROW(SequoiaTable::Build(std::vector<double>{0.6, 0.4 + 1e-9}, 8));  // rounding slack
  SequoiaTable unbounded = SequoiaTable::Build(std::vector<double>{0.5}, 8);
  EXPECT_THROW(unbounded.Value(9), Error);
  EXPECT_THROW(unbounded.Value(4, 2), Error);  // no depth dimension
  EXPECT_THROW(unbounded.Tree(0), Error);
}

TEST(VerifyCostCurve, InterpolatesLinearlyAndValidates) {
  VerifyCostCurve curve({{1, 2.0}, {5, 6.0}, {9, 6.0}});
  EXPECT_DOUBLE_EQ(curve.Seconds(1), 2.0);
  EXPECT_DOUBLE_EQ(curve.Seconds(3), 4.0);
  EXPECT_DOUBLE_EQ(curve.Seconds(5), 6.0);
  EXPECT_DOUBLE_EQ(curve.Seconds(7), 6.0);
  EXPECT_THROW(curve.Seconds(10), Error);
  EXPECT_THROW(curve.Seconds(0), Error);
  EXPECT_THROW(VerifyCostCurve({{2, 1.0}}), Error);
  EXPECT_THROW(VerifyCostCurve({{1, 1.0}, {1, 2.0}}), Error);
  EXPECT_THROW(VerifyCostCurve({{1, 0.0}}), Error);
  // No forward holds more than kMaxVerifyTokens: what is sized by a curve's last n stays small.
  EXPECT_THROW(VerifyCostCurve({{1, 1.0}, {kMaxVerifyTokens + 1, 2.0}}), Error);
  EXPECT_THROW(VerifyCostCurve({{1, 1.0}, {2000000000, 2.0}}), Error);
  EXPECT_NO_THROW(VerifyCostCurve({{1, 1.0}, {kMaxVerifyTokens, 2.0}}));
}

TEST(ChooseSizeAndDepth, PicksTheKneeOfAFlatThenLinearCurve) {
  // p = (0.8): trees are chains and G(n, d) = (1 - 0.8^min(n,d)) / 0.2. Verification is flat up to
  // n = 8 and then costs one more t(1) per token, drafting 0.05 t(1) per level. Along the flat part
  // the rate (1 - 0.8^k)/0.2/(1 + 0.05k) rises to k = 8 (2.972; k = 7 gives 2.927), and n = 9 costs
  // 2.45 for 4.33 tokens, so the optimum is (8, 8).
  SequoiaTable table = SequoiaTable::Build(std::vector<double>{0.8}, 64, 16);
  VerifyCostCurve curve({{1, 1.0}, {8, 1.0}, {64, 57.0}});
  SizeDepthChoice c = ChooseSizeAndDepth(table, curve, 0.05);
  EXPECT_EQ(c.size, 8);
  EXPECT_EQ(c.depth, 8);
  const double g = (1 - std::pow(0.8, 8)) / 0.2;
  EXPECT_NEAR(c.expected_tokens, g, 1e-12);
  EXPECT_NEAR(c.step_seconds, 1.4, 1e-12);
  EXPECT_NEAR(c.tokens_per_second, g / 1.4, 1e-12);
  EXPECT_NEAR(c.speedup, g / 1.4, 1e-12);  // t(1) = 1 s
}

TEST(ChooseSizeAndDepth, CostlyDraftingFallsBackToPlainDecoding) {
  // Drafting a level costs 10 t(1). The best tree would be depth 2 (one draft pass over the root):
  // 1 + 0.5 + 0.3 + 0.1 = 1.9 tokens for 21 t(1), far below plain decoding's one token per t(1),
  // which is a candidate and wins.
  SequoiaTable table = SequoiaTable::Build(std::vector<double>{0.5, 0.3, 0.1}, 16, 6);
  VerifyCostCurve curve({{1, 1.0}, {16, 1.0}});
  SizeDepthChoice c = ChooseSizeAndDepth(table, curve, 10.0);
  EXPECT_EQ(c.size, 1);
  EXPECT_EQ(c.depth, 1);
  EXPECT_DOUBLE_EQ(c.speedup, 1.0);
  EXPECT_TRUE(table.Tree(c.size, c.depth).empty());
  // Cheaper drafting (0.3 t(1) a level) makes a tree pay: depth 3, every node with three children,
  // 1 + 0.9 + 0.81 = 2.71 tokens for 1.9 t(1).
  SizeDepthChoice cheap = ChooseSizeAndDepth(table, curve, 0.3);
  EXPECT_EQ(cheap.depth, 3);
  EXPECT_EQ(cheap.size, 13);
  EXPECT_NEAR(cheap.tokens_per_second, 2.71 / 1.9, 1e-9);
  EXPECT_THROW(ChooseSizeAndDepth(SequoiaTable::Build(std::vector<double>{0.5}, 8), curve, 0.1),
               Error);
  EXPECT_THROW(ChooseSizeAndDepth(table, curve, -1.0), Error);
}

}  // namespace
}  // namespace grove
