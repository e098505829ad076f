// Sampling: parameter validation, each filter, determinism of the counter-based RNG, and a
// goodness-of-fit check of the draws against the distribution they come from.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <set>

#include "base/error.h"
#include "sample/sampler.h"

namespace grove {
namespace {

TEST(SamplerParams, RejectsImpossibleValues) {
  EXPECT_THROW((SamplerParams{.top_p = 2.0f}).Validate(), Error);
  EXPECT_THROW((SamplerParams{.top_p = 0.0f}).Validate(), Error);
  EXPECT_THROW((SamplerParams{.temperature = -1.0f}).Validate(), Error);
  EXPECT_THROW((SamplerParams{.temperature = NAN}).Validate(), Error);
  EXPECT_THROW((SamplerParams{.top_k = -1}).Validate(), Error);
  EXPECT_THROW((SamplerParams{.min_p = 1.5f}).Validate(), Error);
  EXPECT_NO_THROW(SamplerParams{}.Validate());
  try {
    (SamplerParams{.top_p = 2.0f}).Validate();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("top-p"), std::string::npos);
  }
}

TEST(Sampler, GreedyIsArgmaxWithLowestIdOnTies) {
  Sampler s(SamplerParams{.temperature = 0.0f});
  std::vector<float> logits = {0.1f, 3.0f, -1.0f, 3.0f};
  EXPECT_EQ(s.Sample(logits, 0, 0), 1);
  std::vector<float> probs(4);
  s.Distribution(logits, probs);
  EXPECT_EQ(probs, (std::vector<float>{0, 1, 0, 0}));
}

// The filters as their definition reads: sort the whole vocabulary by logit (lower id first on
// ties), cut top-k, then the smallest prefix reaching top-p, then min-p; renormalise. Double
// precision throughout. Sampler::Distribution selects instead of sorting and must agree.
std::vector<double> ReferenceDistribution(const std::vector<float>& logits,
                                          const SamplerParams& p) {
  const int32_t n = static_cast<int32_t>(logits.size());
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  int32_t kept = p.top_k > 0 && p.top_k < n ? p.top_k : n;
  std::vector<double> e(n);
  for (int32_t i = 0; i < n; ++i)
    e[i] = std::exp((logits[order[i]] - logits[order[0]]) / double{p.temperature});
  const double sum = std::accumulate(e.begin(), e.begin() + kept, 0.0);
  double mass = 0;
  for (int32_t i = 0; i < kept; ++i) {
    mass += e[i] / sum;
    if (mass >= p.top_p) {
      kept = i + 1;
      break;
    }
  }
  int32_t i = 1;
  while (i < kept && e[i] >= p.min_p) ++i;
  kept = i;
  const double total = std::accumulate(e.begin(), e.begin() + kept, 0.0);
  std::vector<double> probs(n, 0.0);
  for (int32_t j = 0; j < kept; ++j) probs[order[j]] = e[j] / total;
  return probs;
}

TEST(Sampler, DistributionMatchesTheSortedDefinition) {
  std::mt19937 rng(3);
  for (int32_t n : {5, 64, 3072, 32000}) {
    for (float spread : {0.5f, 4.0f, -1.0f}) {
      // A negative spread: logits in steps of 1/4, so top-k's cut falls among ties, and a third
      // of them -inf (masked tokens), so a small vocabulary has fewer finite logits than k.
      std::normal_distribution<float> normal(0.0f, std::abs(spread));
      std::vector<float> logits(n);
      for (float& l : logits) l = normal(rng);
      logits[n / 2] = logits[n / 3];  // a tie
      if (spread < 0) {
        for (int32_t t = 0; t < n; ++t) {
          logits[t] = t % 3 == 2 ? -std::numeric_limits<float>::infinity()
                                 : std::round(4.0f * logits[t]) / 4.0f;
        }
      }
      for (const SamplerParams& params :
           {SamplerParams{.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f},
            SamplerParams{.temperature = 0.7f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f},
            SamplerParams{.temperature = 1.3f, .top_k = 0, .top_p = 0.9f, .min_p = 0.0f},
            SamplerParams{.temperature = 1.0f, .top_k = 0, .top_p = 0.999f, .min_p = 0.0f},
            SamplerParams{.temperature = 0.8f, .top_k = 3, .top_p = 1.0f, .min_p = 0.2f},
            SamplerParams{.temperature = 0.9f, .top_k = 0, .top_p = 0.95f, .min_p = 0.05f},
            SamplerParams{.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.01f}}) {
        Sampler sampler(params);
        std::vector<float> probs(n);
        sampler.Distribution(logits, probs);
        const std::vector<double> want = ReferenceDistribution(logits, params);
        int32_t differ_in_support = 0;
        for (int32_t t = 0; t < n; ++t) {
          // A candidate right at a cut may fall either side by float rounding; nothing else may.
          if ((probs[t] > 0) != (want[t] > 0)) {
            ++differ_in_support;
            continue;
          }
          ASSERT_NEAR(probs[t], want[t], 2e-6 + 1e-4 * want[t]) << "n " << n << " token " << t;
        }
        EXPECT_LE(differ_in_support, 1) << "n " << n << " spread " << spread;
      }
    }
  }
}

// TopTokens: the k best in (score descending, id ascending) order above the floor, as a full sort
// gives them: ties, a floor that leaves fewer than k, k beyond the vocabulary, blocks of the scan.
TEST(Sampler, TopTokensMatchesASort) {
  std::mt19937 rng(11);
  for (int32_t n : {1, 7, 600, 3072}) {
    std::uniform_int_distribution<int> coarse(0, 40);  // many ties
    std::vector<float> scores(n);
    for (float& x : scores) x = static_cast<float>(coarse(rng)) / 8.0f;
    for (int32_t k : {1, 2, 16, 64, 5000}) {
      for (float floor : {-std::numeric_limits<float>::infinity(), 2.5f}) {
        std::vector<int32_t> order(n);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(),
                         [&](int32_t a, int32_t b) { return scores[a] > scores[b]; });
        std::vector<int32_t> want;
        for (int32_t t : order) {
          if (static_cast<int32_t>(want.size()) < k && scores[t] > floor) want.push_back(t);
        }
        std::vector<int32_t> got;
        TopTokens(scores, k, floor, got);
        EXPECT_EQ(got, want) << "n " << n << " k " << k << " floor " << floor;
      }
    }
  }
}

