// One sequence's speculative session end to end: speculative greedy output equals plain greedy
// output token for token for every tree plan x drafter; sampled output has exactly the target's
// joint distribution over two tokens (enumerated from a tiny-vocabulary model) for every sampling
// rule; a step allocates nothing after warm-up; two sessions verified in one target forward give
// what each gives alone; the policy refuses lossy combinations.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>

#include "allocation_counter.h"
#include "base/error.h"
#include "distribution_check.h"
#include "io/gguf.h"
#include "model/layer_slice.h"
#include "speculate/auto_planner.h"
#include "speculate/drafter_mixture.h"
#include "speculate/model_drafter.h"
#include "speculate/ngram_drafter.h"
#include "speculate/plain_decoding.h"
#include "speculate/session.h"
#include "speculate/suffix_drafter.h"
#include "test_support.h"
#include "tokenize/tokenizer.h"

namespace grove {
namespace {

using testing::AloneAndTogether;
using testing::ChiSquare;
using testing::DecodeAloneAndTogether;
using testing::ExactJoint;
using testing::MakeRandomModel;
using testing::StepAlone;
using testing::TinySpec;

const std::vector<double> kAcceptance = {0.6, 0.2, 0.1};

// A target and a draft of the tiny shape sharing one thread pool, as the CLI pairs them.
struct Pair {
  std::unique_ptr<Model> target, draft;
};
Pair MakePair(ModelOptions options, uint64_t target_seed, uint64_t draft_seed) {
  Pair pair;
  pair.target = MakeRandomModel(TinySpec(GgmlType::kQ8_0, target_seed), options);
  options.pool = pair.target->shared_pool();
  pair.draft = MakeRandomModel(TinySpec(GgmlType::kQ8_0, draft_seed), options);
  return pair;
}

TreePlanInputs Inputs() {
  TreePlanInputs inputs;
  inputs.acceptance = kAcceptance;
  return inputs;
}

TreePlan Spec(const std::string& text) { return ParseTreePlan(text, Inputs()); }

SpeculationPolicy Policy(const std::string& plan, const Drafter& drafter,
                         const SamplerParams& sampling, const std::string& verify = "",
                         const std::string& draw = "") {
  return ResolveSpeculation({.plan = plan, .verify = verify, .draw = draw}, Inputs(), drafter,
                            sampling);
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

// The draft model `draft` and a suffix drafter over `store` (by default an empty one of its own),
// mixed.
std::unique_ptr<DrafterMixture> ModelAndSuffix(
    Model& draft, Model& target,
    std::shared_ptr<SuffixStore> store = std::make_shared<SuffixStore>()) {
  std::vector<std::unique_ptr<Drafter>> members;
  members.push_back(std::make_unique<ModelDrafter>(draft, target));
  members.push_back(
      std::make_unique<SuffixDrafter>(target.config().n_vocab, target.n_ctx(), std::move(store)));
  return std::make_unique<DrafterMixture>(std::move(members));
}

// The drafters a test picks by name, of one draft and target: the draft model (any other name),
// prompt lookup ("ngram"), suffix drafting ("suffix") and the draft mixed with suffix drafting
// over the same store ("mixture").
struct DraftersByName {
  DraftersByName(Model& draft, Model& target)
      : model(draft, target),
        ngram(target.config().n_vocab, target.n_ctx()),
        suffix(target.config().n_vocab, target.n_ctx(), store),
        mixture(ModelAndSuffix(draft, target, store)) {}

  Drafter& operator[](const std::string& name) {
    if (name == "ngram") return ngram;
    if (name == "suffix") return suffix;
    if (name == "mixture") return *mixture;
    return model;
  }

  std::shared_ptr<SuffixStore> store = std::make_shared<SuffixStore>();
  ModelDrafter model;
  NgramDrafter ngram;
  SuffixDrafter suffix;
  std::unique_ptr<DrafterMixture> mixture;
};

struct Case {
  std::string spec;
  std::string drafter;  // "same", "other", "slice", "ngram", "suffix", "mixture" (same + suffix)
};

class GreedyEquality : public ::testing::TestWithParam<Case> {};

TEST_P(GreedyEquality, SpeculativeEqualsPlainTokenForToken) {
  const Case& c = GetParam();
  ModelOptions mo{.n_threads = 2};
  auto target = MakeRandomModel(TinySpec(GgmlType::kQ8_0, 7), mo);
  mo.pool = target->shared_pool();  // target and draft share one pool, as the CLI does
  std::unique_ptr<Model> draft;
  std::string slice_path;
  if (c.drafter == "same" || c.drafter == "mixture")
    draft = MakeRandomModel(TinySpec(GgmlType::kQ8_0, 7), mo);
  if (c.drafter == "other") draft = MakeRandomModel(TinySpec(GgmlType::kQ8_0, 99), mo);
  if (c.drafter == "slice") {
    slice_path = testing::TempPath("slice.gguf");
    LayerSliceWriter(target->gguf(), 1).WriteFile(slice_path);
    draft = Model::Load(slice_path, mo);
  }
  const int32_t nv = target->config().n_vocab;
  const SamplerParams greedy{.temperature = 0.0f};
  const SessionOptions options{.n_predict = 48, .stop_at_eog = false};
  std::unique_ptr<Drafter> drafter;
  auto store = std::make_shared<SuffixStore>();
  if (c.drafter == "mixture") {
    drafter = ModelAndSuffix(*draft, *target, store);
  } else if (draft) {
    drafter = std::make_unique<ModelDrafter>(*draft, *target);
  } else if (c.drafter == "suffix") {
    drafter = std::make_unique<SuffixDrafter>(nv, target->n_ctx(), store);
  } else {
    drafter = std::make_unique<NgramDrafter>(nv, target->n_ctx());
  }
  const std::string spec_text = c.spec == "file" ? "file:" + TreeFile() : c.spec;
  const SpeculationPolicy policy = Policy(spec_text, *drafter, greedy);
  EXPECT_EQ(policy.rule, VerifyRule::kGreedy);
  const std::vector<int32_t> prompt = Prompt(12, nv);

  const std::vector<int32_t> plain = GeneratePlain(*target, prompt, greedy, options, {});
  SpeculativeSession session(*target, *drafter, policy, options);
  const std::vector<int32_t> spec = session.Generate(prompt, {});
  EXPECT_EQ(spec, plain);
  EXPECT_EQ(session.stats().generated, 48);
  if (c.drafter == "suffix") {
    // The second time, the store holds the first output: drafted from it, the same tokens.
    EXPECT_EQ(store->documents(), 1);
    SuffixDrafter again(nv, target->n_ctx(), store);
    SpeculativeSession second(*target, again, Policy(spec_text, again, greedy), options);
    EXPECT_EQ(second.Generate(prompt, {}), plain);
    if (!policy.plan.is_auto()) {
      EXPECT_GT(second.stats().tau(), session.stats().tau());
    }
  }
  if (draft && c.drafter != "mixture" && c.spec == "kconfig:2,2,1") {
    // At temperature 0 the drafter still ranks candidates: the tree keeps its 10 nodes.
    EXPECT_EQ(session.stats().tree_nodes, session.stats().steps * 10);
  }
  if (c.drafter == "same" && !policy.plan.is_auto()) {
    // A drafter identical to the target is always right: every step accepts at least its first
    // level (OPT-Tree may stop there when the random model's probabilities are flat).
    EXPECT_GE(session.stats().tau(), 2.0) << "τ = " << session.stats().tau();
  }
  if (c.drafter == "same" && policy.plan.is_static() && !policy.plan.is_auto()) {
    // More: it proposes exactly the target's next token at every node it feeds, so a static
    // tree's top-ranked path is accepted to its end, and every depth a step's tree reaches is
    // accepted in that step (a draft fed at a wrong position or with a stale cache breaks this
    // long before it brings τ under 2).
    const SpeculationStats& s = session.stats();
    ASSERT_FALSE(s.reached_depth.empty());
    for (std::size_t d = 0; d < s.reached_depth.size(); ++d) {
      EXPECT_EQ(s.accepted_at_depth[d], s.reached_depth[d]) << "depth " << d + 1;
    }
  }
  if (!slice_path.empty()) std::remove(slice_path.c_str());
}

// A target wide enough that a verify forward costs far more than a suffix lookup, as real targets
// do, and a weak draft model of its vocabulary whose forward costs many suffix lookups.
struct WidePair {
  std::unique_ptr<Model> target;
  std::unique_ptr<Model> weak;
};
WidePair MakeWidePair() {
  ModelOptions mo{.n_threads = 2};
  RandomModelSpec target_spec = TinySpec(GgmlType::kQ8_0, 7);
  target_spec.n_embd = 256;
  target_spec.n_ff = 640;
  target_spec.n_layer = 4;
  WidePair pair;
  pair.target = MakeRandomModel(target_spec, mo);
  mo.pool = pair.target->shared_pool();
  RandomModelSpec weak_spec = target_spec;
  weak_spec.seed = 99;
  weak_spec.n_layer = 8;
  pair.weak = MakeRandomModel(weak_spec, mo);
  return pair;
}

// A mixture whose suffix member is confident and proven right more often than its draft model
// (a weak one that costs a suffix lookup many times over) drafts steps alone, as chains of the
// depth the controller chooses from the verify curve (speculate/draft_outlook.h), once the store
// holds an earlier output of the same prompt; the tokens stay plain decoding's (MakeWidePair).
TEST(CheapSteps, AMixtureDraftsThemAsChainsAndStaysLossless) {
  const WidePair pair = MakeWidePair();
  Model& target = *pair.target;
  const SamplerParams greedy{.temperature = 0.0f};
  const SessionOptions options{.n_predict = 64, .stop_at_eog = false};
  const std::vector<int32_t> prompt = Prompt(12, target.config().n_vocab);
  const std::vector<int32_t> plain = GeneratePlain(target, prompt, greedy, options, {});
  const std::unique_ptr<DrafterMixture> model_and_suffix = ModelAndSuffix(*pair.weak, target);
  DrafterMixture& mixture = *model_and_suffix;
  for (const char* spec : {"auto", "auto:8"}) {
    SCOPED_TRACE(spec);
    const SpeculationPolicy policy = Policy(spec, mixture, greedy);
    SpeculationStats later;
    for (int run = 0; run < 3; ++run) {
      SpeculativeSession session(target, mixture, policy, options);
      EXPECT_EQ(session.Generate(prompt, {}), plain) << "run " << run;
      if (run > 0) later += session.stats();
    }
    EXPECT_GT(later.cheap_steps, 0);
    EXPECT_GT(later.cheap_nodes, later.cheap_steps) << "chains deeper than one node";
  }
}

// A planned chain (static, with a verify curve under which a row costs next to nothing) goes on
// with the suffix member's guesses past its depth where that member has been copying the path
// (speculate/draft_outlook.h); the tokens stay plain decoding's.
TEST(Tails, APlannedChainGoesOnWithTheCheapMembersGuessesAndStaysLossless) {
  const WidePair pair = MakeWidePair();
  Model& target = *pair.target;
  const SamplerParams greedy{.temperature = 0.0f};
  const VerifyCostCurve curve({{1, 1e-3}, {32, 1.001e-3}});
  const SessionOptions options{.n_predict = 64, .stop_at_eog = false, .verify_cost = &curve};
  const std::vector<int32_t> prompt = Prompt(12, target.config().n_vocab);
  const std::vector<int32_t> plain = GeneratePlain(target, prompt, greedy, options, {});
  const std::unique_ptr<DrafterMixture> mixture = ModelAndSuffix(*pair.weak, target);
  const SpeculationPolicy policy = Policy("chain:3", *mixture, greedy);
  SpeculationStats runs;
  for (int run = 0; run < 3; ++run) {
    SpeculativeSession session(target, *mixture, policy, options);
    session.UseShape(policy.plan.shape);  // as a scheduler gives it: a shape, outlooks apply
    EXPECT_EQ(session.Generate(prompt, {}), plain) << "run " << run;
    runs += session.stats();
  }
  // The first run's tails copy the text its own steps wrote (the random target's greedy text
  // repeats itself); on the later ones, where the suffix store holds this very text, the suffix
  // member's chains may stand in for the draft model's whole steps instead.
  EXPECT_GT(runs.tail_steps, 0);
  EXPECT_GT(runs.tail_accepted, 0);
  EXPECT_LE(runs.tail_accepted, runs.tail_nodes);
}

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  for (const char* spec : {"chain:4", "kconfig:2,2,1", "sequoia:10", "sequoia:12,4", "opt:10,0.05",
                           "file", "auto", "auto:6"}) {
    for (const char* drafter : {"same", "other", "slice", "ngram", "suffix", "mixture"})
      cases.push_back({spec, drafter});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(BuildersAndDrafters, GreedyEquality, ::testing::ValuesIn(AllCases()),
                         [](const auto& info) {
                           std::string name = info.param.spec + "_" + info.param.drafter;
                           return testing::TestNameOf(name);
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
  const SamplerParams greedy{.temperature = 0.0f};
  const SessionOptions options{.n_predict = 120};
  const std::vector<int32_t> plain = GeneratePlain(*target, prompt, greedy, options, {});
  for (const char* spec : {"chain:3", "kconfig:2,2,1", "sequoia:8", "opt:8,0.05", "auto"}) {
    ModelDrafter drafter(*draft, *target);
    SpeculativeSession session(*target, drafter, Policy(spec, drafter, greedy), options);
    EXPECT_EQ(session.Generate(prompt, {}), plain) << spec;
    // (auto may find plain decoding faster for this tiny pair and speculate rarely.)
    if (!session.policy().plan.is_auto()) {
      EXPECT_GT(session.stats().tau(), 1.3) << spec << ": the sliced draft should often agree";
    }
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

struct SamplingCase {
  VerifyRule rule;
  ChildDraw draw;
  std::string spec;
  // Instead of the draft model: the suffix drafter (its store grows with every trial), or a
  // mixture of both.
  std::string drafter = "model";
  float temperature = 1.5f;
  // The least steps a suffix member must have drafted alone (a mixture's cheap steps).
  int64_t min_cheap_steps = 0;
};

class SampledDistribution : public ::testing::TestWithParam<SamplingCase> {};

TEST_P(SampledDistribution, FirstTwoTokensFollowTheTarget) {
  const SamplingCase& c = GetParam();
  ModelOptions mo{.n_threads = 1, .n_ctx = 64};
  auto target = MakeRandomModel(TinyVocabSpec(11), mo);
  auto draft = MakeRandomModel(TinyVocabSpec(12), mo);  // a different model: many rejections
  // Temperature 1.5 flattens the random model's logits so that every pair has mass; 0.15 makes
  // the first token likely enough for a suffix drafter to be confident, and proven, at the root
  // (about 6000 cheap steps in 6000 trials).
  const SamplerParams params{
      .temperature = c.temperature, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = 5};
  const std::vector<int32_t> prompt = {1, 4, 2};
  const std::vector<double> joint = ExactJoint(*target, prompt, params, kTinyVocab);

  DraftersByName drafters(*draft, *target);
  Drafter& drafter = drafters[c.drafter];
  SpeculationPolicy policy = Policy(c.spec, drafter, params, std::string(VerifyRuleName(c.rule)),
                                    std::string(ChildDrawName(c.draw)));
  // auto: a flat verify curve makes the planner branch (and spares a measurement per trial).
  policy.inputs.verify_cost = VerifyCostCurve({{1, 1e-3}, {8, 1e-3}});
  const int64_t trials = 6000;
  std::vector<int64_t> counts(kTinyVocab * kTinyVocab, 0);
  int64_t cheap_steps = 0;
  for (int64_t t = 0; t < trials; ++t) {
    SpeculativeSession run(
        *target, drafter, policy,
        {.n_predict = 2, .stop_at_eog = false, .sequence = static_cast<uint64_t>(t)});
    std::vector<int32_t> out = run.Generate(prompt, {});
    ASSERT_EQ(out.size(), 2u);
    ++counts[out[0] * kTinyVocab + out[1]];
    cheap_steps += run.stats().cheap_steps;
  }
  auto [stat, crit] = ChiSquare(counts, joint, trials);
  EXPECT_LT(stat, crit) << VerifyRuleName(c.rule) << " on " << c.spec;
  EXPECT_GE(cheap_steps, c.min_cheap_steps);
}

INSTANTIATE_TEST_SUITE_P(
    Rules, SampledDistribution,
    ::testing::Values(
        SamplingCase{VerifyRule::kSequoia, ChildDraw::kWithoutReplacement, "kconfig:3,2"},
        SamplingCase{VerifyRule::kSpecInfer, ChildDraw::kWithReplacement, "kconfig:3,2"},
        SamplingCase{VerifyRule::kChain, ChildDraw::kWithReplacement, "chain:3"},
        SamplingCase{VerifyRule::kTargetSample, ChildDraw::kDeterministic, "kconfig:2,2"},
        SamplingCase{VerifyRule::kSequoia, ChildDraw::kWithoutReplacement, "sequoia:6"},
        SamplingCase{VerifyRule::kTargetSample, ChildDraw::kDeterministic, "opt:4,0.0"},
        SamplingCase{VerifyRule::kTargetSample, ChildDraw::kDeterministic, "kconfig:2,2", "suffix"},
        SamplingCase{VerifyRule::kTargetSample, ChildDraw::kDeterministic, "kconfig:2,2",
                     "mixture"},
        SamplingCase{VerifyRule::kSequoia, ChildDraw::kWithoutReplacement, "auto:6"},
        // A mixture with a draft model samples children from the draft model's rows, or on a
        // cheap step from the suffix member's.
        SamplingCase{VerifyRule::kSequoia, ChildDraw::kWithoutReplacement, "kconfig:3,2",
                     "mixture"},
        SamplingCase{VerifyRule::kSequoia, ChildDraw::kWithoutReplacement, "auto:6", "mixture",
                     0.15f, 1000}),
    [](const auto& info) {
      std::string name = std::string(VerifyRuleName(info.param.rule)) + "_" + info.param.spec +
                         (info.param.drafter == "model" ? "" : "_" + info.param.drafter) +
                         (info.param.min_cheap_steps > 0 ? "_cheap_steps" : "");
      return testing::TestNameOf(name);
    });

// With the same seed, target-sample verification reproduces plain sampling token for token: both
// draw the emitted token with the same counter (sequence, position, 0).
TEST(Session, TargetSampleReproducesPlainSampling) {
  auto target = MakeRandomModel(TinySpec(GgmlType::kF32, 3), {.n_threads = 1});
  auto draft = MakeRandomModel(TinySpec(GgmlType::kF32, 4), {.n_threads = 1});
  const int32_t nv = target->config().n_vocab;
  const SamplerParams hot{.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = 9};
  const SessionOptions options{.n_predict = 40, .stop_at_eog = false};
  const auto prompt = Prompt(8, nv);
  const auto plain = GeneratePlain(*target, prompt, hot, options, {});
  ModelDrafter drafter(*draft, *target);
  SpeculativeSession session(*target, drafter, Policy("kconfig:3,2", drafter, hot, "target-sample"),
                             options);
  EXPECT_EQ(session.Generate(prompt, {}), plain);
}

TEST(Speculation, RefusesLossyCombinations) {
  auto target = MakeRandomModel(TinySpec(), {.n_threads = 1});
  auto draft = MakeRandomModel(TinySpec(GgmlType::kF32, 8), {.n_threads = 1});
  const int32_t nv = target->config().n_vocab;
  const SamplerParams hot{.temperature = 1.0f};
  const SamplerParams cold{.temperature = 0.0f};
  ModelDrafter drafter(*draft, *target);
  NgramDrafter ngram(nv, target->n_ctx());
  EXPECT_THROW(Policy("kconfig:2,2", drafter, hot, "sequoia", "with-replacement"), Error);
  EXPECT_THROW(Policy("kconfig:2,2", drafter, hot, "specinfer", "without-replacement"), Error);
  EXPECT_THROW(Policy("kconfig:2,2", drafter, hot, "chain"), Error);  // a branching tree
  EXPECT_THROW(Policy("opt:8,0.1", drafter, hot, "sequoia"), Error);
  EXPECT_NO_THROW(Policy("opt:8,0.1", drafter, hot, "target-sample"));
  EXPECT_THROW(Policy("chain:3", ngram, hot, "chain"), Error);  // a drafter that guesses
  EXPECT_THROW(Policy("chain:3", ngram, cold, "", "with-replacement"), Error);
  EXPECT_THROW(Policy("chain:3", drafter, hot, "greedy"), Error);
  EXPECT_THROW(Policy("auto", drafter, hot, "chain"), Error);  // auto may branch
  EXPECT_THROW(Policy("chain:3", drafter, hot, "no-such-rule"), Error);
  // What the defaults resolve to.
  EXPECT_EQ(Policy("auto", drafter, cold).rule, VerifyRule::kGreedy);
  EXPECT_EQ(Policy("auto", drafter, hot).rule, VerifyRule::kSequoia);
  EXPECT_EQ(Policy("auto", drafter, hot).draw, ChildDraw::kWithoutReplacement);
  EXPECT_EQ(Policy("auto", ngram, hot).rule, VerifyRule::kTargetSample);
  EXPECT_EQ(Policy("auto", ngram, hot).draw, ChildDraw::kDeterministic);
  EXPECT_EQ(Policy("opt:8,0.1", drafter, hot).rule, VerifyRule::kTargetSample);
  EXPECT_EQ(Policy("chain:3", drafter, hot, "specinfer").draw, ChildDraw::kWithReplacement);
}

// The defaults are always a lossless pairing.
TEST(Speculation, DefaultRuleAndDrawAreLossless) {
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

TEST(Session, VocabularyMismatchIsAnError) {
  auto target = MakeRandomModel(TinySpec(), {.n_threads = 1});
  RandomModelSpec other = TinySpec();
  other.n_vocab = 320 + kMaxPairVocabDifference + 1;  // a difference of padding would be accepted
  auto draft = MakeRandomModel(other, {.n_threads = 1});
  try {
    ModelDrafter drafter(*draft, *target);
    FAIL() << "expected a vocabulary error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("vocabularies differ"), std::string::npos) << e.what();
  }
}

// After a few warm-up steps (buffers grow to the plan's largest tree), a step allocates nothing:
// Draft, AppendVerify, the target Forward and Accept, for every kind of plan and drafter, greedy
// and sampled.
TEST(Session, StepDoesNotAllocateAfterWarmUp) {
  const auto [target, draft] = MakePair({.n_threads = 2, .n_ctx = 256}, 7, 8);
  const int32_t nv = target->config().n_vocab;
  const SamplerParams cold{.temperature = 0.0f};
  const SamplerParams hot{
      .temperature = 0.9f, .top_k = 40, .top_p = 0.95f, .min_p = 0.02f, .seed = 3};
  struct Case {
    std::string plan;
    std::string drafter;  // "draft", "ngram", "suffix" or "mixture" (draft + suffix)
    SamplerParams sampling;
  };
  for (const Case& c :
       {Case{"chain:4", "draft", cold}, Case{"kconfig:2,2,1", "draft", hot},
        Case{"opt:8,0.05", "draft", cold}, Case{"sequoia:10", "draft", hot},
        Case{"auto", "draft", cold}, Case{"auto", "draft", hot}, Case{"chain:3", "ngram", cold},
        Case{"kconfig:2,2,1", "suffix", cold}, Case{"kconfig:2,2,1", "mixture", hot}}) {
    SCOPED_TRACE(c.plan + " " + c.drafter + (c.sampling.greedy() ? " greedy" : " sampled"));
    DraftersByName drafters(*draft, *target);
    Drafter& drafter = drafters[c.drafter];
    SpeculationPolicy policy = Policy(c.plan, drafter, c.sampling);
    // auto: a flat verify curve, so the planner keeps speculating (no start-up measurement).
    policy.inputs.verify_cost = VerifyCostCurve({{1, 1e-3}, {32, 1.1e-3}});
    SpeculativeSession session(*target, drafter, policy, {.n_predict = 180, .stop_at_eog = false});
    session.Start(Prompt(16, nv));
    Batch batch;
    // The driver's batch is the driver's business: grown once to the largest batch (a suffix
    // drafter's trees may first fill the plan's shape after the warm-up).
    for (auto* v :
         {&batch.tokens, &batch.positions, &batch.seq_ids, &batch.parents, &batch.cache_parents})
      v->reserve(target->max_batch());
    batch.logits.reserve(target->max_batch());
    auto step = [&] { StepAlone(session, *target, batch); };
    for (int i = 0; i < 16 && !session.done(); ++i) step();  // warm-up: buffers grow
    testing::AllocationCounter allocations;
    for (int i = 0; i < 24 && !session.done(); ++i) step();
    EXPECT_EQ(allocations.count(), 0);
    EXPECT_GT(session.stats().steps - session.stats().plain_steps, 16);
  }
}

// Two sequences verified in one target forward (each session appends its tree to the same batch,
// in its own KV cache) produce exactly what each produces alone: greedy, and sampled with its own
// RNG key.
TEST(Session, TwoSessionsShareOneTargetForward) {
  const auto [target, draft] = MakePair({.n_threads = 2, .n_seq = 2}, 7, 9);
  const int32_t nv = target->config().n_vocab;
  for (const SamplerParams& sampling :
       {SamplerParams{.temperature = 0.0f},
        SamplerParams{.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = 4}}) {
    const std::vector<int32_t> prompts[2] = {Prompt(10, nv), Prompt(17, nv)};
    const SessionOptions options[2] = {
        {.n_predict = 40, .stop_at_eog = false, .sequence = 11, .target_seq = 0},
        {.n_predict = 40, .stop_at_eog = false, .sequence = 12, .target_seq = 1}};
    ModelDrafter drafters[2] = {ModelDrafter(*draft, *target, 0), ModelDrafter(*draft, *target, 1)};
    const SpeculationPolicy policy = Policy("kconfig:2,2", drafters[0], sampling);
    Drafter* const members[2] = {&drafters[0], &drafters[1]};
    const AloneAndTogether r = DecodeAloneAndTogether(*target, members, policy, options, prompts);
    EXPECT_EQ(r.together[0], r.alone[0]) << "temperature " << sampling.temperature;
    EXPECT_EQ(r.together[1], r.alone[1]) << "temperature " << sampling.temperature;
    EXPECT_EQ(r.alone[0].size(), 40u);
  }
}

// The drafter's cache after every step holds exactly the committed text: with a draft identical
// to the target, its keys for every committed slot are the target's, bit for bit (contract 2:
// neither batch composition nor tree shape changes a row). A drafter that kept the wrong slots
// (OPT-Tree verifies a selection of the layers it drafted) would differ.
TEST(Session, DraftCacheHoldsTheCommittedText) {
  // The bundled draft as both models: a trained model's peaked distributions make OPT-Tree draft
  // several layers and select a part of them (a random model's flat ones stop it at one).
  const std::string path = std::string(GROVE_MODELS_DIR) + "/grove-draft.gguf";
  ASSERT_TRUE(testing::FileExists(path)) << path;
  auto target = Model::Load(path, {.n_threads = 1, .n_ctx = 256});
  auto draft = Model::Load(path, {.pool = target->shared_pool(), .n_ctx = 256});
  const SamplerParams greedy{.temperature = 0.0f};
  for (const char* plan :
       {"chain:4", "kconfig:2,2,1", "sequoia:10", "opt:10,0.05", "opt:16,0.2", "auto"}) {
    SCOPED_TRACE(plan);
    ModelDrafter drafter(*draft, *target);
    SpeculativeSession session(*target, drafter, Policy(plan, drafter, greedy),
                               {.n_predict = 120, .stop_at_eog = false});
    session.Start(target->tokenizer()->Encode("Once upon a time, there was a", true));
    Batch batch;
    int32_t compared = 0;
    while (!session.done()) {
      StepAlone(session, *target, batch);
      const KvCache& t = target->cache(0);
      const KvCache& d = draft->cache(0);
      const int32_t n = std::min(t.length(), d.length());
      for (int32_t layer = 0; layer < target->config().n_layer; ++layer) {
        for (int32_t slot = 0; slot < n; ++slot) {
          ASSERT_EQ(0,
                    std::memcmp(t.key(layer, slot), d.key(layer, slot), sizeof(float) * t.kv_dim()))
              << "layer " << layer << " slot " << slot << " after step " << session.stats().steps;
        }
      }
      compared = n;
    }
    // auto chooses from measured step times: on a loaded machine (sanitizers, a parallel build) it
    // may decode plainly for long stretches, leaving the drafter behind until it drafts again, so
    // only that some committed text was compared is required of it (seen: 8 slots under load).
    EXPECT_GT(compared, session.policy().plan.is_auto() ? 0 : 50);
    // A perfect drafter: a static tree's path is accepted whole (OPT-Tree's flat random-model
    // probabilities stop it at depth 1; auto may find plain decoding faster for this tiny pair).
    if (session.policy().plan.is_static() && !session.policy().plan.is_auto()) {
      EXPECT_GT(session.stats().tau(), 3.0);
    }
  }
}

// Decoding to the end of the context stops where plain decoding stops, with the same tokens, for
// every plan: a tree that no longer fits (in the target's cache or the drafter's) gives way to
// plain steps instead of failing.
TEST(Session, RunsToTheEndOfTheContextLikePlainDecoding) {
  const auto [target, draft] = MakePair({.n_threads = 1, .n_ctx = 96}, 7, 7);
  const int32_t nv = target->config().n_vocab;
  const SamplerParams greedy{.temperature = 0.0f};
  const SessionOptions options{.n_predict = 1000, .stop_at_eog = false};
  const std::vector<int32_t> prompt = Prompt(10, nv);
  const std::vector<int32_t> plain = GeneratePlain(*target, prompt, greedy, options, {});
  EXPECT_EQ(plain.size(), 96u - 10u);
  for (const char* plan : {"chain:6", "opt:16,0.0", "sequoia:12", "auto"}) {
    ModelDrafter drafter(*draft, *target);
    SpeculativeSession session(*target, drafter, Policy(plan, drafter, greedy), options);
    EXPECT_EQ(session.Generate(prompt, {}), plain) << plan;
    EXPECT_TRUE(session.done());
    // Room runs out only near the end (OPT-Tree stops drafting layers that do not fit; auto may
    // choose plain decoding for this tiny pair).
    if (!session.policy().plan.is_auto()) {
      EXPECT_GT(session.stats().steps - session.stats().plain_steps, 4) << plan;
    }
  }
}

// The time split accounts for the whole step: its parts are measured, "other" is the remainder.
TEST(Session, StepTimesAddUpToTheGeneration) {
  auto target = MakeRandomModel(TinySpec(GgmlType::kQ8_0, 7), {.n_threads = 1});
  auto draft = MakeRandomModel(TinySpec(GgmlType::kQ8_0, 7),
                               {.n_threads = 1, .pool = target->shared_pool()});
  ModelDrafter drafter(*draft, *target);
  const SamplerParams greedy{.temperature = 0.0f};
  SpeculativeSession session(*target, drafter, Policy("chain:3", drafter, greedy),
                             {.n_predict = 60});
  session.Generate(Prompt(8, target->config().n_vocab), {});
  const StepTimes& t = session.stats().times;
  EXPECT_GT(t.draft_forward, 0);
  EXPECT_GT(t.verify_forward, 0);
  EXPECT_GT(t.verification, 0);
  EXPECT_GE(t.other, 0);
  EXPECT_EQ(t.state, 0.0);  // no recurrent layers
  EXPECT_LE(t.total(), session.stats().total_seconds * 1.0001);
  EXPECT_GT(t.total(), 0.5 * session.stats().total_seconds);
}

TEST(TreePlan, ParsesEveryKindAndRejectsBadSpecs) {
  EXPECT_EQ(Spec("chain:4").shape.size(), 4);
  EXPECT_EQ(Spec("kconfig:2,2,1").shape.size(), 2 + 4 + 4);
  EXPECT_EQ(Spec("sequoia:10").shape.size(), 9);
  EXPECT_LE(Spec("sequoia:12,3").shape.depth(), 2);
  EXPECT_EQ(Spec("opt:16,0.2").max_nodes(), 16);
  EXPECT_EQ(Spec("auto").max_nodes(), kAutoMaxTokens - 1);
  EXPECT_EQ(Spec("auto:8").max_nodes(), 7);
  EXPECT_TRUE(Spec("auto:8").is_auto());
  EXPECT_EQ(Spec("file:" + TreeFile()).shape.size(), 7);
  for (const char* bad :
       {"chain", "chain:0", "chain:x", "kconfig:2,0", "tree:3", "opt:8", "opt:0,0.1", "sequoia:1",
        "file:/nonexistent.json", "chain:5000", "auto:1", "auto:x", "auto:4,2"}) {
    EXPECT_THROW(Spec(bad), Error) << bad;
  }
  EXPECT_THROW(ParseTreePlan("sequoia:8", TreePlanInputs{}), Error);  // no acceptance vector
  EXPECT_THROW(ParseTreePlan("sequoia:auto", TreePlanInputs{.acceptance = kAcceptance}),
               Error);  // no curve
  const std::string bad_file = testing::TempPath("bad_tree.json");
  std::ofstream(bad_file) << R"({"parents": [-1, 3]})";
  EXPECT_THROW(Spec("file:" + bad_file), Error);
}

// The message of the grove::Error a plan of `text` throws ("" when it throws none).
std::string PlanError(const std::string& text, const TreePlanInputs& inputs) {
  try {
    ParseTreePlan(text, inputs);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// What a request may ask for is bounded before anything is built: a size, depth or budget past
// the server's verify batch, a number no int holds (converting it would be undefined), a tree
// file (a client must not have the server read its files: the answer is the same for a file
// that exists and one that does not), each refused naming the spec and what is allowed.
TEST(TreePlan, RefusesWhatARequestMayNotAskFor) {
  TreePlanInputs request = Inputs();
  request.max_tokens = 128;
  request.tree_files = false;
  for (const std::string bad :
       {"sequoia:1000000,1000", "sequoia:100,1000000", "opt:100000,0", "chain:1e300", "chain:nan",
        "chain:inf", "chain:-inf", "kconfig:1e300", "kconfig:2,1e10", "sequoia:-1e300",
        "sequoia:100,nan", "auto:1e99", "opt:1e300,0.2", "chain:4.5"}) {
    const std::string error = PlanError(bad, request);
    EXPECT_NE(error.find("tree spec '" + bad + "'"), std::string::npos) << bad << ": " << error;
    EXPECT_NE(error.find("from 1 to"), std::string::npos) << bad << ": " << error;
  }
  const std::string missing = PlanError("file:/nonexistent/t.json", request);
  const std::string existing = PlanError("file:" + TreeFile(), request);
  EXPECT_NE(missing.find("tree files are not read"), std::string::npos) << missing;
  EXPECT_EQ(existing.substr(existing.find("':")), missing.substr(missing.find("':")));
  request.tree_files = true;
  EXPECT_EQ(ParseTreePlan("file:" + TreeFile(), request).shape.size(), 7);
}

// A Sequoia table is bounded by its cells, whatever the batch allows: sizes and depths a verify
// batch of 8192 admits would need terabytes.
TEST(TreePlan, RefusesASequoiaTableTooLargeToHold) {
  TreePlanInputs inputs = Inputs();
  inputs.max_tokens = 8192;
  for (const std::string bad : {"sequoia:8192,8192", "sequoia:5000,1000"}) {
    const std::string error = PlanError(bad, inputs);
    EXPECT_NE(error.find("cells, more than the"), std::string::npos) << bad << ": " << error;
    EXPECT_NE(error.find("smaller size or depth"), std::string::npos) << bad << ": " << error;
  }
  EXPECT_THROW(SequoiaTable::Build(kAcceptance, 8192, 8192), Error);
  // What planners and the CLI's usual specs build stays within it.
  EXPECT_EQ(Spec("sequoia:512,16").shape.size(), 511);
  EXPECT_NO_THROW(SequoiaTable::Build(kAcceptance, 2048));
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
  // A verify forward that costs as much as the tree is long: plain decoding wins, an empty shape.
  inputs.verify_cost = VerifyCostCurve({{1, 1.0}, {32, 32.0}});
  TreePlan plain = ParseTreePlan("sequoia:auto", inputs);
  EXPECT_EQ(plain.sequoia_choice->size, 1);
  EXPECT_TRUE(plain.shape.empty());
}

}  // namespace
}  // namespace grove
