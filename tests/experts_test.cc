// The mixture-of-experts op (ops/experts.h) on its own: a batch's rows grouped by expert give each
// row the bits it gets alone (contract 2) and the bits of running its experts one by one, each
// expert a row chose is read once per batch, and the token loop does not allocate. Its agreement
// with llama.cpp is family_test's (qwen3moe).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <span>
#include <vector>

#include "allocation_counter.h"
#include "io/gguf.h"
#include "llama_cpp_reference.h"
#include "model/batch.h"
#include "model/model.h"
#include "model/random_model.h"
#include "ops/experts.h"
#include "ops/feed_forward.h"
#include "quant/quant.h"
#include "quant/quantize_file.h"
#include "test_support.h"

namespace grove {
namespace {

constexpr int32_t kExperts = 8;
constexpr int32_t kUsed = 3;
constexpr int64_t kEmbd = 64;
constexpr int64_t kFf = 32;
constexpr int32_t kMaxRows = 64;

// Random weights of one layer's experts in `type`, held for the views.
struct Mixture {
  explicit Mixture(GgmlType type) {
    const auto matrix = [type](std::vector<uint8_t>& bytes, int64_t n_in, int64_t n_out,
                               uint32_t seed) {
      const std::vector<float> v = testing::RandomNormal(n_in * n_out, seed, 0.3f);
      const int64_t row = GgmlRowBytes(type, n_in);
      bytes.resize(row * n_out);
      for (int64_t r = 0; r < n_out; ++r)
        QuantizeRow(type, v.data() + r * n_in, &bytes[r * row], n_in);
      return WeightView{type, bytes.data(), n_in, n_out, row};
    };
    w.router = matrix(router, kEmbd, kExperts, 1);
    w.gate = matrix(gate, kEmbd, kFf * kExperts, 2);
    w.up = matrix(up, kEmbd, kFf * kExperts, 3);
    w.down = matrix(down, kFf, kEmbd * kExperts, 4);
    w.n_expert = kExperts;
    w.n_used = kUsed;
  }
  std::vector<uint8_t> router, gate, up, down;
  ExpertWeights w;
};

class ExpertsTest : public ::testing::TestWithParam<GgmlType> {};

TEST_P(ExpertsTest, BatchRowsEqualEachRowAloneAndEachExpertRunByItself) {
  const Mixture m(GetParam());
  ThreadPool pool(2);
  MatMulScratch matmul(kMaxRows, std::max(kEmbd, kFf));
  ExpertScratch scratch(kMaxRows, kExperts, kUsed, kEmbd, kFf);
  const std::vector<float> x = testing::RandomNormal(kMaxRows * kEmbd, 9, 1.0f);
  std::vector<float> batch(kMaxRows * kEmbd);
  {
    testing::AllocationCounter allocations;
    ExpertFeedForward(m.w, GateActivation::kSilu, x.data(), kMaxRows, batch.data(), scratch, matmul,
                      pool);
    EXPECT_EQ(allocations.count(), 0);
  }
  std::set<int32_t> touched;
  std::vector<float> alone(kEmbd), logits(kExperts), probs(kExperts), weights(kUsed);
  std::vector<float> gate(kFf), up(kFf), y(kEmbd), sum(kEmbd);
  for (int32_t r = 0; r < kMaxRows; ++r) {
    const float* xr = x.data() + r * kEmbd;
    ExpertFeedForward(m.w, GateActivation::kSilu, xr, 1, alone.data(), scratch, matmul, pool);
    EXPECT_EQ(scratch.last_experts_read(), kUsed) << "one token reads only its own experts";
    ASSERT_EQ(std::memcmp(alone.data(), batch.data() + r * kEmbd, kEmbd * sizeof(float)), 0)
        << "row " << r;
    // The same row through its experts one at a time, weighted and summed by rank.
    MatMul(m.w.router, xr, 1, logits.data(), matmul, pool);
    int32_t chosen[kUsed];
    RouteRow(RouterRule::kSoftmaxTopKNormalized, logits.data(), kExperts, kUsed, chosen,
             weights.data(), probs.data());
    for (int32_t j = 0; j < kUsed; ++j) {
      const int32_t e = chosen[j];
      touched.insert(e);
      const WeightView g = ExpertWeights::Slice(m.w.gate, kExperts, e);
      const WeightView u = ExpertWeights::Slice(m.w.up, kExperts, e);
      const WeightView d = ExpertWeights::Slice(m.w.down, kExperts, e);
      GatedFeedForward({g, u, d, GateActivation::kSilu}, xr, 1, gate.data(), up.data(), y.data(),
                       matmul, pool);
      for (int64_t i = 0; i < kEmbd; ++i)
        sum[i] = j == 0 ? weights[j] * y[i] : sum[i] + weights[j] * y[i];
    }
    for (int64_t i = 0; i < kEmbd; ++i) {
      ASSERT_NEAR(sum[i], alone[i], 1e-5f * (1.0f + std::abs(sum[i]))) << "row " << r;
    }
  }
  // The batch read each expert its rows chose once: the union of the rows' choices.
  ExpertFeedForward(m.w, GateActivation::kSilu, x.data(), kMaxRows, batch.data(), scratch, matmul,
                    pool);
  EXPECT_EQ(scratch.last_experts_read(), static_cast<int32_t>(touched.size()));
}

INSTANTIATE_TEST_SUITE_P(Types, ExpertsTest, ::testing::Values(GgmlType::kF32, GgmlType::kQ8_0),
                         [](const auto& info) { return std::string(GgmlTypeName(info.param)); });

// The router's rule (Qwen3-MoE's, as llama.cpp's build_moe_ffn with softmax gating and norm_w):
// the k largest softmax probabilities, in decreasing order, divided by their sum.
TEST(RouteRow, TopKOfTheSoftmaxRenormalised) {
  const float logits[6] = {0.5f, 2.0f, -1.0f, 1.5f, 2.0f, 0.0f};
  float probs[6];
  int32_t experts[3];
  float weights[3];
  RouteRow(RouterRule::kSoftmaxTopKNormalized, logits, 6, 3, experts, weights, probs);
  // Equal logits go to the lower index first.
  EXPECT_EQ(experts[0], 1);
  EXPECT_EQ(experts[1], 4);
  EXPECT_EQ(experts[2], 3);
  double z = 0;
  for (float l : logits) z += std::exp(double{l});
  const double p1 = std::exp(2.0) / z;
  const double p3 = std::exp(1.5) / z;
  const double s = 2 * p1 + p3;
  EXPECT_NEAR(weights[0], p1 / s, 1e-6);
  EXPECT_NEAR(weights[1], p1 / s, 1e-6);
  EXPECT_NEAR(weights[2], p3 / s, 1e-6);
  EXPECT_NEAR(probs[5], 1.0 / z, 1e-6) << "probabilities are the softmax over every expert";
}

// gpt-oss's rule (llama.cpp's softmax-weight gating, norm_w false): the k largest logits, then a
// softmax over those k alone; the others' logits play no part in the weights.
TEST(RouteRow, SoftmaxOverTheTopKLogits) {
  const float logits[6] = {0.5f, 3.0f, -1.0f, 1.5f, 2.0f, 0.0f};
  float probs[6];
  int32_t experts[3];
  float weights[3];
  RouteRow(RouterRule::kTopKSoftmax, logits, 6, 3, experts, weights, probs);
  EXPECT_EQ(experts[0], 1);
  EXPECT_EQ(experts[1], 4);
  EXPECT_EQ(experts[2], 3);
  const double z = std::exp(3.0) + std::exp(2.0) + std::exp(1.5);
  EXPECT_NEAR(weights[0], std::exp(3.0) / z, 1e-6);
  EXPECT_NEAR(weights[1], std::exp(2.0) / z, 1e-6);
  EXPECT_NEAR(weights[2], std::exp(1.5) / z, 1e-6);
}

// gpt-oss's clamped SwiGLU, as ggml's swiglu_oai (alpha 1.702, limit 7): the gate clamped above
// only, the up input on both sides and shifted by one.
TEST(GatedActivation, SwigluOaiClampsAsGgml) {
  const float gate[] = {-3.0f, 0.5f, 6.0f, 9.0f, 20.0f};
  const float up[] = {0.25f, -9.0f, 2.0f, 8.0f, -0.5f};
  float out[5];
  GatedActivation(GateActivation::kSwigluOai, gate, up, out, 5);
  for (int i = 0; i < 5; ++i) {
    const double x = std::min(double{gate[i]}, 7.0);
    const double y = std::clamp(double{up[i]}, -7.0, 7.0);
    const double want = x / (1.0 + std::exp(-1.702 * x)) * (y + 1.0);
    EXPECT_NEAR(out[i], want, 1e-5 * (1.0 + std::abs(want))) << i;
  }
}

// A random f32 qwen3moe written by `grove quantize` as `target`; returns the output's path.
std::string QuantizedMixture(const std::string& target) {
  const std::string in = testing::TempPath("moe-f32-for-" + target + ".gguf");
  RandomModelWriter(testing::FamilyTestSpec("qwen3moe", GgmlType::kF32)).WriteFile(in);
  const std::string out = testing::TempPath("moe-" + target + ".gguf");
  ThreadPool pool(2);
  QuantizeFile(*GgufFile::Open(in), out, ParseQuantTarget(target), pool, {}, {});
  return out;
}

// grove quantize on a mixture: the router keeps its f32 (as llama-quantize keeps it), the experts
// take the target type, and the result loads as a qwen3moe model.
TEST(QuantizeMixture, RouterKeepsItsTypeAndExpertsAreQuantized) {
  const std::string out = QuantizedMixture("q8_0");
  auto file = GgufFile::Open(out);
  EXPECT_EQ(file->GetTensor("blk.0.ffn_gate_inp.weight").type, GgmlType::kF32);
  EXPECT_EQ(file->GetTensor("blk.0.ffn_gate_exps.weight").type, GgmlType::kQ8_0);
  EXPECT_EQ(file->GetTensor("blk.2.ffn_down_exps.weight").type, GgmlType::kQ8_0);
  auto model = Model::Load(out, {.n_threads = 1, .n_ctx = 64});
  EXPECT_EQ(model->config().n_expert, 8);
  EXPECT_EQ(model->config().n_expert_used, 2);
}

// The model says what its expert layers read in a forward (what verifying a tree costs on a
// mixture): one token reads its own n_used experts per layer, a batch the union of its rows'
// choices, a dense model nothing.
TEST(ExpertsRead, OneTokenReadsItsOwnExpertsABatchTheirUnion) {
  const RandomModelSpec spec = testing::FamilyTestSpec("qwen3moe", GgmlType::kF32);
  auto model = testing::MakeRandomModel(spec, {.n_threads = 1, .n_ctx = 64});
  Batch batch;
  batch.AddChain(std::vector<int32_t>{5}, 0, 0, /*all_logits=*/true);
  model->Forward(batch);
  EXPECT_EQ(model->experts_read().layers, spec.n_layer);
  EXPECT_EQ(model->experts_read().experts, int64_t{spec.n_expert_used} * spec.n_layer);
  std::vector<int32_t> tokens;
  for (int32_t i = 0; i < 24; ++i) tokens.push_back((11 + 53 * i) % spec.n_vocab);
  batch.Clear();
  batch.AddChain(tokens, 1, 0, /*all_logits=*/true);
  model->Forward(batch);
  const double per_layer = model->experts_read().per_layer();
  EXPECT_GT(per_layer, spec.n_expert_used) << "24 tokens route through more than 2 experts";
  EXPECT_LE(per_layer, spec.n_expert);

  auto dense = testing::MakeRandomModel(testing::FamilyTestSpec("qwen3", GgmlType::kF32),
                                        {.n_threads = 1, .n_ctx = 64});
  batch.Clear();
  batch.AddChain(tokens, 0, 0, /*all_logits=*/true);
  dense->Forward(batch);
  EXPECT_EQ(dense->experts_read().layers, 0);
  EXPECT_EQ(dense->experts_read().experts, 0);
}

// llama.cpp's MXFP4_MOE: the experts MXFP4, every other matrix Q8_0 (the router kept), and a model
// that loads and decodes what the same file dequantized decodes.
TEST(QuantizeMixture, Mxfp4MoeStoresTheExpertsInMxfp4) {
  const std::string out = QuantizedMixture("mxfp4_moe");
  auto file = GgufFile::Open(out);
  EXPECT_EQ(file->GetUint("general.file_type", 0), 38u);
  EXPECT_EQ(file->GetTensor("blk.0.ffn_gate_inp.weight").type, GgmlType::kF32);
  for (const char* name :
       {"blk.0.ffn_gate_exps.weight", "blk.1.ffn_up_exps.weight", "blk.2.ffn_down_exps.weight"}) {
    EXPECT_EQ(file->GetTensor(name).type, GgmlType::kMXFP4) << name;
  }
  for (const char* name :
       {"blk.0.attn_q.weight", "blk.2.attn_output.weight", "output.weight", "token_embd.weight"}) {
    EXPECT_EQ(file->GetTensor(name).type, GgmlType::kQ8_0) << name;
  }
  const std::string exact = testing::TempPath("moe-mxfp4-dequantized.gguf");
  testing::WriteDequantizedCopy(out, exact);
  auto model = Model::Load(out, {.n_threads = 1, .n_ctx = 64});
  auto reference = Model::Load(exact, {.n_threads = 1, .n_ctx = 64});
  std::vector<int32_t> tokens;
  for (int32_t i = 0; i < 16; ++i) tokens.push_back((7 + 37 * i) % model->config().n_vocab);
  Batch batch;
  batch.AddChain(tokens, 0, 0, /*all_logits=*/true);
  const std::span<const float> logits = model->Forward(batch);
  const std::vector<float> got(logits.begin(), logits.end());
  const std::span<const float> want = reference->Forward(batch);
  ASSERT_EQ(got.size(), want.size());
  // The kernels quantize activations to 8 bits (ActQ8), the dequantized copy does not: the
  // logits agree to that rounding, not bit for bit.
  double max_diff = 0, max_abs = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    max_diff = std::max(max_diff, static_cast<double>(std::fabs(got[i] - want[i])));
    max_abs = std::max(max_abs, static_cast<double>(std::fabs(want[i])));
  }
  EXPECT_LT(max_diff, 0.05 * max_abs) << "largest logit " << max_abs;
  EXPECT_GT(max_diff, 0.0) << "the MXFP4 file computed in f32: its kernels did not run";
}

}  // namespace
}  // namespace grove