TEST(Sampler, FiltersCutTheSortedPrefix) {
  std::vector<float> logits = {std::log(0.5f), std::log(0.25f), std::log(0.15f), std::log(0.1f)};
  std::vector<float> probs(4);
  Sampler all(SamplerParams{.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f});
  all.Distribution(logits, probs);
  EXPECT_NEAR(probs[0], 0.5, 1e-6);
  EXPECT_NEAR(probs[3], 0.1, 1e-6);
  Sampler top2(SamplerParams{.temperature = 1.0f, .top_k = 2, .top_p = 1.0f, .min_p = 0.0f});
  top2.Distribution(logits, probs);
  EXPECT_NEAR(probs[0], 2.0 / 3, 1e-6);
  EXPECT_EQ(probs[2], 0.0f);
  Sampler nucleus(SamplerParams{.temperature = 1.0f, .top_k = 0, .top_p = 0.8f, .min_p = 0.0f});
  nucleus.Distribution(logits, probs);  // 0.5 + 0.25 < 0.8 <= 0.9: three tokens
  EXPECT_GT(probs[2], 0.0f);
  EXPECT_EQ(probs[3], 0.0f);
  Sampler minp(SamplerParams{.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.4f});
  minp.Distribution(logits, probs);  // keeps p >= 0.2: two tokens
  EXPECT_GT(probs[1], 0.0f);
  EXPECT_EQ(probs[2], 0.0f);
  Sampler hot(SamplerParams{.temperature = 2.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f});
  hot.Distribution(logits, probs);  // p^(1/2) renormalised
  const double z = std::sqrt(0.5) + std::sqrt(0.25) + std::sqrt(0.15) + std::sqrt(0.1);
  EXPECT_NEAR(probs[0], std::sqrt(0.5) / z, 1e-6);
}

