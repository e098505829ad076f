// The speculative decoding loop end to end: speculative greedy output equals plain greedy output token
// for token for every tree builder x drafter, and sampled output has exactly the target's joint
// distribution over two tokens (enumerated from a tiny-vocabulary model) for every sampling rule.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>

#include "base/error.h"
#include "io/gguf.h"
#include "model/layer_slice.h"
#include "model/tokenizer.h"
#include "speculate/model_drafter.h"
#include "speculate/ngram_drafter.h"
#include "speculate/spec_decoder.h"
#include "test_support.h"

namespace grove {
namespace {

using testing::MakeRandomModel;
using testing::TinySpec;

const std::vector<double> kAcceptance = {0.6, 0.2, 0.1};

TreePlan Spec(const std::string& text) {
  TreePlanInputs inputs;
  inputs.acceptance = kAcceptance;
  return ParseTreePlan(text, inputs);
}

std::vector<int32_t> Prompt(int n, int32_t n_vocab) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = (i * 7 + 3) % n_vocab;
  // Repeat a stretch so prompt lookup finds matches.
  for (int i = n / 2; i < n; ++i) t[i] = t[i - n / 2];
  return t;
}

std::string TreeFile() {
  const std::string path = testing::TempPath("tree.json");
  std::ofstream(path) << R"({"parents": [-1, -1, 0, 0, 1, 2, 5]})";
  return path;
}

struct Case {
  std::string spec;
  std::string drafter;  // "same", "other", "slice", "ngram"
};

class GreedyEquality : public ::testing::TestWithParam<Case> {};

TEST_P(GreedyEquality, SpeculativeEqualsPlainTokenForToken) {
  const Case& c = GetParam();
  ModelOptions mo{.n_threads = 2};
  auto target = MakeRandomModel(TinySpec(GgmlType::kQ8_0, 7), mo);
  std::unique_ptr<Model> draft;
  std::string slice_path;
  if (c.drafter == "same") draft = MakeRandomModel(TinySpec(GgmlType::kQ8_0, 7), mo);
  if (c.drafter == "other") draft = MakeRandomModel(TinySpec(GgmlType::kQ8_0, 99), mo);
  if (c.drafter == "slice") {
    slice_path = testing::TempPath("slice.gguf");
    LayerSliceWriter(target->gguf(), 1).WriteFile(slice_path);
    draft = Model::Load(slice_path, mo);
  }
  const int32_t nv = target->config().n_vocab;
  SpecOptions options{.rule = VerifyRule::kGreedy, .sampling = {.temperature = 0.0f}, .n_predict = 48,
                      .stop_at_eog = false};
  std::unique_ptr<Drafter> drafter;
  if (draft) {
    drafter = std::make_unique<ModelDrafter>(*draft, *target, options.sampling);
  } else {
    drafter = std::make_unique<NgramDrafter>(nv);
  }
  const std::string spec_text = c.spec == "file" ? "file:" + TreeFile() : c.spec;
  TreeBuilder builder(Spec(spec_text), ChildDraw::kDeterministic, nv, 1);
  const std::vector<int32_t> prompt = Prompt(12, nv);

  const std::vector<int32_t> plain = GeneratePlain(*target, prompt, options, {});
  SpecDecoder decoder(*target, *drafter, builder, options);
  const std::vector<int32_t> spec = decoder.Generate(prompt, {});
  EXPECT_EQ(spec, plain);
  EXPECT_EQ(decoder.stats().generated, 48);
  if (c.drafter != "ngram" && c.spec == "kconfig:2,2,1") {
    // At temperature 0 the drafter still ranks candidates: the tree keeps its 10 nodes.
    EXPECT_EQ(decoder.stats().tree_nodes, decoder.stats().steps * 10);
  }
  if (c.drafter == "same") {
    // A drafter identical to the target is always right: every step accepts at least its first level
    // (OPT-Tree may stop there when the random model's probabilities are flat).
    EXPECT_GE(decoder.stats().tau(), 2.0) << "τ = " << decoder.stats().tau();
  }
  if (!slice_path.empty()) std::remove(slice_path.c_str());
}

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  for (const char* spec : {"chain:4", "kconfig:2,2,1", "sequoia:10", "sequoia:12,4", "opt:10,0.05", "file"}) {
    for (const char* drafter : {"same", "other", "slice", "ngram"}) cases.push_back({spec, drafter});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(BuildersAndDrafters, GreedyEquality, ::testing::ValuesIn(AllCases()),
                         [](const auto& info) {
                           std::string name = info.param.spec + "_" + info.param.drafter;
                           for (char& ch : name) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

// stories260K with a draft made of its first four layers: greedy speculative output equals plain.
TEST(Stories260KSpeculative, GreedyEqualsPlainWithSlicedDraft) {
  const std::string path = testing::SharedPath("models/stories260K.gguf");
  GROVE_SKIP_IF_MISSING(path);
  ModelOptions mo{.n_threads = 2, .n_ctx = 512};
  auto target = Model::Load(path, mo);
  const std::string slice_path = testing::TempPath("stories_slice.gguf");
  LayerSliceWriter(target->gguf(), 4).WriteFile(slice_path);
  auto draft = Model::Load(slice_path, mo);
  const std::vector<int32_t> prompt = target->tokenizer()->Encode("Once upon a time", true);
  SpecOptions options{.rule = VerifyRule::kGreedy, .sampling = {.temperature = 0.0f}, .n_predict = 120};
  const std::vector<int32_t> plain = GeneratePlain(*target, prompt, options, {});
  for (const char* spec : {"chain:3", "kconfig:2,2,1", "sequoia:8", "opt:8,0.05"}) {
    ModelDrafter drafter(*draft, *target, options.sampling);
    TreeBuilder builder(Spec(spec), ChildDraw::kDeterministic, target->config().n_vocab, 1);
    SpecDecoder decoder(*target, drafter, builder, options);
    EXPECT_EQ(decoder.Generate(prompt, {}), plain) << spec;
    EXPECT_GT(decoder.stats().tau(), 1.3) << spec << ": the sliced draft should often agree";
  }
  std::remove(slice_path.c_str());
}

// ---- Sampling: the joint distribution of the first two generated tokens.

constexpr int32_t kTinyVocab = 6;

RandomModelSpec TinyVocabSpec(uint64_t seed) {
  RandomModelSpec s = TinySpec(GgmlType::kF32, seed);
  s.n_vocab = kTinyVocab;
  s.with_vocab = false;
  return s;
}

// p(x1, x2) after the prompt, from the target's own logits under the given sampling parameters.
std::vector<double> ExactJoint(Model& target, const std::vector<int32_t>& prompt, const SamplerParams& params) {
  Sampler sampler(params);
  std::vector<float> p1(kTinyVocab), p2(kTinyVocab);
  Batch batch;
  target.cache(0).Clear();
  batch.AddChain(prompt, 0, 0);
  auto logits = target.Forward(batch);
  sampler.Distribution(logits, p1);
  const int32_t p = target.cache(0).length();
  std::vector<double> joint(kTinyVocab * kTinyVocab);
  for (int32_t x1 = 0; x1 < kTinyVocab; ++x1) {
    target.cache(0).Truncate(p);
    batch.Clear();
    batch.Add(x1, p, 0, -1, true);
    sampler.Distribution(target.Forward(batch), p2);
    for (int32_t x2 = 0; x2 < kTinyVocab; ++x2) joint[x1 * kTinyVocab + x2] = double{p1[x1]} * p2[x2];
  }
  return joint;
}

// Pearson chi-square over cells with expected count >= 5 (the rest pooled into one cell), and its
// critical value at significance 1e-3 (Wilson-Hilferty approximation of the chi-square quantile).
std::pair<double, double> ChiSquare(const std::vector<int64_t>& counts, const std::vector<double>& p, int64_t n) {
  double stat = 0, pooled_expected = 0;
  int64_t pooled_observed = 0;
  int cells = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const double expected = p[i] * n;
    if (expected >= 5) {
      stat += (counts[i] - expected) * (counts[i] - expected) / expected;
      ++cells;
    } else {
      pooled_expected += expected;
      pooled_observed += counts[i];
    }
  }
  if (pooled_expected > 0) {
    stat += (pooled_observed - pooled_expected) * (pooled_observed - pooled_expected) / std::max(pooled_expected, 1e-9);
    ++cells;
  }
  const double df = cells - 1, z = 3.09;
  const double crit = df * std::pow(1 - 2 / (9 * df) + z * std::sqrt(2 / (9 * df)), 3);
  return {stat, crit};
}

struct SamplingCase {
  VerifyRule rule;
  ChildDraw draw;
  std::string spec;
};

class SampledDistribution : public ::testing::TestWithParam<SamplingCase> {};

TEST_P(SampledDistribution, FirstTwoTokensFollowTheTarget) {
  const SamplingCase& c = GetParam();
  ModelOptions mo{.n_threads = 1, .n_ctx = 64};
  auto target = MakeRandomModel(TinyVocabSpec(11), mo);
  auto draft = MakeRandomModel(TinyVocabSpec(12), mo);  // a different model: many rejections
  // Temperature 1.5 flattens the random model's logits so that every pair has mass.
  const SamplerParams params{.temperature = 1.5f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = 5};
  const std::vector<int32_t> prompt = {1, 4, 2};
  const std::vector<double> joint = ExactJoint(*target, prompt, params);

  ModelDrafter drafter(*draft, *target, params);
  TreeBuilder builder(Spec(c.spec), c.draw, kTinyVocab, params.seed);
  SpecOptions options{.rule = c.rule, .sampling = params, .n_predict = 2, .stop_at_eog = false};
  SpecDecoder decoder(*target, drafter, builder, options);
  const int64_t trials = 6000;
  std::vector<int64_t> counts(kTinyVocab * kTinyVocab, 0);
  for (int64_t t = 0; t < trials; ++t) {
    options.sequence = static_cast<uint64_t>(t);
    SpecDecoder run(*target, drafter, builder, options);
    std::vector<int32_t> out = run.Generate(prompt, {});
    ASSERT_EQ(out.size(), 2u);
    ++counts[out[0] * kTinyVocab + out[1]];
  }
  auto [stat, crit] = ChiSquare(counts, joint, trials);
  EXPECT_LT(stat, crit) << VerifyRuleName(c.rule) << " on " << c.spec;
}

INSTANTIATE_TEST_SUITE_P(
    Rules, SampledDistribution,
    ::testing::Values(SamplingCase{VerifyRule::kSequoia, ChildDraw::kWithoutReplacement, "kconfig:3,2"},
                      SamplingCase{VerifyRule::kSpecInfer, ChildDraw::kWithReplacement, "kconfig:3,2"},
                      SamplingCase{VerifyRule::kChain, ChildDraw::kWithReplacement, "chain:3"},
                      SamplingCase{VerifyRule::kTargetSample, ChildDraw::kDeterministic, "kconfig:2,2"},
                      SamplingCase{VerifyRule::kSequoia, ChildDraw::kWithoutReplacement, "sequoia:6"}),
    [](const auto& info) {
      std::string name = std::string(VerifyRuleName(info.param.rule)) + "_" + info.param.spec;
      for (char& ch : name) {
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      return name;
    });

// With the same seed, target-sample verification reproduces plain sampling token for token: both
// draw the emitted token with the same counter (sequence, position, 0).
TEST(SpecDecoder, TargetSampleReproducesPlainSampling) {
  auto target = MakeRandomModel(TinySpec(GgmlType::kF32, 3), {.n_threads = 1});
  auto draft = MakeRandomModel(TinySpec(GgmlType::kF32, 4), {.n_threads = 1});
  const int32_t nv = target->config().n_vocab;
  SpecOptions options{.rule = VerifyRule::kTargetSample,
                      .sampling = {.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = 9},
                      .n_predict = 40,
                      .stop_at_eog = false};
  const auto prompt = Prompt(8, nv);
  const auto plain = GeneratePlain(*target, prompt, options, {});
  ModelDrafter drafter(*draft, *target, options.sampling);
  TreeBuilder builder(Spec("kconfig:3,2"), ChildDraw::kDeterministic, nv, 9);
  SpecDecoder decoder(*target, drafter, builder, options);
  EXPECT_EQ(decoder.Generate(prompt, {}), plain);
}

TEST(SpecDecoder, RefusesLossyCombinations) {
  auto target = MakeRandomModel(TinySpec(), {.n_threads = 1});
  auto draft = MakeRandomModel(TinySpec(GgmlType::kF32, 8), {.n_threads = 1});
  const int32_t nv = target->config().n_vocab;
  const SamplerParams hot{.temperature = 1.0f};
  ModelDrafter drafter(*draft, *target, hot);
  NgramDrafter ngram(nv);
  {
    TreeBuilder builder(Spec("kconfig:2,2"), ChildDraw::kWithReplacement, nv, 1);
    EXPECT_THROW(SpecDecoder(*target, drafter, builder, {.rule = VerifyRule::kSequoia, .sampling = hot}), Error);
  }
  {
    TreeBuilder builder(Spec("opt:8,0.1"), ChildDraw::kDeterministic, nv, 1);
    EXPECT_THROW(SpecDecoder(*target, drafter, builder, {.rule = VerifyRule::kSequoia, .sampling = hot}), Error);
    EXPECT_NO_THROW(SpecDecoder(*target, drafter, builder, {.rule = VerifyRule::kTargetSample, .sampling = hot}));
  }
  {
    TreeBuilder builder(Spec("chain:3"), ChildDraw::kWithReplacement, nv, 1);
    EXPECT_THROW(SpecDecoder(*target, ngram, builder, {.rule = VerifyRule::kChain, .sampling = hot}), Error);
    EXPECT_THROW(SpecDecoder(*target, drafter, builder, {.rule = VerifyRule::kGreedy, .sampling = hot}), Error);
  }
}

// The defaults the CLI uses are always a lossless pairing.
TEST(SpecDecoder, DefaultRuleAndDrawAreLossless) {
  const TreePlan spec = Spec("kconfig:2,2");
  for (bool greedy : {true, false}) {
    for (bool deterministic : {true, false}) {
      const VerifyRule rule = DefaultVerifyRule(greedy, deterministic);
      const ChildDraw draw = deterministic ? ChildDraw::kDeterministic : RequiredChildDraw(rule);
      EXPECT_NO_THROW(CheckLossless(rule, draw, spec.shape, greedy)) << VerifyRuleName(rule);
    }
  }
  EXPECT_EQ(DefaultVerifyRule(false, false), VerifyRule::kSequoia);
  EXPECT_EQ(DefaultVerifyRule(false, true), VerifyRule::kTargetSample);
  EXPECT_EQ(RequiredChildDraw(VerifyRule::kSpecInfer), ChildDraw::kWithReplacement);
}

TEST(SpecDecoder, VocabularyMismatchIsAnError) {
  auto target = MakeRandomModel(TinySpec(), {.n_threads = 1});
  RandomModelSpec other = TinySpec();
  other.n_vocab = 400;
  auto draft = MakeRandomModel(other, {.n_threads = 1});
  try {
    ModelDrafter drafter(*draft, *target, SamplerParams{});
    FAIL() << "expected a vocabulary error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("vocabularies differ"), std::string::npos) << e.what();
  }
}

TEST(TreePlan, ParsesEveryKindAndRejectsBadSpecs) {
  EXPECT_EQ(Spec("chain:4").shape.size(), 4);
  EXPECT_EQ(Spec("kconfig:2,2,1").shape.size(), 2 + 4 + 4);
  EXPECT_EQ(Spec("sequoia:10").shape.size(), 9);
  EXPECT_LE(Spec("sequoia:12,3").shape.depth(), 2);
  EXPECT_EQ(Spec("opt:16,0.2").max_nodes(), 16);
  EXPECT_EQ(Spec("file:" + TreeFile()).shape.size(), 7);
  for (const char* bad : {"chain", "chain:0", "chain:x", "kconfig:2,0", "tree:3", "opt:8", "opt:0,0.1",
                          "sequoia:1", "file:/nonexistent.json", "chain:5000"}) {
    EXPECT_THROW(Spec(bad), Error) << bad;
  }
  EXPECT_THROW(ParseTreePlan("sequoia:8", TreePlanInputs{}), Error);  // no acceptance vector
  EXPECT_THROW(ParseTreePlan("sequoia:auto", TreePlanInputs{.acceptance = kAcceptance}), Error);  // no curve
  const std::string bad_file = testing::TempPath("bad_tree.json");
  std::ofstream(bad_file) << R"({"parents": [-1, 3]})";
  EXPECT_THROW(Spec("file:" + bad_file), Error);
}

TEST(TreePlan, SequoiaAutoPicksFromTheCurve) {
  TreePlanInputs inputs;
  inputs.acceptance = {0.8};
  // Flat to n = 8, then linear: with a cheap draft the best tree is a chain filling the flat part.
  inputs.verify_cost = VerifyCostCurve({{1, 1.0}, {8, 1.0}, {16, 2.0}, {32, 4.0}});
  inputs.draft_seconds_per_level = 0.05;
  TreePlan spec = ParseTreePlan("sequoia:auto", inputs);
  ASSERT_TRUE(spec.sequoia_choice.has_value());
  EXPECT_EQ(spec.sequoia_choice->size, 8);
  EXPECT_EQ(spec.shape.size(), 7);
}

}  // namespace
}  // namespace grove
