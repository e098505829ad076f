// The feature drafters: EAGLE-style autoregressive (K = 0) and ParallelSpec's parallel one (K mask
// tokens). Speculative greedy output equals plain greedy output for every tree builder, alone and
// beside another sequence in one target forward; sampled output has the target's joint
// distribution; the trainer's group-wise forward gives the inference drafter's logits, real and
// mask rows, for the same prefix; a drafter refuses a target it was not trained for.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "allocation_counter.h"
#include "base/error.h"
#include "distribution_check.h"
#include "io/gguf.h"
#include "model/batch.h"
#include "model/config.h"
#include "schedule/scheduler.h"
#include "speculate/draft_source.h"
#include "speculate/feature_drafter.h"
#include "speculate/model_drafter.h"
#include "speculate/plain_decoding.h"
#include "speculate/session.h"
#include "test_support.h"
#include "train/drafter_graph.h"
#include "train/feature_trainer.h"
#include "train/model_file.h"

namespace grove {
namespace {

using testing::AloneAndTogether;
using testing::DecodeAloneAndTogether;
using testing::MakeRandomModel;
using testing::StepAlone;
using testing::TempPath;

// A target the trainer can read (as many key/value heads as heads, RoPE over the whole head).
RandomModelSpec TargetSpec(int32_t layers, uint64_t seed, int32_t n_vocab = 320,
                           bool with_vocab = true) {
  RandomModelSpec s = testing::TinySpec(GgmlType::kF32, seed);
  s.name = "feature-target";
  s.n_vocab = n_vocab;
  s.n_layer = layers;
  s.n_head_kv = s.n_head;
  s.with_vocab = with_vocab;
  return s;
}

TrainShape ShapeOf(const Model& model) { return TrainShapeOf(model.config()); }

enum class Init {
  kRandom,  // random layer and fusion: guesses poorly, reads the features
  // The target's first layer reading only the token (fc = [I 0]): for a one-layer target it
  // computes exactly the target's logits, so every node it ranks first is accepted.
  kCopyOfTarget,
};

struct Drafter {
  ParamLayout layout;
  std::vector<float> params;
  std::unique_ptr<Model> model;
};

Drafter MakeFeatureDrafter(const Model& target, Init init, uint64_t seed, ModelOptions options,
                           int32_t masks = 0, int32_t n_seq = 1, float attention_scale = 1) {
  const TrainShape shape = ShapeOf(target);
  const ParamLayout target_layout(shape);
  const std::vector<float> target_params = ReadLayoutParams(target.gguf(), target_layout);
  Drafter d{DrafterLayout(shape, masks), {}, nullptr};
  d.params = InitFeatureDrafter(d.layout, target_layout, target_params.data(), seed);
  if (init == Init::kCopyOfTarget) {
    for (const ParamTensor& t : d.layout.tensors()) {
      if (!t.name.starts_with("blk.0.")) continue;
      const ParamTensor* src = target_layout.Find(t.name);
      std::copy_n(target_params.data() + src->offset, t.size, d.params.data() + t.offset);
    }
    float* fc = d.params.data() + FusionOffset(d.layout);
    const int64_t n = shape.n_embd;
    std::fill(fc, fc + 2 * n * n, 0.0f);
    for (int64_t o = 0; o < n; ++o) fc[o * 2 * n + o] = 1.0f;
  }
  for (const char* name : {"blk.0.attn_q.weight", "blk.0.attn_k.weight"}) {
    const ParamTensor* t = d.layout.Find(name);
    for (int64_t i = 0; i < t->size; ++i)
      d.params[static_cast<std::size_t>(t->offset + i)] *= attention_scale;
  }
  const GgufKeyValues tokenizer =
      target.gguf().Has("tokenizer.ggml.tokens") ? TokenizerKeys(target.gguf()) : GgufKeyValues{};
  const std::string path = TempPath("feature-drafter.gguf");
  FeatureDrafterWriter(d.layout, d.params.data(), tokenizer, GgmlType::kF32, "feature-drafter",
                       DrafterTargetOf(target.gguf()))
      .WriteFile(path);
  options.n_seq = n_seq;
  d.model = Model::Load(path, options);
  std::remove(path.c_str());
  return d;
}

std::vector<int32_t> Prompt(int n, int32_t n_vocab) {
  std::vector<int32_t> t(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) t[static_cast<std::size_t>(i)] = (i * 7 + 3) % n_vocab;
  return t;
}

SpeculationPolicy Policy(const std::string& plan, const grove::Drafter& drafter,
                         const SamplerParams& sampling, const std::string& verify = "") {
  TreePlanInputs inputs;
  inputs.acceptance = {0.6, 0.2, 0.1};
  return ResolveSpeculation({.plan = plan, .verify = verify}, inputs, drafter, sampling);
}

struct Case {
  std::string spec;
  Init init;
  int32_t masks = 0;
};

class FeatureGreedy : public ::testing::TestWithParam<Case> {};

TEST_P(FeatureGreedy, SpeculativeEqualsPlainTokenForToken) {
  const Case& c = GetParam();
  ModelOptions mo{.n_threads = 2};
  // The copy drafter equals a one-layer target; the random one reads a two-layer target's features.
  auto target = MakeRandomModel(TargetSpec(c.init == Init::kCopyOfTarget ? 1 : 2, 7), mo);
  mo.pool = target->shared_pool();
  Drafter d = MakeFeatureDrafter(*target, c.init, 3, mo, c.masks);
  FeatureDrafter drafter(*d.model, *target);
  EXPECT_EQ(drafter.masks(), c.masks);
  const SamplerParams greedy{.temperature = 0.0f};
  const SessionOptions options{.n_predict = 48, .stop_at_eog = false};
  const SpeculationPolicy policy = Policy(c.spec, drafter, greedy);
  const std::vector<int32_t> prompt = Prompt(12, target->config().n_vocab);

  const std::vector<int32_t> plain = GeneratePlain(*target, prompt, greedy, options, {});
  SpeculativeSession session(*target, drafter, policy, options);
  EXPECT_EQ(session.Generate(prompt, {}), plain);
  const SpeculationStats& s = session.stats();
  EXPECT_EQ(s.generated, 48);
  // Every feature the drafter holds is the target's hidden state at that position, as one forward
  // over the whole text computes it: rows taken from the wrong batch index (off by one, or the
  // tree's order for the accepted path's) still give plain decoding's tokens, only worse guesses.
  std::vector<int32_t> text = prompt;
  text.insert(text.end(), plain.begin(), plain.end());
  text.pop_back();  // the last token was never fed
  auto whole = Model::Create(target->parameters(), {.pool = target->shared_pool()});
  Batch batch;
  batch.AddChain(text, 0, 0);
  whole->Forward(batch);
  const std::span<const float> hidden = whole->hidden_states();
  const auto n_embd = static_cast<std::size_t>(target->config().n_embd);
  int32_t held = 0;
  for (int32_t p = 0; p < static_cast<int32_t>(text.size()); ++p) {
    const std::span<const float> feature = drafter.observed_feature(p);
    if (feature.empty()) continue;
    ++held;
    const std::span<const float> want =
        hidden.subspan(static_cast<std::size_t>(p) * n_embd, n_embd);
    ASSERT_EQ(feature.size(), want.size());
    float worst = 0.0f;
    for (std::size_t i = 0; i < n_embd; ++i) {
      worst = std::max(worst, std::abs(feature[i] - want[i]) / (1.0f + std::abs(want[i])));
    }
    EXPECT_LT(worst, 1e-4f) << "position " << p;
  }
  // The prompt's and every accepted token's (the last root's comes with the next verification).
  EXPECT_GE(held, static_cast<int32_t>(text.size()) - 1);
  if (c.init == Init::kCopyOfTarget && policy.plan.is_static() && !policy.plan.is_auto()) {
    // The drafter computes the target's own logits from the features and tokens it is handed: a
    // static tree's top path is accepted to its end at every step. A row fed at a wrong position,
    // a stale cache row or a missing committed token breaks this at once.
    ASSERT_FALSE(s.reached_depth.empty());
    for (std::size_t depth = 0; depth < s.reached_depth.size(); ++depth)
      EXPECT_EQ(s.accepted_at_depth[depth], s.reached_depth[depth]) << "depth " << depth + 1;
  }
}

std::vector<Case> GreedyCases() {
  std::vector<Case> cases;
  for (const char* spec :
       {"chain:4", "kconfig:2,2,1", "sequoia:10", "sequoia:12,4", "opt:10,0.05", "auto:6"}) {
    for (Init init : {Init::kRandom, Init::kCopyOfTarget}) cases.push_back({spec, init});
    cases.push_back({spec, Init::kRandom, 3});  // parallel: depths 1..4 from one forward
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Builders, FeatureGreedy, ::testing::ValuesIn(GreedyCases()),
                         [](const auto& info) {
                           std::string name =
                               info.param.spec + "_" +
                               (info.param.init == Init::kRandom ? "random" : "copy") +
                               (info.param.masks ? "_parallel" + std::to_string(info.param.masks)
                                                 : "");
                           return testing::TestNameOf(name);
                         });

// Two sessions verified in one target forward: each reads its own rows of the target's hidden
// states (the second sequence's root is not the batch's first row).
class TwoSessions : public ::testing::TestWithParam<int32_t> {};

TEST_P(TwoSessions, ShareOneTargetForward) {
  ModelOptions mo{.n_threads = 2, .n_seq = 2};
  auto target = MakeRandomModel(TargetSpec(2, 7), mo);
  mo.pool = target->shared_pool();
  Drafter d = MakeFeatureDrafter(*target, Init::kRandom, 5, mo, GetParam(), /*n_seq=*/2);
  const int32_t nv = target->config().n_vocab;
  const SamplerParams greedy{.temperature = 0.0f};
  const std::vector<int32_t> prompts[2] = {Prompt(10, nv), Prompt(17, nv)};
  const SessionOptions options[2] = {{.n_predict = 40, .stop_at_eog = false, .target_seq = 0},
                                     {.n_predict = 40, .stop_at_eog = false, .target_seq = 1}};
  FeatureDrafter drafters[2] = {FeatureDrafter(*d.model, *target, 0),
                                FeatureDrafter(*d.model, *target, 1)};
  const SpeculationPolicy policy = Policy("kconfig:2,2", drafters[0], greedy);
  grove::Drafter* const members[2] = {&drafters[0], &drafters[1]};
  const AloneAndTogether r = DecodeAloneAndTogether(*target, members, policy, options, prompts);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(r.alone[i], GeneratePlain(*target, prompts[i], greedy, options[i], {}));
    EXPECT_EQ(r.together[i], r.alone[i]);
  }
}

INSTANTIATE_TEST_SUITE_P(Masks, TwoSessions, ::testing::Values(0, 3));

// The trainer's forward (train/drafter_graph.h) and the inference drafter compute the same
// distributions for the same prefix and the same target features, for random prefixes: the real
// row of the prefix's last token (depth 1) and, for the parallel drafter, its group's mask rows
// (depths 2 .. K + 1), which the group-wise layout must show exactly what inference shows.
class TrainingMatchesInference : public ::testing::TestWithParam<int32_t> {};

TEST_P(TrainingMatchesInference, SameDistributionsForRandomPrefixes) {
  const int32_t masks = GetParam();
  ModelOptions mo{.n_threads = 1};
  auto target = MakeRandomModel(TargetSpec(2, 11), mo);
  mo.pool = target->shared_pool();
  // Sharp attention (queries and keys 8x the initialisation), so that a row seeing a wrong key or
  // at a wrong position changes its logits well beyond the tolerance.
  Drafter d = MakeFeatureDrafter(*target, Init::kRandom, 9, mo, masks, 1, /*attention_scale=*/8);
  const int32_t nv = target->config().n_vocab, D = target->config().n_embd;
  uint64_t state = 42;
  auto random_token = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int32_t>((state >> 33) % static_cast<uint64_t>(nv));
  };
  for (int32_t len : {1, 2, 9, 31}) {
    std::vector<int32_t> prefix(static_cast<std::size_t>(len));
    for (int32_t& t : prefix) t = random_token();
    // The window the trainer sees: the prefix, then K tokens its mask rows must not see.
    std::vector<int32_t> window = prefix;
    for (int32_t j = 0; j < masks; ++j) window.push_back(random_token());
    const auto rows = static_cast<int32_t>(window.size());
    // Row r reads the target's feature of position r - 1 (zero for row 0).
    std::vector<float> features(static_cast<std::size_t>(rows) * D, 0.0f);
    target->cache(0).Clear();
    Batch batch;
    batch.AddChain(window, 0, 0);
    target->Forward(batch);
    const std::span<const float> hidden = target->hidden_states();
    std::copy(hidden.begin(), hidden.end() - D, features.begin() + D);

    // Inference: the prefix's features but the root's (which comes with verification).
    FeatureDrafter drafter(*d.model, *target);
    drafter.Begin(prefix);
    drafter.ObserveTarget(0, std::span<const float>(features).subspan(D, (len - 1) * D));
    // Depth 1 from the root; depth j + 1 from a node at depth j (a chain of any tokens).
    TokenTree tree;
    std::vector<std::vector<float>> inference;
    const int32_t root[] = {-1};
    const std::span<const float> first = drafter.Expand(tree, root);
    inference.emplace_back(first.begin(), first.end());
    int32_t parent = -1;
    for (int32_t j = 1; j <= masks; ++j) {
      parent = tree.AddChild(parent, random_token(), 0.5f);
      const int32_t frontier[] = {parent};
      const std::span<const float> level = drafter.Expand(tree, frontier);
      inference.emplace_back(level.begin(), level.end());
    }

    DrafterGraph graph(d.layout, 1, rows, {});
    graph.Forward(d.params.data(), window.data(), features.data(), nullptr, nullptr);
    for (int32_t j = 0; j <= masks; ++j) {
      const int row = j == 0 ? len - 1 : graph.MaskRow(0, len - 1, j);
      ASSERT_GE(row, 0);
      ASSERT_EQ(graph.DepthOfRow(row), j + 1);
      const float* trained = graph.logits() + static_cast<std::size_t>(row) * nv;
      float max_diff = 0, max_abs = 0;
      for (int32_t v = 0; v < nv; ++v) {
        const float x = inference[static_cast<std::size_t>(j)][static_cast<std::size_t>(v)];
        max_diff = std::max(max_diff, std::fabs(trained[v] - x));
        max_abs = std::max(max_abs, std::fabs(trained[v]));
      }
      EXPECT_LT(max_diff, 2e-3f * std::max(1.0f, max_abs))
          << "prefix of " << len << ", depth " << j + 1;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Masks, TrainingMatchesInference, ::testing::Values(0, 1, 4));

// After warm-up a speculative step with a feature drafter allocates nothing, as with the other
// drafters (session_test): observing the target's features, drafting (the mask rows included) and
// committing reuse their buffers. Greedy and sampled, chain and built trees, K = 0 and 3.
class FeatureStep : public ::testing::TestWithParam<int32_t> {};

TEST_P(FeatureStep, DoesNotAllocateAfterWarmUp) {
  const int32_t masks = GetParam();
  ModelOptions mo{.n_threads = 2};
  auto target = MakeRandomModel(TargetSpec(1, 7), mo);
  mo.pool = target->shared_pool();
  Drafter d = MakeFeatureDrafter(*target, Init::kCopyOfTarget, 3, mo, masks);
  const int32_t nv = target->config().n_vocab;
  const SamplerParams cold{.temperature = 0.0f};
  const SamplerParams hot{.temperature = 1.2f, .seed = 5};
  for (const auto& [plan, sampling] : std::vector<std::pair<std::string, SamplerParams>>{
           {"chain:4", cold}, {"sequoia:12", hot}, {"opt:10,0.05", cold}, {"kconfig:2,2,1", hot}}) {
    SCOPED_TRACE(plan + (sampling.greedy() ? " greedy" : " sampled"));
    FeatureDrafter drafter(*d.model, *target);
    SpeculativeSession session(*target, drafter, Policy(plan, drafter, sampling),
                               {.n_predict = 230, .stop_at_eog = false});
    session.Start(Prompt(16, nv));
    Batch batch;
    batch.tokens.reserve(target->max_batch());
    auto step = [&] { StepAlone(session, *target, batch); };
    for (int i = 0; i < 10 && !session.done(); ++i) step();  // warm-up: buffers grow
    testing::AllocationCounter allocations;
    int steps = 0;
    for (; steps < 12 && !session.done(); ++steps) step();
    EXPECT_EQ(allocations.count(), 0);
    EXPECT_EQ(steps, 12) << "the session ended before the counted steps";
  }
}

INSTANTIATE_TEST_SUITE_P(Masks, FeatureStep, ::testing::Values(0, 3));

TEST(FeatureDrafter, RefusesTokensOutsideTheVocabulary) {
  ModelOptions mo{.n_threads = 1};
  auto target = MakeRandomModel(TargetSpec(1, 7), mo);
  Drafter d = MakeFeatureDrafter(*target, Init::kRandom, 3, mo, 2);
  FeatureDrafter drafter(*d.model, *target);
  const int32_t nv = target->config().n_vocab;
  for (int32_t bad : {-1, nv}) {
    const std::vector<int32_t> context = {1, 2, bad};
    try {
      drafter.Begin(context);
      ADD_FAILURE() << "token " << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("outside the vocabulary"), std::string::npos)
          << e.what();
    }
  }
}

// The trainer's attention lists are int32-indexed: a batch whose lists could pass 2^31 entries is
// refused by name before anything is allocated.
TEST(FeatureDrafter, TrainingGraphRefusesAttentionListsBeyondInt32) {
  auto target = MakeRandomModel(TargetSpec(1, 7), {.n_threads = 1});
  const ParamLayout layout = DrafterLayout(ShapeOf(*target), 4);
  try {
    DrafterGraph graph(layout, 20000, 256, {}, nullptr);
    ADD_FAILURE() << "a graph of 20000 x 256 rows with 4 masks was built";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("more than 2^31"), std::string::npos) << e.what();
  }
}

TEST(FeatureDrafter, RefusesAnotherTargetAndOtherModels) {
  ModelOptions mo{.n_threads = 1};
  auto target = MakeRandomModel(TargetSpec(2, 7), mo);
  auto other = MakeRandomModel(TargetSpec(2, 8), mo);
  Drafter d = MakeFeatureDrafter(*target, Init::kRandom, 1, mo);
  try {
    FeatureDrafter drafter(*d.model, *other);
    FAIL() << "paired with another target";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("was trained for target"), std::string::npos) << e.what();
  }
  // A plain model is not a feature drafter; OpenDrafter tells the two apart by the file.
  EXPECT_THROW(FeatureDrafter(*other, *target), Error);
  const std::string path = TempPath("feature-open.gguf");
  FeatureDrafterWriter(d.layout, d.params.data(), TokenizerKeys(target->gguf()), GgmlType::kQ8_0,
                       "q8", DrafterTargetOf(target->gguf()))
      .WriteFile(path);
  OpenedDrafter opened = OpenDrafter(path, *target);
  EXPECT_EQ(opened.drafter->name(), "feature");
  EXPECT_NE(opened.drafter->feature_reader(), nullptr);
  EXPECT_THROW(OpenDrafter(path, *other), Error);
  // Without a forward context (a server resolving policies), the same traits and refusals.
  const DrafterTraits traits = CheckDraftModel(*opened.model->parameters(), *target->parameters());
  EXPECT_EQ(traits.name, opened.drafter->name());
  EXPECT_EQ(traits.deterministic, opened.drafter->deterministic());
  EXPECT_THROW(CheckDraftModel(*opened.model->parameters(), *other->parameters()), Error);
  const DrafterTraits plain = CheckDraftModel(*other->parameters(), *target->parameters());
  EXPECT_EQ(plain.name, ModelDrafter(*other, *target).name());
  EXPECT_FALSE(plain.deterministic);
  auto wider = MakeRandomModel(TargetSpec(2, 9, /*n_vocab=*/520), mo);  // 200 more tokens
  EXPECT_THROW(CheckDraftModel(*wider->parameters(), *target->parameters()), Error);
  EXPECT_THROW(ModelDrafter(*wider, *target), Error);
}

