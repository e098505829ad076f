// Qwen3.5 (`qwen35`, `qwen35moe`, model/family.h): Gated DeltaNet layers beside gated attention,
// over a mixture of experts with a shared expert in qwen35moe. The checks
// against llama.cpp's distributions and greedy text are family_test.cc's (FamilyVsLlamaCpp); here:
// the recurrent state through speculation (speculative greedy == plain greedy), its rewinds and
// forks, what it refuses by name, and files whose Gated DeltaNet keys or tensors are wrong.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>

#include "base/error.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "llama_cpp_reference.h"
#include "model/model.h"
#include "model/recurrent_state.h"
#include "schedule/scheduler.h"
#include "speculate/model_drafter.h"
#include "speculate/plain_decoding.h"
#include "speculate/session.h"
#include "test_support.h"

namespace grove {
namespace {

using testing::FamilyTestSpec;
using testing::TempPath;

std::vector<int32_t> Tokens(int n, int32_t n_vocab, uint64_t seed = 7) {
  std::vector<int32_t> t = {1};
  uint64_t x = seed;
  while (static_cast<int>(t.size()) < n) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    t.push_back(static_cast<int32_t>(3 + (x >> 33) % static_cast<uint64_t>(n_vocab - 3)));
  }
  return t;
}

std::unique_ptr<Model> Qwen35(int32_t n_seq = 1) {
  return testing::MakeRandomModel(FamilyTestSpec("qwen35", GgmlType::kQ8_0),
                                  {.n_threads = 2, .n_ctx = 256, .n_seq = n_seq});
}

std::vector<float> Copy(std::span<const float> v) { return {v.begin(), v.end()}; }

// A verify batch runs past what is accepted; the next batch continues at the accepted position,
// and must see the state there: the same logits as a sequence that never ran the rejected tokens.
TEST(RecurrentState, ARewoundSequenceComputesTheBitsOfOneThatNeverWentFurther) {
  auto model = Qwen35();
  const std::vector<int32_t> t = Tokens(40, model->config().n_vocab);
  const std::span<const int32_t> all(t);
  Batch batch;
  // Reference: 20 tokens, then the next 5, one forward each.
  model->ForwardChain(all.first(20), 0, 0, batch, false);
  const std::vector<float> want = Copy(model->ForwardChain(all.subspan(20, 5), 20, 0, batch, true));
  // Rewound: 20 tokens, 8 "drafted" ones (from another text), truncated back to 20, then the 5.
  model->cache(0).Clear();
  model->ForwardChain(all.first(20), 0, 0, batch, false);
  const std::vector<int32_t> other = Tokens(8, model->config().n_vocab, 99);
  model->ForwardChain(other, 20, 0, batch, true);
  model->cache(0).Truncate(20);
  const std::vector<float> got = Copy(model->ForwardChain(all.subspan(20, 5), 20, 0, batch, true));
  EXPECT_EQ(got, want);
  // Rewinding within the last batches, one token each (what a draft model does).
  model->cache(0).Truncate(22);
  const std::vector<float> again =
      Copy(model->ForwardChain(all.subspan(22, 3), 22, 0, batch, true));
  EXPECT_EQ(again, want);
}

TEST(RecurrentState, AForkContinuesAsItsParent) {
  auto model = Qwen35(/*n_seq=*/3);
  const std::vector<int32_t> t = Tokens(30, model->config().n_vocab);
  EXPECT_TRUE(testing::ForkContinuesAsParent(*model, t, 18));
}

TEST(RecurrentState, WhatTheStateCannotFollowIsRefusedByName) {
  auto model = Qwen35();
  const std::vector<int32_t> t = Tokens(140, model->config().n_vocab);
  const std::span<const int32_t> all(t);
  Batch batch;
  // A prompt moves the checkpoint to its end: a rewind into it has no state to start from.
  model->ForwardChain(all.first(100), 0, 0, batch, false);
  model->cache(0).Truncate(90);
  try {
    model->ForwardChain(all.subspan(90, 2), 90, 0, batch, true);
    ADD_FAILURE() << "a rewind into the prompt ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("keeps no snapshot of that position"), std::string::npos)
        << e.what();
  }
  // A token that skips a position: refused before the caches or the state changed, so that the
  // sequence then continues at 100 as one that never saw it.
  model->cache(0).Clear();
  model->ForwardChain(all.first(100), 0, 0, batch, false);
  batch.Clear();
  batch.Add(t[100], 100, 0, -1, true);
  batch.Add(t[101], 102, 0, 0, true);
  try {
    model->Forward(batch);
    ADD_FAILURE() << "a token skipping a position ran over recurrent state";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("absorbs its sequence's tokens in order"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(model->cache(0).length(), 100);
  const std::vector<float> after =
      Copy(model->ForwardChain(all.subspan(100, 3), 100, 0, batch, true));
  model->cache(0).Clear();
  model->ForwardChain(all.first(100), 0, 0, batch, false);
  EXPECT_EQ(Copy(model->ForwardChain(all.subspan(100, 3), 100, 0, batch, true)), after);
}

// The logits of the last token of `path` after `prefix`, decoded alone in a cleared cache.
std::vector<float> PathAlone(Model& model, std::span<const int32_t> prefix,
                             std::span<const int32_t> path) {
  Batch batch;
  model.cache(0).Clear();
  model.ForwardChain(prefix, 0, 0, batch, false);
  return Copy(model.ForwardChain(path, static_cast<int32_t>(prefix.size()), 0, batch, true));
}

// A token tree after 20 tokens, in BFS order: r; its children a b c; a's children d e; b's f;
// d's g. Node tokens come from another text than the prefix.
struct TestTree {
  std::vector<int32_t> tokens;
  std::vector<int32_t> parents = {-1, 0, 0, 0, 1, 1, 2, 4};
  std::vector<int32_t> Path(int32_t node) const {
    std::vector<int32_t> path;
    for (int32_t x = node; x >= 0; x = parents[static_cast<std::size_t>(x)])
      path.insert(path.begin(), tokens[static_cast<std::size_t>(x)]);
    return path;
  }
  int32_t Depth(int32_t node) const { return static_cast<int32_t>(Path(node).size()) - 1; }
  void AppendTo(Batch& batch, int32_t first_position) const {
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      const int32_t node = static_cast<int32_t>(i);
      batch.Add(tokens[i], first_position + Depth(node), 0, parents[i], true);
    }
  }
};

// Contract 2 on recurrent layers: one forward verifies a tree, and each node's logits are the
// bits of its path decoded alone. Then whichever path is kept (the first children's, a prefix of
// it, a side branch) the sequence continues as one that decoded just that path.
TEST(RecurrentState, EachTreeNodeComputesTheBitsOfItsPathDecodedAlone) {
  auto model = Qwen35();
  const int32_t nv = model->config().n_vocab;
  const std::vector<int32_t> prefix = Tokens(20, nv);
  TestTree tree{.tokens = Tokens(8, nv, 41)};
  const std::vector<int32_t> more = Tokens(4, nv, 77);
  struct Kept {
    const char* name;
    std::vector<int32_t> nodes;
  };
  for (const Kept& kept : {Kept{"first children", {0, 1, 4, 7}}, Kept{"a prefix", {0, 1, 4}},
                           Kept{"a side branch", {0, 2, 6}}, Kept{"the root", {0}}}) {
    SCOPED_TRACE(kept.name);
    Batch batch;
    model->cache(0).Clear();
    model->ForwardChain(prefix, 0, 0, batch, false);
    batch.Clear();
    tree.AppendTo(batch, 20);
    const std::vector<float> rows = Copy(model->Forward(batch));
    for (int32_t node = 0; node < 8; ++node) {
      const std::vector<int32_t> path = tree.Path(node);
      const std::span<const float> row(rows.data() + static_cast<std::size_t>(node) * nv,
                                       static_cast<std::size_t>(nv));
      const std::vector<float> alone = PathAlone(*model, prefix, path);
      EXPECT_TRUE(std::equal(row.begin(), row.end(), alone.begin())) << "node " << node;
      // PathAlone used the cache: run the tree again for the next node.
      model->cache(0).Clear();
      model->ForwardChain(prefix, 0, 0, batch, false);
      batch.Clear();
      tree.AppendTo(batch, 20);
      model->Forward(batch);
    }
    // Keep one path (as a session's Compact does), then continue it.
    std::vector<int32_t> slots;
    for (std::size_t k = 1; k < kept.nodes.size(); ++k) slots.push_back(20 + kept.nodes[k]);
    model->cache(0).Compact(21, slots);
    std::vector<int32_t> path = tree.Path(kept.nodes.back());
    const auto at = static_cast<int32_t>(20 + path.size());
    const std::vector<float> got = Copy(model->ForwardChain(more, at, 0, batch, true));
    path.insert(path.end(), more.begin(), more.end());
    EXPECT_EQ(got, PathAlone(*model, prefix, path));
  }
}

// A drafter expanding a tree one level per forward keeps the levels in its cache: each new token
// continues a chosen slot, whose state is a pending node's (the first child's in place, the
// others replayed from the committed state).
TEST(RecurrentState, ATreeHeldInTheCacheAcrossForwardsContinuesEachNodesState) {
  auto model = Qwen35();
  const int32_t nv = model->config().n_vocab;
  const std::vector<int32_t> prefix = Tokens(20, nv);
  const std::vector<int32_t> t = Tokens(6, nv, 41);
  Batch batch;
  model->ForwardChain(prefix, 0, 0, batch, false);
  batch.Clear();
  batch.Add(t[0], 20, 0, -1, true);  // r, slot 20
  model->Forward(batch);
  batch.Clear();
  batch.Add(t[1], 21, 0, -1, true, 20);  // x, slot 21
  batch.Add(t[2], 21, 0, -1, true, 20);  // y, slot 22
  model->Forward(batch);
  batch.Clear();
  batch.Add(t[3], 22, 0, -1, true, 21);  // under x
  batch.Add(t[4], 22, 0, -1, true, 22);  // under y
  batch.Add(t[5], 22, 0, -1, true, 22);  // under y
  const std::vector<float> rows = Copy(model->Forward(batch));
  const std::vector<std::vector<int32_t>> paths = {
      {t[0], t[1], t[3]}, {t[0], t[2], t[4]}, {t[0], t[2], t[5]}};
  for (std::size_t k = 0; k < paths.size(); ++k) {
    const std::vector<float> alone = PathAlone(*model, prefix, paths[k]);
    EXPECT_TRUE(std::equal(alone.begin(), alone.end(), rows.begin() + k * nv)) << "path " << k;
  }
}

// Speculative greedy == plain greedy through the recurrent state's rewinds, with a draft that is
// itself a Gated DeltaNet model (one layer) and with the target as its own draft.
// The same for qwen35moe, whose layers also route through experts and a shared expert.
void ExpectChainGreedyEqualsPlain(const std::string& arch, bool self_draft) {
  ModelOptions options{.n_threads = 2, .n_ctx = 256};
  auto target = testing::MakeRandomModel(FamilyTestSpec(arch, GgmlType::kQ8_0), options);
  options.pool = target->shared_pool();
  auto draft =
      testing::MakeRandomModel(self_draft ? FamilyTestSpec(arch, GgmlType::kQ8_0)
                                          : testing::FamilyDraftSpec(arch, GgmlType::kQ8_0),
                               options);
  ModelDrafter drafter(*draft, *target);
  const SamplerParams greedy{.temperature = 0.0f};
  TreePlanInputs inputs;
  inputs.acceptance = {0.6, 0.2, 0.1};
  const SpeculationPolicy policy = ResolveSpeculation({.plan = "chain:4"}, inputs, drafter, greedy);
  const SessionOptions session_options{.n_predict = 48, .stop_at_eog = false};
  const std::vector<int32_t> prompt = Tokens(30, target->config().n_vocab);
  const std::vector<int32_t> plain = GeneratePlain(*target, prompt, greedy, session_options, {});
  SpeculativeSession session(*target, drafter, policy, session_options);
  EXPECT_EQ(session.Generate(prompt, {}), plain);
  if (self_draft) {
    EXPECT_GE(session.stats().tau(), 2.0) << "τ = " << session.stats().tau();
  }
}

class HybridSpeculation : public ::testing::TestWithParam<bool> {};

TEST_P(HybridSpeculation, ChainGreedyEqualsPlainTokenForToken) {
  ExpectChainGreedyEqualsPlain("qwen35", GetParam());
}

class HybridMixtureSpeculation : public ::testing::TestWithParam<bool> {};

TEST_P(HybridMixtureSpeculation, ChainGreedyEqualsPlainTokenForToken) {
  ExpectChainGreedyEqualsPlain("qwen35moe", GetParam());
}

// Every tree plan is lossless over recurrent state: speculative greedy == plain greedy, with a
// Gated DeltaNet draft that itself drafts its trees level by level, and with the target as its
// own draft (long accepted paths). At temperature > 0, target-sample verification draws what
// plain sampling draws, so the sampled text is equal too.
void ExpectTreesEqualPlain(const std::string& arch, bool self_draft) {
  ModelOptions options{.n_threads = 2, .n_ctx = 256};
  auto target = testing::MakeRandomModel(FamilyTestSpec(arch, GgmlType::kQ8_0), options);
  options.pool = target->shared_pool();
  auto draft =
      testing::MakeRandomModel(self_draft ? FamilyTestSpec(arch, GgmlType::kQ8_0)
                                          : testing::FamilyDraftSpec(arch, GgmlType::kQ8_0),
                               options);
  ModelDrafter drafter(*draft, *target);
  TreePlanInputs inputs;
  inputs.acceptance = {0.6, 0.2, 0.1};
  const std::vector<int32_t> prompt = Tokens(24, target->config().n_vocab);
  const SamplerParams greedy{.temperature = 0.0f};
  const SamplerParams hot{.temperature = 0.8f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = 5};
  for (const SamplerParams& sampling : {greedy, hot}) {
    const SessionOptions session_options{.n_predict = 32, .stop_at_eog = false, .sequence = 3};
    const std::vector<int32_t> plain =
        GeneratePlain(*target, prompt, sampling, session_options, {});
    for (const char* plan : {"sequoia:10", "kconfig:2,2,1", "opt:10,0.05", "chain:3", "auto:8"}) {
      SCOPED_TRACE(std::string(plan) + " temperature " + std::to_string(sampling.temperature));
      const SpeculationPolicy policy =
          ResolveSpeculation({.plan = plan, .verify = sampling.greedy() ? "" : "target-sample"},
                             inputs, drafter, sampling);
      SpeculativeSession session(*target, drafter, policy, session_options);
      EXPECT_EQ(session.Generate(prompt, {}), plain);
      // The state's part of the step is measured apart from the verify forward.
      const StepTimes& times = session.stats().times;
      EXPECT_GT(times.state, 0.0);
      EXPECT_GT(times.verify_forward, 0.0);
      EXPECT_LE(times.total(), session.stats().total_seconds * 1.0001);
      // A static plan with the target as its draft accepts long paths. (auto rightly finds that
      // a draft as costly as the target does not pay, and mostly decodes plainly.)
      if (self_draft && sampling.greedy() && !policy.plan.is_auto()) {
        EXPECT_GE(session.stats().tau(), 2.0) << "τ = " << session.stats().tau();
      }
    }
  }
}

TEST_P(HybridSpeculation, TreesGreedyAndSampledEqualPlainTokenForToken) {
  ExpectTreesEqualPlain("qwen35", GetParam());
}

TEST_P(HybridMixtureSpeculation, TreesGreedyAndSampledEqualPlainTokenForToken) {
  ExpectTreesEqualPlain("qwen35moe", GetParam());
}

// Several sequences' trees verified in one forward, with forks of a shared prompt: each
// sequence gets what it gets alone, under every schedule policy.
TEST(HybridScheduler, EveryPolicyGivesEachSequenceWhatItGetsAlone) {
  auto target = testing::MakeRandomModel(FamilyTestSpec("qwen35", GgmlType::kQ8_0),
                                         {.n_threads = 2, .n_ctx = 160, .n_seq = 3});
  auto draft = testing::MakeRandomModel(testing::FamilyDraftSpec("qwen35", GgmlType::kQ8_0),
                                        {.pool = target->shared_pool(), .n_ctx = 160});
  const int32_t nv = target->config().n_vocab;
  std::vector<SequenceRequest> requests;
  for (int i = 0; i < 4; ++i) {
    SequenceRequest q{.prompt = Tokens(16 + 3 * (i % 2), nv, 11 + (i % 2)),
                      .sequence = 200u + i,
                      .n_predict = 24};
    if (i >= 2) q.shares_prompt_with = i - 2;  // forks of requests 0 and 1
    requests.push_back(q);
  }
  const SamplerParams greedy{.temperature = 0.0f};
  std::vector<std::vector<int32_t>> alone;
  for (const SequenceRequest& q : requests) {
    alone.push_back(GeneratePlain(*target, q.prompt, greedy,
                                  {.n_predict = q.n_predict, .sequence = q.sequence}, {}));
  }
  ModelDrafter drafter(*draft, *target);
  const SpeculationPolicy speculation =
      ResolveSpeculation({.plan = "sequoia:8"}, {.acceptance = {0.6, 0.2, 0.1}}, drafter, greedy);
  for (SchedulePolicy policy : kAllSchedulePolicies) {
    SCOPED_TRACE(std::string(SchedulePolicyName(policy)));
    Scheduler scheduler(*target, DraftSource::FromModel(draft->parameters(), *target->parameters()),
                        {.policy = policy, .speculation = speculation, .node_budget = 40});
    const std::vector<SequenceResult> results = scheduler.Run(requests);
    ASSERT_EQ(results.size(), requests.size());
    for (std::size_t i = 0; i < results.size(); ++i)
      EXPECT_EQ(results[i].tokens, alone[i]) << "sequence " << i;
    EXPECT_EQ(target->kv().in_use(), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Drafts, HybridSpeculation, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "self" : "one_layer"; });
INSTANTIATE_TEST_SUITE_P(Drafts, HybridMixtureSpeculation, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "self" : "one_layer"; });

// Files that are not what they say.
std::string Qwen35File(const std::string& name, const std::function<void(GgufWriter&)>& edit,
                       const std::string& drop = "", const std::string& arch = "qwen35") {
  const std::string src = TempPath(arch + "-" + name + "-original.gguf");
  RandomModelWriter(FamilyTestSpec(arch, GgmlType::kF32)).WriteFile(src);
  auto file = GgufFile::Open(src);
  GgufWriter w(file->alignment());
  for (const auto& [key, value] : file->metadata()) w.SetValue(key, value);
  if (edit) edit(w);
  for (const GgufTensor& t : file->tensors()) {
    if (t.name == drop) continue;
    const GgufTensor* tensor = &t;
    w.AddTensor(t.name, t.shape, t.type, [tensor](std::span<uint8_t> out) {
      std::memcpy(out.data(), tensor->data, out.size());
    });
  }
  const std::string path = TempPath(arch + "-" + name + ".gguf");
  w.WriteFile(path);
  return path;
}

void ExpectLoadError(const std::string& path, const std::string& expected,
                     ComputeDevice device = ComputeDevice::kCpu) {
  try {
    Model::Load(path, {.n_threads = 1, .n_ctx = 64, .device = device});
    ADD_FAILURE() << "loaded; expected an error containing: " << expected;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
}

TEST(HybridFiles, InconsistentGatedDeltaNetKeysAreNamed) {
  ExpectLoadError(
      Qwen35File("inner", [](GgufWriter& w) { w.SetUint32("qwen35.ssm.inner_size", 96); }),
      "'qwen35.ssm.inner_size' = 96 is not ssm.state_size 32 x ssm.time_step_rank 4");
  ExpectLoadError(
      Qwen35File("kernel", [](GgufWriter& w) { w.SetUint32("qwen35.ssm.conv_kernel", 0); }),
      "'qwen35.ssm.conv_kernel' = 0 is out of range");
  ExpectLoadError(
      Qwen35File("groups", [](GgufWriter& w) { w.SetUint32("qwen35.ssm.group_count", 3); }),
      "'qwen35.ssm.group_count' = 3 does not divide ssm.time_step_rank 4");
  const int32_t sections[] = {8, 0, 0, 0};
  ExpectLoadError(Qwen35File("sections",
                             [&](GgufWriter& w) {
                               w.SetInt32Array("qwen35.rope.dimension_sections", sections);
                             }),
                  "leaves rotary pair 1 to the fourth section");
  const int32_t negative[] = {-1, 8, 8, 0};
  ExpectLoadError(Qwen35File("negative-section",
                             [&](GgufWriter& w) {
                               w.SetInt32Array("qwen35.rope.dimension_sections", negative);
                             }),
                  "'qwen35.rope.dimension_sections' entry 0 = -1 is out of range");
  // A delta state of 4096^2 floats per head, 8 heads: 512 MiB per layer and sequence.
  ExpectLoadError(Qwen35File("huge-state",
                             [](GgufWriter& w) {
                               w.SetUint32("qwen35.ssm.state_size", 4096);
                               w.SetUint32("qwen35.ssm.time_step_rank", 8);
                               w.SetUint32("qwen35.ssm.inner_size", 4096 * 8);
                             }),
                  "is a delta state of 134217728 floats per layer, above grove's 67108864");
}

TEST(HybridFiles, AMissingSsmTensorIsNamed) {
  ExpectLoadError(Qwen35File("no-dt", {}, "blk.1.ssm_dt.bias"),
                  "missing tensor 'blk.1.ssm_dt.bias'");
  ExpectLoadError(Qwen35File("no-conv", {}, "blk.0.ssm_conv1d.weight"),
                  "missing tensor 'blk.0.ssm_conv1d.weight'");
}

// qwen35moe's shared expert: each of its tensors is required and named, its width is the key's.
TEST(HybridFiles, AMissingOrMisshapenSharedExpertIsNamed) {
  for (const char* tensor : {"blk.2.ffn_gate_inp_shexp.weight", "blk.3.ffn_gate_shexp.weight",
                             "blk.0.ffn_up_shexp.weight", "blk.1.ffn_down_shexp.weight"}) {
    ExpectLoadError(Qwen35File(std::string("no-") + tensor, {}, tensor, "qwen35moe"),
                    std::string("missing tensor '") + tensor + "'");
  }
  ExpectLoadError(
      Qwen35File(
          "shared-width",
          [](GgufWriter& w) { w.SetUint32("qwen35moe.expert_shared_feed_forward_length", 128); },
          "", "qwen35moe"),
      "tensor 'blk.0.ffn_gate_shexp.weight': expected 128x128, got 128x256");
}

TEST(HybridFiles, TheGpuPathRefusesGatedDeltaNetLayersByName) {
  ExpectLoadError(Qwen35File("gpu", {}), "layer 0 is gated delta-net", ComputeDevice::kCuda);
}

}  // namespace
}  // namespace grove
