// Verification rules: each must emit tokens with exactly the target's distribution when the tree
// was drawn the way the rule assumes. Checked statistically (Pearson chi-square at a fixed seed,
// alpha = 0.001) on small synthetic Markov models, where the target joint is enumerable; the
// check's power is itself tested on rules known to be biased. Plus the Sequoia paper's
// counter-examples (App. F.3), greedy path following, and CheckLossless's refusals.
#include "speculate/verify.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "base/error.h"
#include "sample/sampler.h"

namespace grove {
namespace {

using Row = std::vector<float>;

Row Normalized(Row row) {
  const float total = std::accumulate(row.begin(), row.end(), 0.0f);
  for (float& v : row) v /= total;
  return row;
}

// 0.999 quantile of chi-square with df degrees of freedom (Wilson-Hilferty; within ~1% for df >= 2,
// and conservative enough for df = 1 at this alpha).
double ChiSquareCritical(int df) {
  const double z = 3.0902;  // standard normal 0.999 quantile
  const double a = 2.0 / (9.0 * df);
  return df * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
}

struct Fit {
  double statistic = 0.0;
  int df = 0;
  int64_t impossible = 0;  // observations in cells of probability 0
  double critical() const { return ChiSquareCritical(df); }
};

Fit ChiSquare(const std::vector<int64_t>& counts, const std::vector<double>& probs) {
  const int64_t n = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  Fit fit;
  int cells = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (probs[i] <= 0.0) {
      fit.impossible += counts[i];
      continue;
    }
    const double expected = probs[i] * static_cast<double>(n);
    fit.statistic += (counts[i] - expected) * (counts[i] - expected) / expected;
    ++cells;
  }
  fit.df = cells - 1;
  return fit;
}

// A Markov target and draft over a small vocabulary. First order: the distribution after token t is
// p[t] (resp. q[t]), so every tree node gets the row of its own token. Second order: the row after
// (s, t) is p[s * n_vocab + t], so two nodes holding the same token under different parents get
// different rows, and a rule that reads a sibling's, cousin's or parent's row is seen.
struct MarkovPair {
  int32_t n_vocab = 0;
  int order = 1;
  std::vector<Row> p, q;
  int32_t root = 0;         // the token before the first emitted one
  int32_t before_root = 0;  // and the one before it (second order)
  std::size_t Index(int32_t before, int32_t token) const {
    return order == 2 ? static_cast<std::size_t>(before) * n_vocab + token : token;
  }
};

// Builds a tree whose depth-d nodes each get shape[d - 1] children drawn from the draft row of
// their token, exactly as a builder would (DrawChildren at the children's position), and the target
// and draft rows in verify's layout.
struct DrawnTree {
  TokenTree tree;
  std::vector<float> target, draft;  // (tree.size() + 1, n_vocab)
};

void DrawTree(const MarkovPair& m, const std::vector<int32_t>& shape, ChildDraw draw,
              const CounterRng& rng, uint64_t seq, int64_t root_position, int32_t root_token,
              DrawnTree& out, int32_t before_root_token = 0) {
  out.tree = TokenTree();
  const std::size_t root_row = m.Index(before_root_token, root_token);
  out.target.assign(m.p[root_row].begin(), m.p[root_row].end());
  out.draft.assign(m.q[root_row].begin(), m.q[root_row].end());
  std::vector<int32_t> tokens;
  std::vector<int32_t> level = {-1};
  std::vector<std::size_t> level_rows = {root_row};  // each level node's row in m.p / m.q
  for (size_t d = 0; d < shape.size(); ++d) {
    std::vector<int32_t> next_level;
    std::vector<std::size_t> next_rows;
    for (std::size_t i = 0; i < level.size(); ++i) {
      const int32_t parent = level[i];
      const int32_t parent_token = parent < 0 ? root_token : out.tree.node(parent).token;
      DrawChildren(m.q[level_rows[i]], shape[d], draw, rng, seq,
                   root_position + static_cast<int64_t>(d) + 1, tokens);
      for (int32_t t : tokens) {
        const std::size_t row = m.Index(parent_token, t);
        next_level.push_back(out.tree.AddChild(parent, t, 0.0f));
        next_rows.push_back(row);
        out.target.insert(out.target.end(), m.p[row].begin(), m.p[row].end());
        out.draft.insert(out.draft.end(), m.q[row].begin(), m.q[row].end());
      }
    }
    level = std::move(next_level);
    level_rows = std::move(next_rows);
  }
}

ProbRows Rows(const std::vector<float>& data, int32_t n_vocab) {
  return {data.data(), n_vocab, static_cast<int32_t>(data.size() / n_vocab)};
}

// One verification step as the decoding loop runs it; returns the emitted tokens.
using StepFn = std::function<void(const DrawnTree&, uint64_t seq, int64_t root_position,
                                  std::vector<int32_t>&)>;

StepFn RuleStep(VerifyRule rule, const MarkovPair& m, const CounterRng& rng) {
  auto verifier = std::make_shared<Verifier>();
  auto result = std::make_shared<VerifyResult>();
  return
      [=, &m, &rng](const DrawnTree& t, uint64_t seq, int64_t pos, std::vector<int32_t>& emitted) {
        verifier->Verify(rule, t.tree, Rows(t.target, m.n_vocab), Rows(t.draft, m.n_vocab), rng,
                         seq, pos, *result);
        for (int32_t v : result->accepted) emitted.push_back(t.tree.node(v).token);
        emitted.push_back(result->next_token);
      };
}

// Decodes until n_tokens are emitted (several steps when a step emits fewer), `trials` times with
// distinct sequence ids, and counts the first n_tokens as one index in [0, n_vocab^n_tokens).
std::vector<int64_t> EmittedCounts(const MarkovPair& m, const std::vector<int32_t>& shape,
                                   ChildDraw draw, const CounterRng& rng, const StepFn& step,
                                   int n_tokens, int trials) {
  int64_t cells = 1;
  for (int i = 0; i < n_tokens; ++i) cells *= m.n_vocab;
  std::vector<int64_t> counts(static_cast<size_t>(cells), 0);
  DrawnTree tree;
  std::vector<int32_t> emitted;
  for (int trial = 0; trial < trials; ++trial) {
    const uint64_t seq = static_cast<uint64_t>(trial);
    emitted.clear();
    int64_t position = 100;  // the root's position
    while (static_cast<int>(emitted.size()) < n_tokens) {
      const size_t before = emitted.size();
      const int32_t root = before == 0 ? m.root : emitted[before - 1];
      const int32_t before_root = before == 0   ? m.before_root
                                  : before == 1 ? m.root
                                                : emitted[before - 2];
      DrawTree(m, shape, draw, rng, seq, position, root, tree, before_root);
      step(tree, seq, position, emitted);
      position += static_cast<int64_t>(emitted.size() - before);
    }
    int64_t index = 0;
    for (int i = 0; i < n_tokens; ++i) index = index * m.n_vocab + emitted[static_cast<size_t>(i)];
    ++counts[static_cast<size_t>(index)];
  }
  return counts;
}

// The target joint of the first n_tokens (1 or 2) after m.root.
std::vector<double> TargetJoint(const MarkovPair& m, int n_tokens) {
  std::vector<double> probs;
  const Row& first = m.p[m.Index(m.before_root, m.root)];
  if (n_tokens == 1) {
    for (float v : first) probs.push_back(v);
    return probs;
  }
  for (int32_t x = 0; x < m.n_vocab; ++x) {
    for (int32_t y = 0; y < m.n_vocab; ++y)
      probs.push_back(double{first[x]} * m.p[m.Index(m.root, x)][y]);
  }
  return probs;
}

constexpr int kTrials = 20000;

// Six tokens; the draft is deliberately far from the target (it prefers the target's unlikely
// tokens) so that rejections, residuals and the later children are exercised heavily.
MarkovPair SixTokenPair(Row root_p, Row root_q) {
  MarkovPair m;
  m.n_vocab = 6;
  for (int32_t t = 0; t < 6; ++t) {
    Row p(6), q(6);
    for (int32_t x = 0; x < 6; ++x) {
      p[x] = 1.0f + static_cast<float>((x * 7 + t * 3) % 6);
      q[x] = 1.0f + static_cast<float>((x * 5 + t) % 6) * static_cast<float>((x * 5 + t) % 6);
    }
    m.p.push_back(Normalized(p));
    m.q.push_back(Normalized(q));
  }
  m.p[0] = Normalized(std::move(root_p));
  m.q[0] = Normalized(std::move(root_q));
  return m;
}

// The same, second order: the row after (s, t) also depends on s, and the draft again prefers the
// target's unlikely tokens. (0, 0) is the root's row.
MarkovPair SixTokenSecondOrderPair(Row root_p, Row root_q) {
  MarkovPair m;
  m.n_vocab = 6;
  m.order = 2;
  for (int32_t s = 0; s < 6; ++s) {
    for (int32_t t = 0; t < 6; ++t) {
      Row p(6), q(6);
      for (int32_t x = 0; x < 6; ++x) {
        p[x] = 1.0f + static_cast<float>((x * 7 + t * 3 + s * 5) % 6);
        const auto r = static_cast<float>((x * 5 + t + s * 2) % 6);
        q[x] = 1.0f + r * r;
      }
      m.p.push_back(Normalized(p));
      m.q.push_back(Normalized(q));
    }
  }
  m.p[0] = Normalized(std::move(root_p));
  m.q[0] = Normalized(std::move(root_q));
  return m;
}

const Row kP = {0.30f, 0.25f, 0.20f, 0.12f, 0.08f, 0.05f};
const Row kQ = {0.05f, 0.10f, 0.15f, 0.20f, 0.25f, 0.25f};

struct FitCase {
  std::string name;
  VerifyRule rule;
  ChildDraw draw;
  std::vector<int32_t> shape;
  Row p, q;
};

void ExpectFits(const FitCase& c, int n_tokens, uint64_t seed, int order = 1) {
  const MarkovPair m = order == 2 ? SixTokenSecondOrderPair(c.p, c.q) : SixTokenPair(c.p, c.q);
  const CounterRng rng(seed);
  CheckLossless(
      c.rule, c.draw,
      [&] {
        DrawnTree t;
        DrawTree(m, c.shape, c.draw, rng, 0, 0, m.root, t);
        return t.tree;
      }(),
      /*greedy_sampling=*/false);
  const auto counts =
      EmittedCounts(m, c.shape, c.draw, rng, RuleStep(c.rule, m, rng), n_tokens, kTrials);
  const Fit fit = ChiSquare(counts, TargetJoint(m, n_tokens));
  EXPECT_EQ(fit.impossible, 0) << c.name << ": emitted a token the target gives probability 0";
  EXPECT_LT(fit.statistic, fit.critical())
      << c.name << ": chi-square " << fit.statistic << " on " << fit.df << " df (critical "
      << fit.critical() << " at alpha 0.001)";
}

TEST(VerifyFit, FirstTokenMatchesTargetForEveryRule) {
  const std::vector<FitCase> cases = {
      {"chain", VerifyRule::kChain, ChildDraw::kWithReplacement, {1}, kP, kQ},
      {"specinfer k=3", VerifyRule::kSpecInfer, ChildDraw::kWithReplacement, {3}, kP, kQ},
      {"sequoia k=3", VerifyRule::kSequoia, ChildDraw::kWithoutReplacement, {3}, kP, kQ},
      {"target-sample top-3", VerifyRule::kTargetSample, ChildDraw::kDeterministic, {3}, kP, kQ},
      {"target-sample iid-3", VerifyRule::kTargetSample, ChildDraw::kWithReplacement, {3}, kP, kQ},
      // supp(q) = {3, 4} and 5 children: the uniform fallback draws the last three.
      {"sequoia fallback",
       VerifyRule::kSequoia,
       ChildDraw::kWithoutReplacement,
       {5},
       kP,
       {0, 0, 0, 1, 1, 0}},
      {"sequoia k=|V|", VerifyRule::kSequoia, ChildDraw::kWithoutReplacement, {6}, kP, kQ},
      // Target zeros where the draft has mass and vice versa.
      {"specinfer disjoint-ish",
       VerifyRule::kSpecInfer,
       ChildDraw::kWithReplacement,
       {4},
       {0.5f, 0.3f, 0.2f, 0, 0, 0},
       {0, 0, 0.2f, 0.3f, 0.5f, 0}},
      {"sequoia disjoint-ish",
       VerifyRule::kSequoia,
       ChildDraw::kWithoutReplacement,
       {4},
       {0.5f, 0.3f, 0.2f, 0, 0, 0},
       {0, 0, 0.2f, 0.3f, 0.5f, 0}},
      {"sequoia p == q", VerifyRule::kSequoia, ChildDraw::kWithoutReplacement, {3}, kP, kP},
  };
  uint64_t seed = 11;
  for (const FitCase& c : cases) ExpectFits(c, 1, seed++);
}

TEST(VerifyFit, TwoTokenJointMatchesTargetOnDepthTwoTrees) {
  const std::vector<FitCase> cases = {
      {"chain 2", VerifyRule::kChain, ChildDraw::kWithReplacement, {1, 1}, kP, kQ},
      {"specinfer 3x2", VerifyRule::kSpecInfer, ChildDraw::kWithReplacement, {3, 2}, kP, kQ},
      {"sequoia 3x2", VerifyRule::kSequoia, ChildDraw::kWithoutReplacement, {3, 2}, kP, kQ},
      {"target-sample top 2x2",
       VerifyRule::kTargetSample,
       ChildDraw::kDeterministic,
       {2, 2},
       kP,
       kQ},
  };
  uint64_t seed = 101;
  for (const FitCase& c : cases) ExpectFits(c, 2, seed++);
  // Rows that depend on the parent's token too: a node's row is its own, not one of another node
  // holding the same token.
  for (const FitCase& c : cases) ExpectFits(c, 2, seed++, /*order=*/2);
}

TEST(VerifyFit, OneHotTargetEmitsOnlyItsToken) {
  // P one-hot (temperature 0 rows) under sampling rules: the output must be that token every time.
  for (VerifyRule rule :
       {VerifyRule::kSpecInfer, VerifyRule::kSequoia, VerifyRule::kTargetSample}) {
    const MarkovPair m = SixTokenPair({0, 0, 1, 0, 0, 0}, kQ);
    const CounterRng rng(5);
    const ChildDraw draw =
        rule == VerifyRule::kSequoia ? ChildDraw::kWithoutReplacement : ChildDraw::kWithReplacement;
    const auto counts = EmittedCounts(m, {3}, draw, rng, RuleStep(rule, m, rng), 1, 2000);
    EXPECT_EQ(counts[2], 2000) << VerifyRuleName(rule);
  }
}

// The fit check has power: rules known to be biased fail it at the same trial count.
TEST(VerifyFit, CheckDetectsBiasedRules) {
  const MarkovPair m = SixTokenPair(kP, kQ);
  const CounterRng rng(77);
  // SpecInfer without the residual: accept with min(1, p/q), on rejection try the next child
  // against the unchanged p, finally sample p. Tokens the draft likes are over-emitted.
  const StepFn no_residual = [&](const DrawnTree& t, uint64_t seq, int64_t pos,
                                 std::vector<int32_t>& emitted) {
    const auto children = t.tree.children(-1);
    const auto p = Rows(t.target, m.n_vocab).Row(0);
    const auto q = Rows(t.draft, m.n_vocab).Row(0);
    for (size_t i = 0; i < children.size(); ++i) {
      const int32_t s = t.tree.node(children[i]).token;
      if (rng.Uniform(seq, pos + 1, 1 + static_cast<uint32_t>(i)) * q[s] < p[s]) {
        emitted.push_back(s);
        return;
      }
    }
    emitted.push_back(Sampler::DrawFrom(p, rng.Uniform(seq, pos + 1, 0)));
  };
  const auto biased =
      EmittedCounts(m, {3}, ChildDraw::kWithReplacement, rng, no_residual, 1, kTrials);
  const Fit fit = ChiSquare(biased, TargetJoint(m, 1));
  EXPECT_GT(fit.statistic, fit.critical()) << "no-residual rule passed: the check has no power";

  // The mismatches CheckLossless refuses are biased too: sequoia on i.i.d. children, specinfer on
  // children drawn without replacement.
  const auto sequoia_iid = EmittedCounts(m, {3}, ChildDraw::kWithReplacement, rng,
                                         RuleStep(VerifyRule::kSequoia, m, rng), 1, kTrials);
  const Fit fit_sequoia = ChiSquare(sequoia_iid, TargetJoint(m, 1));
  EXPECT_GT(fit_sequoia.statistic, fit_sequoia.critical())
      << "sequoia on i.i.d. children looked lossless";
  const auto specinfer_wor = EmittedCounts(m, {3}, ChildDraw::kWithoutReplacement, rng,
                                           RuleStep(VerifyRule::kSpecInfer, m, rng), 1, kTrials);
  const Fit fit_specinfer = ChiSquare(specinfer_wor, TargetJoint(m, 1));
  EXPECT_GT(fit_specinfer.statistic, fit_specinfer.critical())
      << "specinfer without replacement looked lossless";
}

// --- Acceptance: the Sequoia paper's robustness properties and counter-examples (App. F.3) -------

// A pair whose every row is p (target) and q (draft): one node's verification in isolation.
MarkovPair StarPair(const Row& p, const Row& q) {
  MarkovPair m;
  m.n_vocab = static_cast<int32_t>(p.size());
  m.p.assign(p.size(), p);
  m.q.assign(q.size(), q);
  return m;
}

// Fraction of `trials` star trees (k children of the root, drawn as `draw`) in which a child is
// accepted.
double AcceptRate(VerifyRule rule, ChildDraw draw, const Row& p, const Row& q, int32_t k,
                  int trials, uint64_t seed) {
  const MarkovPair m = StarPair(p, q);
  const CounterRng rng(seed);
  Verifier verifier;
  VerifyResult result;
  DrawnTree t;
  int accepted = 0;
  for (int trial = 0; trial < trials; ++trial) {
    DrawTree(m, {k}, draw, rng, static_cast<uint64_t>(trial), 40, 0, t);
    verifier.Verify(rule, t.tree, Rows(t.target, m.n_vocab), Rows(t.draft, m.n_vocab), rng,
                    static_cast<uint64_t>(trial), 40, result);
    accepted += result.accepted.empty() ? 0 : 1;
  }
  return static_cast<double>(accepted) / trials;
}

// Binomial standard error at 20000 trials is at most 0.0036; 0.015 is over four of them.
constexpr double kRateTolerance = 0.015;

TEST(VerifyAcceptance, CoverCounterExampleSpecInferRedrawsTheBadToken) {
  // P = [1, 0], Q = [.5, .5], k = 2: SpecInfer rejects when both i.i.d. children are token 1
  // (probability 1/4), so it accepts 0.75; Sequoia never redraws token 1 and always accepts.
  const Row p = {1.0f, 0.0f}, q = {0.5f, 0.5f};
  EXPECT_NEAR(AcceptRate(VerifyRule::kSpecInfer, ChildDraw::kWithReplacement, p, q, 2, kTrials, 1),
              0.75, kRateTolerance);
  EXPECT_EQ(AcceptRate(VerifyRule::kSequoia, ChildDraw::kWithoutReplacement, p, q, 2, kTrials, 2),
            1.0);
}

TEST(VerifyAcceptance, TopKCounterExampleTargetSampleMissesOptimalTransport) {
  // P = Q = [.6, .4], k = 1: the top-1 child (token 0) matches a target sample with probability
  // 0.6, while a sampled child under Sequoia / SpecInfer / chain is accepted with
  // 1 - |P - Q| / 2 = 1.
  const Row pq = {0.6f, 0.4f};
  EXPECT_NEAR(
      AcceptRate(VerifyRule::kTargetSample, ChildDraw::kDeterministic, pq, pq, 1, kTrials, 3), 0.6,
      kRateTolerance);
  for (VerifyRule rule : {VerifyRule::kChain, VerifyRule::kSpecInfer, VerifyRule::kSequoia}) {
    EXPECT_EQ(AcceptRate(rule, ChildDraw::kWithoutReplacement, pq, pq, 1, kTrials, 4), 1.0)
        << VerifyRuleName(rule);
  }
}

TEST(VerifyAcceptance, OneChildAcceptsWithTheOverlapOfTargetAndDraft) {
  // Optimal transport property: with one child the acceptance rate is sum_x min(P(x), Q(x)).
  double overlap = 0.0;
  for (size_t x = 0; x < kP.size(); ++x) overlap += std::min(kP[x], kQ[x]);
  for (VerifyRule rule : {VerifyRule::kChain, VerifyRule::kSpecInfer, VerifyRule::kSequoia}) {
    EXPECT_NEAR(AcceptRate(rule, ChildDraw::kWithReplacement, kP, kQ, 1, kTrials, 5), overlap,
                kRateTolerance)
        << VerifyRuleName(rule);
  }
}

TEST(VerifyAcceptance, SequoiaCoversTheVocabularyThroughTheUniformFallback) {
  // Cover property: |V| children drawn without replacement are the whole vocabulary, so some child
  // is always accepted -- also when the draft's support is two tokens and the other four children
  // come from the uniform fallback.
  EXPECT_EQ(AcceptRate(VerifyRule::kSequoia, ChildDraw::kWithoutReplacement, kP,
                       {0, 0, 0, 0.5f, 0.5f, 0}, 6, 5000, 6),
            1.0);
  // And when supp(Q) (size k) contains supp(P), k children suffice.
  EXPECT_EQ(AcceptRate(VerifyRule::kSequoia, ChildDraw::kWithoutReplacement, {0.7f, 0.3f, 0, 0},
                       {0.1f, 0.2f, 0.7f, 0}, 3, 5000, 7),
            1.0);
  // SpecInfer's i.i.d. children do not cover: the same setting rejects sometimes.
  EXPECT_LT(AcceptRate(VerifyRule::kSpecInfer, ChildDraw::kWithReplacement, {0.7f, 0.3f, 0, 0},
                       {0.1f, 0.2f, 0.7f, 0}, 3, 5000, 8),
            0.9);
}

// --- Greedy -------------------------------------------------------------------------------------

// One-hot rows at the given argmax tokens, one per row.
std::vector<float> OneHotRows(const std::vector<int32_t>& argmax, int32_t n_vocab) {
  std::vector<float> rows(argmax.size() * static_cast<size_t>(n_vocab), 0.0f);
  for (size_t i = 0; i < argmax.size(); ++i) rows[i * n_vocab + argmax[i]] = 1.0f;
  return rows;
}

TEST(VerifyGreedy, FollowsTheArgmaxPathAndEmitsTheArgmaxAfterIt) {
  //   root -> #0 tok 3 -> #3 tok 1 -> #5 tok 2
  //        -> #1 tok 4 -> #4 tok 0
  //        -> #2 tok 5
  TokenTree tree;
  tree.AddChild(-1, 3, 1.0f);
  tree.AddChild(-1, 4, 1.0f);
  tree.AddChild(-1, 5, 1.0f);
  tree.AddChild(0, 1, 1.0f);
  tree.AddChild(1, 0, 1.0f);
  tree.AddChild(3, 2, 1.0f);
  const int32_t n_vocab = 6;
  // Argmax after: root 4 (-> #1), #0 -, #1 0 (-> #4), #2 -, #3 -, #4 5 (no such child: stop), #5 -.
  const std::vector<float> target = OneHotRows({4, 1, 0, 0, 2, 5, 3}, n_vocab);
  const ProbRows rows{target.data(), n_vocab, 7};
  const VerifyResult r = Verify(VerifyRule::kGreedy, tree, rows, {}, CounterRng(1), 0, 10);
  EXPECT_EQ(r.accepted, (std::vector<int32_t>{1, 4}));
  EXPECT_EQ(r.next_token, 5);

  // The deepest path: root argmax 3 -> #0, then 1 -> #3, then 2 -> #5 (a leaf), then its argmax.
  const std::vector<float> deep = OneHotRows({3, 1, 0, 0, 2, 5, 4}, n_vocab);
  const VerifyResult d =
      Verify(VerifyRule::kGreedy, tree, {deep.data(), n_vocab, 7}, {}, CounterRng(1), 0, 10);
  EXPECT_EQ(d.accepted, (std::vector<int32_t>{0, 3, 5}));
  EXPECT_EQ(d.next_token, 4);

  // No child matches the root's argmax: nothing accepted, the argmax is the next token.
  const std::vector<float> none = OneHotRows({2, 1, 0, 0, 2, 5, 4}, n_vocab);
  const VerifyResult n =
      Verify(VerifyRule::kGreedy, tree, {none.data(), n_vocab, 7}, {}, CounterRng(1), 0, 10);
  EXPECT_TRUE(n.accepted.empty());
  EXPECT_EQ(n.next_token, 2);
}

TEST(VerifyGreedy, ArgmaxOfSoftRowsPrefersTheLowestIdOnTies) {
  TokenTree tree;
  tree.AddChild(-1, 2, 1.0f);
  const std::vector<float> target = {0.1f, 0.4f, 0.4f, 0.1f, /*after #0*/ 0.3f, 0.3f, 0.3f, 0.1f};
  const VerifyResult r =
      Verify(VerifyRule::kGreedy, tree, {target.data(), 4, 2}, {}, CounterRng(1), 0, 0);
  EXPECT_TRUE(r.accepted.empty());  // argmax is token 1 (tied with 2, lower id wins), not child 2
  EXPECT_EQ(r.next_token, 1);
}

TEST(VerifyGreedy, SamplingRulesOnOneHotRowsAgreeWithGreedyForTopKTrees) {
  // At temperature 0 both target and draft rows are one-hot, and deterministic top-k children
  // include tokens of draft probability 0. Every rule must then reduce to exact argmax matching.
  const int32_t n_vocab = 5;
  MarkovPair m;
  m.n_vocab = n_vocab;
  for (int32_t t = 0; t < n_vocab; ++t) {
    Row p(n_vocab, 0.0f), q(n_vocab, 0.0f);
    p[(t * 2 + 1) % n_vocab] = 1.0f;
    q[(t * 3 + 1) % n_vocab] = 1.0f;  // a draft that agrees with the target only sometimes
    m.p.push_back(p);
    m.q.push_back(q);
  }
  const CounterRng rng(9);
  Verifier verifier;
  VerifyResult greedy, other;
  DrawnTree t;
  for (int32_t root = 0; root < n_vocab; ++root) {
    for (const std::vector<int32_t>& shape :
         {std::vector<int32_t>{3, 2, 2}, std::vector<int32_t>{1, 1, 1}}) {
      DrawTree(m, shape, ChildDraw::kDeterministic, rng, 0, 0, root, t);
      const ProbRows target = Rows(t.target, n_vocab), draft = Rows(t.draft, n_vocab);
      verifier.Verify(VerifyRule::kGreedy, t.tree, target, draft, rng, 0, 0, greedy);
      for (VerifyRule rule : {VerifyRule::kSpecInfer, VerifyRule::kSequoia,
                              VerifyRule::kTargetSample, VerifyRule::kChain}) {
        if (rule == VerifyRule::kChain && shape[0] != 1) continue;
        CheckLossless(rule, ChildDraw::kDeterministic, t.tree, /*greedy_sampling=*/true);
        for (uint64_t seq = 0; seq < 20; ++seq) {
          verifier.Verify(rule, t.tree, target, draft, rng, seq, 0, other);
          EXPECT_EQ(other.accepted, greedy.accepted) << VerifyRuleName(rule) << " root " << root;
          EXPECT_EQ(other.next_token, greedy.next_token)
              << VerifyRuleName(rule) << " root " << root;
        }
      }
    }
  }
}

// --- CheckLossless ------------------------------------------------------------------------------

TokenTree Star(int32_t k) {
  TokenTree tree;
  for (int32_t i = 0; i < k; ++i) tree.AddChild(-1, i, 0.5f);
  return tree;
}

TokenTree Chain(int32_t n) {
  TokenTree tree;
  for (int32_t i = 0; i < n; ++i) tree.AddChild(i - 1, i, 0.5f);
  return tree;
}

// The message of the grove::Error CheckLossless throws, or "" if it accepts.
std::string Refusal(VerifyRule rule, ChildDraw draw, const TokenTree& tree, bool greedy) {
  try {
    CheckLossless(rule, draw, tree, greedy);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(VerifyCheckLossless, RefusesEachLossyCombinationNamingRuleAndDraw) {
  TokenTree branching = Chain(2);
  branching.AddChild(1, 7, 0.5f);
  branching.AddChild(1, 8, 0.5f);  // node 1 has two children
  struct Bad {
    VerifyRule rule;
    ChildDraw draw;
    const TokenTree* tree;
    bool greedy;
    std::string mentions;  // a further fragment the message must contain
  };
  const TokenTree star = Star(3), chain = Chain(3);
  const std::vector<Bad> bad = {
      {VerifyRule::kGreedy, ChildDraw::kDeterministic, &star, false, "temperature > 0"},
      {VerifyRule::kGreedy, ChildDraw::kWithoutReplacement, &chain, false, "temperature > 0"},
      {VerifyRule::kChain, ChildDraw::kWithReplacement, &branching, false, "node 1 has 2 children"},
      {VerifyRule::kChain, ChildDraw::kDeterministic, &star, true, "the root has 3 children"},
      {VerifyRule::kChain, ChildDraw::kDeterministic, &chain, false, "target-sample"},
      {VerifyRule::kSpecInfer, ChildDraw::kDeterministic, &star, false, "target-sample"},
      {VerifyRule::kSequoia, ChildDraw::kDeterministic, &chain, false, "target-sample"},
      {VerifyRule::kSpecInfer, ChildDraw::kWithoutReplacement, &branching, false, "node 1"},
      {VerifyRule::kSequoia, ChildDraw::kWithReplacement, &star, false, "the root"},
  };
  for (const Bad& b : bad) {
    const std::string message = Refusal(b.rule, b.draw, *b.tree, b.greedy);
    const std::string what = StrCat(VerifyRuleName(b.rule), " / ", ChildDrawName(b.draw));
    EXPECT_NE(message, "") << what << " was accepted";
    EXPECT_NE(message.find(StrCat("'", VerifyRuleName(b.rule), "'")), std::string::npos) << message;
    EXPECT_NE(message.find(ChildDrawName(b.draw)), std::string::npos) << message;
    EXPECT_NE(message.find(b.mentions), std::string::npos) << message;
  }
}

TEST(VerifyCheckLossless, AcceptsTheLosslessCombinations) {
  const TokenTree star = Star(3), chain = Chain(3), empty;
  for (ChildDraw draw :
       {ChildDraw::kDeterministic, ChildDraw::kWithReplacement, ChildDraw::kWithoutReplacement}) {
    for (bool greedy : {false, true}) {
      EXPECT_EQ(Refusal(VerifyRule::kTargetSample, draw, star, greedy), "");  // any tree, any draw
    }
    EXPECT_EQ(Refusal(VerifyRule::kGreedy, draw, star, true), "");
    // At temperature 0 every rejection rule is exact argmax matching.
    EXPECT_EQ(Refusal(VerifyRule::kSpecInfer, draw, star, true), "");
    EXPECT_EQ(Refusal(VerifyRule::kSequoia, draw, star, true), "");
    EXPECT_EQ(Refusal(VerifyRule::kChain, draw, chain, true), "");
  }
  EXPECT_EQ(Refusal(VerifyRule::kSpecInfer, ChildDraw::kWithReplacement, star, false), "");
  EXPECT_EQ(Refusal(VerifyRule::kSequoia, ChildDraw::kWithoutReplacement, star, false), "");
  // With one child per node the two sampled draw modes coincide.
  for (VerifyRule rule : {VerifyRule::kChain, VerifyRule::kSpecInfer, VerifyRule::kSequoia}) {
    EXPECT_EQ(Refusal(rule, ChildDraw::kWithReplacement, chain, false), "") << VerifyRuleName(rule);
    EXPECT_EQ(Refusal(rule, ChildDraw::kWithoutReplacement, chain, false), "")
        << VerifyRuleName(rule);
    EXPECT_EQ(Refusal(rule, ChildDraw::kWithReplacement, empty, false), "") << VerifyRuleName(rule);
  }
}

// --- Names, purity, input checks -----------------------------------------------------------------

TEST(VerifyNames, RoundTripAndUnknownNamesAreRefused) {
  for (VerifyRule rule : {VerifyRule::kGreedy, VerifyRule::kChain, VerifyRule::kSpecInfer,
                          VerifyRule::kSequoia, VerifyRule::kTargetSample}) {
    EXPECT_EQ(ParseVerifyRule(VerifyRuleName(rule)), rule);
  }
  EXPECT_EQ(VerifyRuleName(VerifyRule::kTargetSample), "target-sample");
  for (ChildDraw draw :
       {ChildDraw::kDeterministic, ChildDraw::kWithReplacement, ChildDraw::kWithoutReplacement}) {
    EXPECT_EQ(ParseChildDraw(ChildDrawName(draw)), draw);
  }
  try {
    ParseVerifyRule("medusa");
    FAIL() << "unknown rule accepted";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("unknown verify rule 'medusa'"), std::string::npos) << message;
    EXPECT_NE(message.find("'sequoia'"), std::string::npos) << message;  // lists the known names
  }
  EXPECT_THROW(ParseChildDraw("top-k"), Error);
}

TEST(VerifyPurity, SameInputsSameOutputAndLeavesSampleLikePlainSampling) {
  const MarkovPair m = SixTokenPair(kP, kQ);
  const CounterRng rng(42);
  DrawnTree t;
  DrawTree(m, {3, 2}, ChildDraw::kWithoutReplacement, rng, 7, 50, 0, t);
  const ProbRows target = Rows(t.target, 6), draft = Rows(t.draft, 6);
  Verifier a, b;
  VerifyResult ra, rb;
  int differs = 0;
  for (uint64_t seq = 0; seq < 200; ++seq) {
    a.Verify(VerifyRule::kSequoia, t.tree, target, draft, rng, seq, 50, ra);
    b.Verify(VerifyRule::kSequoia, t.tree, target, draft, rng, seq, 50, rb);  // fresh scratch
    a.Verify(VerifyRule::kSequoia, t.tree, target, draft, rng, seq, 50, rb);  // reused scratch
    EXPECT_EQ(ra.accepted, rb.accepted);
    EXPECT_EQ(ra.next_token, rb.next_token);
    VerifyResult other = Verify(VerifyRule::kSequoia, t.tree, target, draft, rng, seq + 1, 50);
    differs += other.accepted != ra.accepted || other.next_token != ra.next_token;
  }
  EXPECT_GT(differs, 20);  // the sequence id keys the randomness

  // An empty tree is one plain sample of the target at root_position + 1, draw 0 -- the draw
  // Sampler::Sample makes for that position -- for every sampling rule.
  const TokenTree empty;
  for (VerifyRule rule : {VerifyRule::kChain, VerifyRule::kSpecInfer, VerifyRule::kSequoia,
                          VerifyRule::kTargetSample}) {
    for (uint64_t seq = 0; seq < 50; ++seq) {
      const VerifyResult r = Verify(rule, empty, target, draft, rng, seq, 50);
      EXPECT_TRUE(r.accepted.empty());
      EXPECT_EQ(r.next_token, Sampler::DrawFrom(target.Row(0), rng.Uniform(seq, 51, 0)));
    }
  }
}

TEST(VerifyInput, MismatchedRowsAndTokensAreNamed) {
  TokenTree tree = Star(2);
  const std::vector<float> rows(3 * 4, 0.25f);
  const ProbRows target{rows.data(), 4, 3};
  const CounterRng rng(1);
  auto message = [&](VerifyRule rule, const TokenTree& t, const ProbRows& p,
                     const ProbRows& q) -> std::string {
    try {
      Verify(rule, t, p, q, rng, 0, 0);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(message(VerifyRule::kGreedy, tree, {rows.data(), 4, 2}, {})
                .find("2 target rows for a tree of 2 nodes"),
            std::string::npos);
  EXPECT_NE(message(VerifyRule::kSequoia, tree, target, {}).find("draft rows"), std::string::npos);
  EXPECT_NE(message(VerifyRule::kSpecInfer, tree, target, {rows.data(), 3, 4}).find("draft rows"),
            std::string::npos);
  tree.AddChild(0, 9, 0.5f);
  const std::vector<float> more(4 * 4, 0.25f);
  EXPECT_NE(
      message(VerifyRule::kTargetSample, tree, {more.data(), 4, 4}, {}).find("node 2 has token 9"),
      std::string::npos);
  EXPECT_NE(message(VerifyRule::kChain, Star(2), target, target).find("the root has 2 children"),
            std::string::npos);
}

TEST(VerifyDraw, DrawModesProduceTheirKindOfChildren) {
  const CounterRng rng(3);
  std::vector<int32_t> tokens;
  DrawChildren(kQ, 3, ChildDraw::kDeterministic, rng, 0, 0, tokens);
  EXPECT_EQ(tokens, (std::vector<int32_t>{4, 5, 3}));  // q = .25, .25 (lower id first), .20
  const Row two = {0, 0.5f, 0, 0.5f, 0, 0};
  for (uint64_t seq = 0; seq < 100; ++seq) {
    DrawChildren(two, 6, ChildDraw::kWithoutReplacement, rng, seq, 0, tokens);
    // The draft's support first (in some order), then the rest through the uniform fallback.
    EXPECT_TRUE((tokens[0] == 1 && tokens[1] == 3) || (tokens[0] == 3 && tokens[1] == 1));
    std::vector<int32_t> sorted = tokens;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
    DrawChildren(two, 4, ChildDraw::kWithReplacement, rng, seq, 0, tokens);
    for (int32_t x : tokens) EXPECT_TRUE(x == 1 || x == 3);
  }
  EXPECT_THROW(DrawChildren(two, 7, ChildDraw::kWithoutReplacement, rng, 0, 0, tokens), Error);
  EXPECT_THROW(DrawChildren(Row(6, 0.0f), 1, ChildDraw::kWithReplacement, rng, 0, 0, tokens),
               Error);
}

}  // namespace
}  // namespace grove