// Sampled output: the first two tokens' joint distribution is the target's, whatever the feature
// drafter proposes (its children are drawn from its own distribution, a valid proposal).
struct SampledCase {
  std::string spec, rule;
  int32_t masks;
};

class FeatureSampled : public ::testing::TestWithParam<SampledCase> {};

TEST_P(FeatureSampled, FirstTwoTokensFollowTheTarget) {
  const auto& [spec, rule, masks] = GetParam();
  constexpr int32_t kVocab = 6;
  ModelOptions mo{.n_threads = 1, .n_ctx = 64};
  auto target = MakeRandomModel(TargetSpec(2, 11, kVocab, /*with_vocab=*/false), mo);
  mo.pool = target->shared_pool();
  Drafter d = MakeFeatureDrafter(*target, Init::kRandom, 12, mo, masks);
  FeatureDrafter drafter(*d.model, *target);
  const SamplerParams params{
      .temperature = 1.5f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = 5};
  const std::vector<int32_t> prompt = {1, 4, 2};
  const std::vector<double> joint = testing::ExactJoint(*target, prompt, params, kVocab);
  const SpeculationPolicy policy = Policy(spec, drafter, params, rule);
  const int64_t trials = 4000;
  std::vector<int64_t> counts(kVocab * kVocab, 0);
  for (int64_t t = 0; t < trials; ++t) {
    SpeculativeSession run(
        *target, drafter, policy,
        {.n_predict = 2, .stop_at_eog = false, .sequence = static_cast<uint64_t>(t)});
    const std::vector<int32_t> out = run.Generate(prompt, {});
    ASSERT_EQ(out.size(), 2u);
    ++counts[static_cast<std::size_t>(out[0] * kVocab + out[1])];
  }
  const auto [stat, crit] = testing::ChiSquare(counts, joint, trials);
  EXPECT_LT(stat, crit) << rule << " on " << spec;
}