// min-p compares probabilities after temperature, as llama.cpp does: at T = 0.5 the masses are
// p^2 renormalised (0.5, 0.25, 0.15, 0.1 -> 1 : 0.25 : 0.09 : 0.04 of the top), at T = 2 they are
// sqrt(p) (1 : 0.71 : 0.55 : 0.45). A min-p applied to the T = 1 ratios (1 : 0.5 : 0.3 : 0.2) keeps
// another set in both cases, so the default CLI sampling (T 0.8, min-p 0.05) is covered where it
// differs.
TEST(Sampler, MinPComparesProbabilitiesAfterTemperature) {
  const std::vector<float> logits = {std::log(0.5f), std::log(0.25f), std::log(0.15f),
                                     std::log(0.1f)};
  std::vector<float> probs(4);
  Sampler cold(SamplerParams{.temperature = 0.5f, .top_k = 0, .top_p = 1.0f, .min_p = 0.22f});
  cold.Distribution(logits, probs);  // keeps 1 and 0.25 (T = 1 ratios would keep three tokens)
  EXPECT_NEAR(probs[0], 1.0 / 1.25, 1e-5);
  EXPECT_NEAR(probs[1], 0.25 / 1.25, 1e-5);
  EXPECT_EQ(probs[2], 0.0f);
  EXPECT_EQ(probs[3], 0.0f);
  Sampler hot(SamplerParams{.temperature = 2.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.52f});
  hot.Distribution(logits, probs);  // keeps sqrt ratios >= 0.52: three tokens (T = 1: one)
  const double z = std::sqrt(0.5) + std::sqrt(0.25) + std::sqrt(0.15);
  EXPECT_NEAR(probs[0], std::sqrt(0.5) / z, 1e-5);
  EXPECT_NEAR(probs[2], std::sqrt(0.15) / z, 1e-5);
  EXPECT_EQ(probs[3], 0.0f);
}

// top-p keeps the smallest prefix whose mass reaches p: on an exact boundary (four equal tokens,
// p = 0.5 and 0.75, where the prefix sums are exact in binary) the token that reaches it is kept
// and the next is not; just above the boundary one more token is needed.
TEST(Sampler, TopPKeepsTheTokenThatReachesTheMassExactly) {
  const std::vector<float> logits = {1.0f, 1.0f, 1.0f, 1.0f};
  std::vector<float> probs(4);
  for (auto [top_p, kept] : {std::pair{0.25f, 1}, {0.5f, 2}, {0.75f, 3}, {0.5001f, 3}}) {
    Sampler s(SamplerParams{.temperature = 1.0f, .top_k = 0, .top_p = top_p, .min_p = 0.0f});
    s.Distribution(logits, probs);
    for (int i = 0; i < 4; ++i) {
      EXPECT_FLOAT_EQ(probs[i], i < kept ? 1.0f / kept : 0.0f)
          << "top-p " << top_p << " token " << i;
    }
  }
  // The same with unequal masses: 0.5, 0.25, 0.25 (exact powers of two) and p = 0.75.
  const std::vector<float> halves = {std::log(2.0f), 0.0f, 0.0f};
  Sampler s(SamplerParams{.temperature = 1.0f, .top_k = 0, .top_p = 0.75f, .min_p = 0.0f});
  probs.assign(3, 0.0f);
  s.Distribution(halves, probs);
  EXPECT_NEAR(probs[0], 2.0 / 3, 1e-6);
  EXPECT_NEAR(probs[1], 1.0 / 3, 1e-6);
  EXPECT_EQ(probs[2], 0.0f);
}

