// OPT-Tree: the paper's worked example (E(A) = 3.07), optimality against brute force over every
// ancestor-closed node set of a complete draft tree (Theorem 3.1 plus the beam argument), the δ
// stop and depth cap, tie-breaking that keeps the tree ancestor-closed, and validation of the
// drafter.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "base/error.h"
#include "speculate/opt_tree.h"

namespace grove {
namespace {

using Path = std::vector<int32_t>;

std::vector<int32_t> PathTokens(const TokenTree& tree, int32_t node) {
  std::vector<int32_t> tokens;
  if (node < 0) return tokens;
  for (int32_t v : tree.Path(node)) tokens.push_back(tree.node(v).token);
  return tokens;
}

// A drafter given as a table from token path to children; paths not listed have none.
DraftExpandFn TableDrafter(std::map<Path, std::vector<DraftCandidate>> table) {
  return [table = std::move(table)](const TokenTree& drafted, std::span<const int32_t> frontier,
                                    int32_t k, std::span<std::vector<DraftCandidate>> out) {
    for (size_t i = 0; i < frontier.size(); ++i) {
      auto it = table.find(PathTokens(drafted, frontier[i]));
      if (it == table.end()) continue;
      out[i] = it->second;
      if (out[i].size() > static_cast<size_t>(k)) out[i].resize(static_cast<size_t>(k));
    }
  };
}

// OPT-Tree Figure 4 (digest 003 §4.8): a = 1, b = 2; a -> 3 (0.8), 4 (0.1); a.3 -> 5 (0.5),
// 6 (0.2); b -> 7 (0.6), 8 (0.2); b.7 -> 9 (0.5).
DraftExpandFn Figure4Drafter() {
  return TableDrafter({
      {{}, {{1, 0.5f}, {2, 0.4f}}},
      {{1}, {{3, 0.8f}, {4, 0.1f}}},
      {{1, 3}, {{5, 0.5f}, {6, 0.2f}}},
      {{2}, {{7, 0.6f}, {8, 0.2f}}},
      {{2, 7}, {{9, 0.5f}}},
  });
}

std::vector<int32_t> Tokens(const TokenTree& tree) {
  std::vector<int32_t> tokens;
  for (const TreeNode& n : tree.nodes()) tokens.push_back(n.token);
  return tokens;
}

TEST(OptTree, ReproducesTheFigure4Example) {
  std::vector<std::vector<int32_t>> frontiers;
  std::vector<int32_t> drafted_sizes;
  DraftExpandFn inner = Figure4Drafter();
  DraftExpandFn spy = [&](const TokenTree& drafted, std::span<const int32_t> frontier, int32_t k,
                          std::span<std::vector<DraftCandidate>> out) {
    EXPECT_EQ(k, 9);
    frontiers.emplace_back(frontier.begin(), frontier.end());
    drafted_sizes.push_back(drafted.size());
    inner(drafted, frontier, k, out);
  };
  OptTreeResult r = BuildOptTree({.n_nodes = 9, .delta = 0.0}, spy);
  EXPECT_NEAR(r.expected_length, 3.07, 1e-6);
  EXPECT_NEAR(r.tree.ExpectedLength(), 3.07, 1e-6);
  ASSERT_EQ(r.tree.size(), 9);
  EXPECT_EQ(r.tree.depth(), 3);
  EXPECT_EQ(Tokens(r.tree), (std::vector<int32_t>{1, 2, 3, 4, 7, 8, 5, 6, 9}));
  EXPECT_EQ(r.tree.node(8).parent, 4);  // token 9 under token 7
  // Layers: E_sub = 0.9, 1.67, 2.07; the fourth expand finds nothing and ends drafting.
  ASSERT_EQ(r.e_sub.size(), 3u);
  EXPECT_NEAR(r.e_sub[0], 0.9, 1e-6);
  EXPECT_NEAR(r.e_sub[1], 1.67, 1e-6);
  EXPECT_NEAR(r.e_sub[2], 2.07, 1e-6);
  EXPECT_EQ(r.draft_steps, 4);
  ASSERT_EQ(frontiers.size(), 4u);
  EXPECT_EQ(frontiers[0], (std::vector<int32_t>{-1}));
  EXPECT_EQ(frontiers[1], (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(frontiers[2], (std::vector<int32_t>{2, 3, 4, 5}));
  EXPECT_EQ(drafted_sizes, (std::vector<int32_t>{0, 2, 6, 9}));
}

TEST(OptTree, SmallBudgetKeepsTheLargestPathProbabilities) {
  // n = 4 on the same drafter: p̂ = 0.5 (a), 0.4 (b), 0.4 (a.3), 0.24 (b.7) -> E = 2.54.
  OptTreeResult r = BuildOptTree({.n_nodes = 4, .delta = 0.0}, Figure4Drafter());
  EXPECT_EQ(Tokens(r.tree), (std::vector<int32_t>{1, 2, 3, 7}));
  EXPECT_NEAR(r.expected_length, 2.54, 1e-6);
  EXPECT_NEAR(r.tree.ExpectedLength(), 2.54, 1e-6);
}

// ---- Brute force over a complete draft tree. ----

uint64_t Mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Every path has kVocab children with pseudo-random probabilities summing to `mass` (< 1: the
// rest sits on tokens outside the top-k the drafter reports).
constexpr int kVocab = 3;
std::vector<DraftCandidate> HashedChildren(const Path& path, uint64_t seed) {
  uint64_t h = Mix(seed);
  for (int32_t t : path) h = Mix(h ^ static_cast<uint64_t>(t));
  const double mass = 0.6 + 0.4 * static_cast<double>(Mix(h) % 1000) / 1000.0;
  std::vector<double> w(kVocab);
  double sum = 0;
  for (int t = 0; t < kVocab; ++t) sum += w[t] = 1.0 + static_cast<double>(Mix(h + t + 1) % 1000);
  std::vector<DraftCandidate> out;
  for (int t = 0; t < kVocab; ++t) out.push_back({t, static_cast<float>(mass * w[t] / sum)});
  return out;
}

DraftExpandFn HashedDrafter(uint64_t seed) {
  return [seed](const TokenTree& drafted, std::span<const int32_t> frontier, int32_t k,
                std::span<std::vector<DraftCandidate>> out) {
    for (size_t i = 0; i < frontier.size(); ++i) {
      out[i] = HashedChildren(PathTokens(drafted, frontier[i]), seed);
      std::sort(out[i].begin(), out[i].end(),
                [](const auto& a, const auto& b) { return a.prob > b.prob; });
      if (out[i].size() > static_cast<size_t>(k)) out[i].resize(static_cast<size_t>(k));
    }
  };
}

// The best sum of p̂ over ancestor-closed sets of at most n nodes of depth <= max_depth, by
// enumerating every such set once (each set grows by picking from a candidate list in order).
struct Cand {
  Path path;
  double path_prob;
};
double BestSum(std::vector<Cand> cands, int n, int max_depth, uint64_t seed) {
  double best = 0;
  for (size_t i = 0; i < cands.size(); ++i) {
    if (n == 0) break;
    std::vector<Cand> next(cands.begin() + static_cast<std::ptrdiff_t>(i) + 1, cands.end());
    if (static_cast<int>(cands[i].path.size()) < max_depth) {
      for (const DraftCandidate& c : HashedChildren(cands[i].path, seed)) {
        Path p = cands[i].path;
        p.push_back(c.token);
        next.push_back({p, cands[i].path_prob * c.prob});
      }
    }
    best = std::max(best, cands[i].path_prob + BestSum(next, n - 1, max_depth, seed));
  }
  return best;
}

double BruteForceExpectedLength(int n, int max_depth, uint64_t seed) {
  std::vector<Cand> roots;
  for (const DraftCandidate& c : HashedChildren({}, seed)) roots.push_back({{c.token}, c.prob});
  return 1.0 + BestSum(roots, n, max_depth, seed);
}

TEST(OptTree, IsOptimalAgainstBruteForceAtTheDraftedDepth) {
  for (uint64_t seed : {1u, 2u, 3u, 4u}) {
    for (int n = 1; n <= 6; ++n) {
      for (int depth = 1; depth <= 4; ++depth) {
        // δ < 0: drafting stops only at the depth cap, so the tree is the optimum of that depth.
        OptTreeResult r =
            BuildOptTree({.n_nodes = n, .delta = -1.0, .max_depth = depth}, HashedDrafter(seed));
        const double want = BruteForceExpectedLength(n, depth, seed);
        EXPECT_NEAR(r.expected_length, want, 1e-6)
            << "seed " << seed << " n " << n << " d " << depth;
        EXPECT_NEAR(r.tree.ExpectedLength(), r.expected_length, 1e-6);
        int available = 0;  // nodes of the complete 3-ary tree down to `depth`
        for (int j = 1, w = kVocab; j <= depth; ++j, w *= kVocab) available += w;
        EXPECT_EQ(r.tree.size(), std::min(n, available));
        EXPECT_LE(r.tree.depth(), depth);
        EXPECT_EQ(r.draft_steps, depth);
        // Theorem 3.2 and digest §4.3: E_sub never decreases and one layer adds at most 1.
        double prev = 0;
        for (double e : r.e_sub) {
          EXPECT_GE(e, prev - 1e-12);
          EXPECT_LE(e - prev, 1.0 + 1e-12);
          prev = e;
        }
      }
    }
  }
}

TEST(OptTree, PaperDepthCapWithZeroDeltaIsTheGlobalOptimum) {
  // δ = 0 stops once a layer adds nothing; deeper layers cannot add either (p̂ only shrinks along a
  // path), so with the paper's cap (depth <= n) the result is the optimum over all n-node trees.
  for (uint64_t seed : {5u, 6u}) {
    for (int n = 1; n <= 5; ++n) {
      OptTreeResult r = BuildOptTree({.n_nodes = n, .delta = 0.0}, HashedDrafter(seed));
      EXPECT_NEAR(r.expected_length, BruteForceExpectedLength(n, n, seed), 1e-6) << n;
    }
  }
}

// Every node has children 0.6, 0.3, 0.1: with n = 3, E_sub = 1.0 after layer 1 and 1.26 after
// layer 2 (0.6 + 0.36 + 0.3); layer 3 changes nothing.
DraftExpandFn ConstantDrafter() {
  return [](const TokenTree&, std::span<const int32_t> frontier, int32_t k,
            std::span<std::vector<DraftCandidate>> out) {
    for (auto& o : out) o = {{0, 0.6f}, {1, 0.3f}, {2, 0.1f}};
  };
}

TEST(OptTree, DeltaDecidesHowManyLayersAreDrafted) {
  // A layer never adds more than its probability mass (<= 1), so δ >= 1 gives depth 1. (The
  // constant drafter's 0.6f + 0.3f + 0.1f is 1 + 1.5e-8 in float, hence the Figure 4 drafter here.)
  OptTreeResult stop_at_once = BuildOptTree({.n_nodes = 3, .delta = 1.0}, Figure4Drafter());
  EXPECT_EQ(stop_at_once.draft_steps, 1);
  EXPECT_EQ(stop_at_once.tree.depth(), 1);
  EXPECT_NEAR(stop_at_once.expected_length, 1.9, 1e-6);

  OptTreeResult two = BuildOptTree({.n_nodes = 3, .delta = 0.3}, ConstantDrafter());
  EXPECT_EQ(two.draft_steps, 2);  // gain 0.26 <= 0.3
  EXPECT_NEAR(two.expected_length, 2.26, 1e-6);
  EXPECT_EQ(Tokens(two.tree), (std::vector<int32_t>{0, 1, 0}));
  EXPECT_EQ(two.tree.node(2).parent, 0);

  OptTreeResult three = BuildOptTree({.n_nodes = 3, .delta = 0.2}, ConstantDrafter());
  EXPECT_EQ(three.draft_steps, 3);  // gain 0.26 > 0.2, then 0
  ASSERT_EQ(three.e_sub.size(), 3u);
  EXPECT_NEAR(three.e_sub[1], 1.26, 1e-6);
  EXPECT_NEAR(three.e_sub[2], 1.26, 1e-6);
  EXPECT_NEAR(three.expected_length, 2.26, 1e-6);

  OptTreeResult capped =
      BuildOptTree({.n_nodes = 3, .delta = -1.0, .max_depth = 2}, ConstantDrafter());
  EXPECT_EQ(capped.draft_steps, 2);
  // The paper's own cap: a chain drafter with prob 1 stops at depth n.
  OptTreeResult chain = BuildOptTree({.n_nodes = 4, .delta = 0.0},
                                     [](const TokenTree&, std::span<const int32_t>, int32_t,
                                        std::span<std::vector<DraftCandidate>> out) {
                                       for (auto& o : out) o = {{7, 1.0f}};
                                     });
  EXPECT_EQ(chain.draft_steps, 4);
  EXPECT_EQ(chain.tree.depth(), 4);
  EXPECT_NEAR(chain.expected_length, 5.0, 1e-6);
}

TEST(OptTree, TiesKeepTheTreeAncestorClosed) {
  // p̂: x = 0.5, y = 0.5, x.z = 0.5 (prob 1). With n = 2 the three tie; keeping z without x would
  // not be a tree. Ties go to the node drafted first, so the tree is {x, y}.
  OptTreeResult r = BuildOptTree({.n_nodes = 2, .delta = -1.0, .max_depth = 2},
                                 TableDrafter({{{}, {{1, 0.5f}, {2, 0.5f}}}, {{1}, {{3, 1.0f}}}}));
  EXPECT_EQ(Tokens(r.tree), (std::vector<int32_t>{1, 2}));
  EXPECT_NEAR(r.expected_length, 2.0, 1e-6);
}

TEST(OptTree, DropsZeroProbabilitiesAndStopsWhenSupportRunsOut) {
  OptTreeResult r = BuildOptTree({.n_nodes = 5, .delta = 0.0},
                                 TableDrafter({{{}, {{1, 0.7f}, {2, 0.0f}}}, {{1}, {{3, 0.5f}}}}));
  EXPECT_EQ(Tokens(r.tree), (std::vector<int32_t>{1, 3}));
  EXPECT_NEAR(r.expected_length, 1.0 + 0.7 + 0.35, 1e-6);
  OptTreeResult empty = BuildOptTree({.n_nodes = 5, .delta = 0.0}, TableDrafter({}));
  EXPECT_TRUE(empty.tree.empty());
  EXPECT_DOUBLE_EQ(empty.expected_length, 1.0);
  EXPECT_EQ(empty.draft_steps, 1);
}

TEST(OptTree, RejectsBadParamsAndBadDrafters) {
  EXPECT_THROW(BuildOptTree({.n_nodes = 0}, ConstantDrafter()), Error);
  EXPECT_THROW(BuildOptTree({.delta = NAN}, ConstantDrafter()), Error);
  EXPECT_THROW(BuildOptTree({.max_depth = -1}, ConstantDrafter()), Error);
  auto expect_error = [](DraftExpandFn fn, const std::string& needle) {
    try {
      BuildOptTree({.n_nodes = 2, .delta = 0.0}, fn);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error(TableDrafter({{{}, {{1, 1.5f}}}}), "outside [0, 1]");
  expect_error(TableDrafter({{{}, {{1, 0.3f}, {1, 0.2f}}}}), "drafted twice");
  expect_error(
      [](const TokenTree&, std::span<const int32_t>, int32_t,
         std::span<std::vector<DraftCandidate>> out) {
        out[0] = {{1, 0.3f}, {2, 0.2f}, {3, 0.1f}};  // three for k = 2
      },
      "more than the 2");
}

}  // namespace
}  // namespace grove