INSTANTIATE_TEST_SUITE_P(Rules, FeatureSampled,
                         ::testing::Values(SampledCase{"kconfig:3,2", "sequoia", 0},
                                           SampledCase{"chain:3", "chain", 0},
                                           SampledCase{"sequoia:6", "specinfer", 0},
                                           SampledCase{"kconfig:3,2", "sequoia", 2},
                                           SampledCase{"chain:3", "chain", 2},
                                           SampledCase{"sequoia:6", "specinfer", 2}),
                         [](const auto& info) {
                           std::string name = info.param.rule + "_" + info.param.spec + "_k" +
                                              std::to_string(info.param.masks);
                           return testing::TestNameOf(name);
                         });

}  // namespace
}  // namespace grove

namespace grove {
namespace {

// The drafter's trainer end to end on a random target and a small text: the loss falls, a run
// stopped and resumed ends bit for bit where an uninterrupted one does, and the exported file
// drafts losslessly for that target.
class FeatureTrainer : public ::testing::TestWithParam<int32_t> {};

TEST_P(FeatureTrainer, LossFallsResumeIsExactExportDrafts) {
  namespace fs = std::filesystem;
  const int32_t masks = GetParam();
  const std::string dir = TempPath("feature-trainer-" + std::to_string(masks));
  fs::remove_all(dir);
  fs::create_directories(dir + "/corpus");
  const std::string target_path = dir + "/target.gguf";
  RandomModelWriter(TargetSpec(2, 7)).WriteFile(target_path);
  for (const char* part : {"train.txt", "valid.txt"}) {
    std::ofstream out(dir + "/corpus/" + part);
    for (int i = 0; i < 60; ++i) {
      out << "the cat " << i % 7 << " sat on the mat and the dog " << i % 5 << " ran home.\n\n";
    }
  }
  FeatureTrainOptions o;
  o.target_path = target_path;
  o.corpus_dir = dir + "/corpus";
  o.optimizer = {.lr = 1e-2, .warmup = 2, .steps = 12};
  o.batch = 2;
  o.seq_len = 32;
  o.masks = masks;
  o.eval_every = 5;  // evaluations in between must not disturb anything
  o.eval_batches = 1;
  o.threads = 1;

  o.out_dir = dir + "/straight";
  double first_loss = 0;
  const TrainResult straight = TrainFeatureDrafter(o, [&](const TrainProgress& p) {
    if (p.step == 1) first_loss = p.loss;
    if (!std::isnan(p.valid_loss)) {
      EXPECT_EQ(p.valid_agreement_by_depth.size(), static_cast<std::size_t>(masks) + 1);
    }
  });
  EXPECT_EQ(straight.step, 12);
  EXPECT_LT(straight.last_valid_loss, first_loss);

  o.out_dir = dir + "/resumed";
  std::atomic<bool> stop{false};
  const TrainResult first = TrainFeatureDrafter(
      o, [&](const TrainProgress& p) { stop = p.step >= 4; }, &stop);
  EXPECT_TRUE(first.interrupted);
  EXPECT_EQ(first.step, 5);
  const TrainResult second = TrainFeatureDrafter(o, {});
  EXPECT_TRUE(second.resumed);
  auto a = GgufFile::Open(straight.checkpoint);
  auto b = GgufFile::Open(second.checkpoint);
  ASSERT_EQ(a->tensors().size(), b->tensors().size());
  for (const GgufTensor& t : a->tensors()) {
    const GgufTensor& u = b->GetTensor(t.name);
    ASSERT_EQ(t.n_bytes, u.n_bytes) << t.name;
    EXPECT_EQ(std::memcmp(t.data, u.data, t.n_bytes), 0) << t.name;
  }
  // Another setting is refused by name.
  FeatureTrainOptions other = o;
  other.feature_weight = 0.5f;
  try {
    TrainFeatureDrafter(other, {});
    FAIL() << "resumed with another --feature-weight";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("feature_weight"), std::string::npos) << e.what();
  }