TEST(Sampler, SameCounterSameDraw) {
  std::vector<float> logits(100);
  for (int i = 0; i < 100; ++i) logits[i] = std::sin(i * 0.7f) * 3;
  SamplerParams p{.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = 42};
  Sampler a(p), b(p);
  std::set<int32_t> seen;
  for (int pos = 0; pos < 50; ++pos) {
    EXPECT_EQ(a.Sample(logits, 3, pos), b.Sample(logits, 3, pos));
    seen.insert(a.Sample(logits, 3, pos));
  }
  EXPECT_GT(seen.size(), 5u) << "different positions must give different draws";
  // Order of calls does not matter: the draw depends on the counter only.
  const int32_t late = a.Sample(logits, 9, 1000);
  Sampler c(p);
  EXPECT_EQ(c.Sample(logits, 9, 1000), late);
}

// Sample draws over the kept candidates only; it must give the token DrawFrom draws from the dense
// distribution with the same uniform number, for every filter setting, ties and masked tokens.
TEST(Sampler, SampleDrawsWhatDrawFromDrawsFromTheDistribution) {
  std::mt19937 rng(5);
  for (int32_t n : {3, 100, 3072}) {
    for (const SamplerParams& base :
         {SamplerParams{.temperature = 0.8f},
          SamplerParams{.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f},
          SamplerParams{.temperature = 1.5f, .top_k = 0, .top_p = 0.9f, .min_p = 0.05f},
          SamplerParams{.temperature = 0.5f, .top_k = 5, .top_p = 1.0f, .min_p = 0.0f}}) {
      SamplerParams params = base;
      params.seed = 11;
      Sampler sampler(params);
      const CounterRng counter(params.seed);
      std::normal_distribution<float> normal(0.0f, 2.0f);
      std::vector<float> logits(n), probs(n);
      for (int pos = 0; pos < 200; ++pos) {
        for (float& l : logits) l = std::round(4.0f * normal(rng)) / 4.0f;  // ties
        logits[pos % n] = -std::numeric_limits<float>::infinity();
        sampler.Distribution(logits, probs);
        const int32_t want = Sampler::DrawFrom(probs, counter.Uniform(2, pos, 1));
        ASSERT_EQ(sampler.Sample(logits, 2, pos, 1), want) << "n " << n << " position " << pos;
      }
    }
  }
}

// Pearson chi-square of 20000 draws against a 6-outcome distribution; 0.999 quantile of chi2(5) is
// 20.5, so a correct sampler fails this with probability 1e-3 (fixed seed: deterministic).
TEST(Sampler, DrawsFollowTheDistribution) {
  std::vector<float> p = {0.3f, 0.25f, 0.2f, 0.15f, 0.07f, 0.03f};
  std::vector<float> logits;
  for (float v : p) logits.push_back(std::log(v));
  Sampler s(
      SamplerParams{.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = 7});
  std::vector<int> counts(6, 0);
  const int n = 20000;
  for (int i = 0; i < n; ++i) ++counts[s.Sample(logits, 0, i)];
  double chi2 = 0;
  for (int i = 0; i < 6; ++i) chi2 += std::pow(counts[i] - n * p[i], 2) / (n * p[i]);
  EXPECT_LT(chi2, 20.5);
}

TEST(CounterRng, UniformInRange) {
  CounterRng rng(123);
  double sum = 0;
  for (int i = 0; i < 10000; ++i) {
    const double u = rng.Uniform(0, i, 0);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.02);
  EXPECT_NE(rng.Uniform(0, 0, 0), rng.Uniform(0, 0, 1));
  EXPECT_NE(rng.Uniform(0, 0, 0), rng.Uniform(1, 0, 0));
  EXPECT_NE(rng.Uniform(0, 0, 0), CounterRng(124).Uniform(0, 0, 0));
}

}  // namespace
}  // namespace grove