  const std::string exported = dir + "/drafter.gguf";
  ExportFeatureDrafter(straight.checkpoint, exported, GgmlType::kQ8_0);
  ModelOptions mo{.n_threads = 1};
  auto target = Model::Load(target_path, mo);
  OpenedDrafter opened = OpenDrafter(exported, *target);
  EXPECT_EQ(opened.drafter->name(), masks > 0 ? "parallel" : "feature");
  const SamplerParams greedy{.temperature = 0.0f};
  const SessionOptions options{.n_predict = 24, .stop_at_eog = false};
  const std::vector<int32_t> prompt = Prompt(9, target->config().n_vocab);
  SpeculativeSession session(*target, *opened.drafter,
                             Policy("kconfig:2,2,1", *opened.drafter, greedy), options);
  EXPECT_EQ(session.Generate(prompt, {}), GeneratePlain(*target, prompt, greedy, options, {}));
}

INSTANTIATE_TEST_SUITE_P(Masks, FeatureTrainer, ::testing::Values(0, 2));

}  // namespace
}  // namespace grove

namespace grove {
namespace {

// The scheduler's lanes make their drafters from the drafter file (MakeModelDrafter): with feature
// and parallel drafters every policy gives each sequence what plain decoding gives it alone,
// a prompt shared with an earlier request included. That one is not forked (a fork would leave the
// drafter without the prompt's features) except by plain decoding, which reads none.
class FeatureScheduler : public ::testing::TestWithParam<int32_t> {};

TEST_P(FeatureScheduler, EveryPolicyGivesEachSequenceWhatItGetsAlone) {
  ModelOptions mo{.n_threads = 2, .n_ctx = 128, .n_seq = 3};
  auto target = MakeRandomModel(TargetSpec(2, 7), mo);
  Drafter d =
      MakeFeatureDrafter(*target, Init::kRandom, 4, {.n_threads = 1, .n_ctx = 128}, GetParam());
  const int32_t nv = target->config().n_vocab;
  std::vector<SequenceRequest> requests;
  for (int i = 0; i < 4; ++i) {
    requests.push_back({.prompt = Prompt(6 + 3 * (i % 2), nv),
                        .sequence = 50u + static_cast<uint64_t>(i),
                        .n_predict = 24});
  }
  requests[2].prompt = requests[0].prompt;
  requests[2].shares_prompt_with = 0;
  requests[3].prompt[0] = 11;
  const SamplerParams greedy{.temperature = 0.0f};
  std::vector<std::vector<int32_t>> alone;
  for (const SequenceRequest& q : requests) {
    alone.push_back(GeneratePlain(*target, q.prompt, greedy,
                                  {.n_predict = q.n_predict, .sequence = q.sequence}, {}));
  }
  FeatureDrafter probe(*d.model, *target);
  const SpeculationPolicy speculation = Policy("kconfig:2,2,1", probe, greedy);
  for (SchedulePolicy policy : kAllSchedulePolicies) {
    SCOPED_TRACE(std::string(SchedulePolicyName(policy)));
    Scheduler scheduler(*target,
                        DraftSource::FromModel(d.model->parameters(), *target->parameters()),
                        {.policy = policy, .speculation = speculation, .node_budget = 40});
    const std::vector<SequenceResult> results = scheduler.Run(requests);
    ASSERT_EQ(results.size(), requests.size());
    for (std::size_t i = 0; i < results.size(); ++i)
      EXPECT_EQ(results[i].tokens, alone[i]) << "sequence " << i;
    if (policy != SchedulePolicy::kSerialAr) {
      EXPECT_FALSE(results[2].forked);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Masks, FeatureScheduler, ::testing::Values(0, 3));

}  // namespace
}  // namespace grove
