// The forward pass against a naive reference written here, contract 2 (a row's logits do not depend
// on the batch), KV cache compaction, the real stories260K model, and malformed model files.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <span>
#include <vector>

#include "base/error.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "kernels/kernel_set.h"
#include "llama_cpp_reference.h"
#include "model/model.h"
#include "model/random_model.h"
#include "quant/quant.h"
#include "sample/sampler.h"
#include "test_support.h"
#include "tokenize/tokenizer.h"

namespace grove {
namespace {

using testing::ForkContinuesAsParent;
using testing::MakeRandomModel;
using testing::TinySpec;

// Textbook Llama forward in double precision over a causal sequence, straight from the GGUF tensors
// (dequantized). It shares no code with the engine but DequantizeRow. Returns (n, n_vocab) logits.
class ReferenceLlama {
 public:
  explicit ReferenceLlama(const Model& model) : c_(model.config()), gguf_(model.gguf()) {}

  std::vector<double> Forward(const std::vector<int32_t>& tokens) {
    const int n = static_cast<int>(tokens.size());
    const int d = c_.n_embd, hd = c_.head_dim, kvd = c_.kv_dim();
    std::vector<std::vector<double>> x(n);
    auto embd = Matrix("token_embd.weight");
    for (int i = 0; i < n; ++i)
      x[i].assign(embd.begin() + tokens[i] * d, embd.begin() + (tokens[i] + 1) * d);
    for (int l = 0; l < c_.n_layer; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      auto wq = Matrix(p + "attn_q.weight"), wk = Matrix(p + "attn_k.weight"),
           wv = Matrix(p + "attn_v.weight");
      auto wo = Matrix(p + "attn_output.weight");
      std::vector<std::vector<double>> q(n), k(n), v(n);
      for (int i = 0; i < n; ++i) {
        auto h = Norm(x[i], Matrix(p + "attn_norm.weight"));
        q[i] = MatVec(wq, h, c_.q_dim());
        k[i] = MatVec(wk, h, kvd);
        v[i] = MatVec(wv, h, kvd);
        Rope(q[i], i, c_.n_head);
        Rope(k[i], i, c_.n_head_kv);
      }
      for (int i = 0; i < n; ++i) {
        std::vector<double> att(c_.q_dim(), 0.0);
        for (int h = 0; h < c_.n_head; ++h) {
          const int g = h / (c_.n_head / c_.n_head_kv);
          std::vector<double> s(i + 1);
          double max = -1e300;
          for (int j = 0; j <= i; ++j) {
            double dot = 0;
            for (int e = 0; e < hd; ++e) dot += q[i][h * hd + e] * k[j][g * hd + e];
            s[j] = dot / std::sqrt(static_cast<double>(hd));
            max = std::max(max, s[j]);
          }
          double sum = 0;
          for (double& e : s) sum += (e = std::exp(e - max));
          for (int j = 0; j <= i; ++j) {
            for (int e = 0; e < hd; ++e) att[h * hd + e] += s[j] / sum * v[j][g * hd + e];
          }
        }
        auto o = MatVec(wo, att, d);
        for (int e = 0; e < d; ++e) x[i][e] += o[e];
      }
      auto wg = Matrix(p + "ffn_gate.weight"), wu = Matrix(p + "ffn_up.weight"),
           wd = Matrix(p + "ffn_down.weight");
      for (int i = 0; i < n; ++i) {
        auto h = Norm(x[i], Matrix(p + "ffn_norm.weight"));
        auto gate = MatVec(wg, h, c_.n_ff), up = MatVec(wu, h, c_.n_ff);
        for (int e = 0; e < c_.n_ff; ++e) gate[e] = gate[e] / (1 + std::exp(-gate[e])) * up[e];
        auto o = MatVec(wd, gate, d);
        for (int e = 0; e < d; ++e) x[i][e] += o[e];
      }
    }
    auto out = Matrix(gguf_.FindTensor("output.weight") ? "output.weight" : "token_embd.weight");
    std::vector<double> logits;
    for (int i = 0; i < n; ++i) {
      auto h = Norm(x[i], Matrix("output_norm.weight"));
      auto row = MatVec(out, h, c_.n_vocab);
      logits.insert(logits.end(), row.begin(), row.end());
    }
    return logits;
  }

 private:
  std::vector<double> Matrix(const std::string& name) {
    const GgufTensor& t = gguf_.GetTensor(name);
    const int64_t n_in = t.shape[0], n_out = t.n_elements() / n_in;
    std::vector<float> row(n_in);
    std::vector<double> m;
    for (int64_t r = 0; r < n_out; ++r) {
      DequantizeRow(t.type, t.data + r * GgmlRowBytes(t.type, n_in), row.data(), n_in);
      m.insert(m.end(), row.begin(), row.end());
    }
    return m;
  }
  static std::vector<double> MatVec(const std::vector<double>& m, const std::vector<double>& x,
                                    int n_out) {
    const std::size_t n_in = x.size();
    std::vector<double> y(n_out, 0.0);
    for (int o = 0; o < n_out; ++o) {
      for (std::size_t k = 0; k < n_in; ++k) y[o] += m[o * n_in + k] * x[k];
    }
    return y;
  }
  std::vector<double> Norm(const std::vector<double>& x, const std::vector<double>& w) const {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double scale = 1.0 / std::sqrt(ss / x.size() + c_.rms_eps);
    std::vector<double> y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) y[i] = x[i] * scale * w[i];
    return y;
  }
  void Rope(std::vector<double>& x, int pos, int n_heads) const {
    for (int h = 0; h < n_heads; ++h) {
      for (int i = 0; i < c_.n_rot / 2; ++i) {
        const double theta =
            pos * c_.rope.freq_scale * std::pow(c_.rope.freq_base, -2.0 * i / c_.n_rot);
        double& a = x[h * c_.head_dim + 2 * i];
        double& b = x[h * c_.head_dim + 2 * i + 1];
        const double a0 = a, b0 = b;
        a = a0 * std::cos(theta) - b0 * std::sin(theta);
        b = a0 * std::sin(theta) + b0 * std::cos(theta);
      }
    }
  }

  const ModelConfig& c_;
  const GgufFile& gguf_;
};

std::vector<int32_t> SomeTokens(int n, int32_t n_vocab, int salt = 0) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = (i * 37 + 11 + salt * 101) % n_vocab;
  return t;
}

// Max |a - b| relative to the largest |b|.
double RelativeError(std::span<const float> a, const std::vector<double>& b) {
  double max_diff = 0, max_ref = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    max_diff = std::max(max_diff, std::abs(a[i] - b[i]));
    max_ref = std::max(max_ref, std::abs(b[i]));
  }
  return max_diff / max_ref;
}

struct TypeBound {
  GgmlType type;
  double bound;  // relative error of logits vs the double-precision reference
};

class ForwardVsReference : public ::testing::TestWithParam<TypeBound> {};

TEST_P(ForwardVsReference, PrefillAndDecodeMatchReference) {
  auto model = MakeRandomModel(TinySpec(GetParam().type), {.n_threads = 2});
  const std::vector<int32_t> tokens = SomeTokens(12, model->config().n_vocab);
  const std::vector<double> ref = ReferenceLlama(*model).Forward(tokens);
  const int32_t nv = model->config().n_vocab;

  // Prefill all at once, logits for every row.
  Batch batch;
  batch.AddChain(tokens, 0, 0, /*all_logits=*/true);
  std::span<const float> logits = model->Forward(batch);
  ASSERT_EQ(logits.size(), tokens.size() * nv);
  EXPECT_LT(RelativeError(logits, ref), GetParam().bound);

  // Token-by-token decode gives the same rows.
  model->cache(0).Clear();
  std::vector<float> stepwise;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    batch.Clear();
    batch.Add(tokens[i], static_cast<int32_t>(i), 0, -1, true);
    auto row = model->Forward(batch);
    stepwise.insert(stepwise.end(), row.begin(), row.end());
  }
  EXPECT_LT(RelativeError(stepwise, ref), GetParam().bound);
}

// Quantized weights are exact in the reference (it dequantizes them too); what remains is f32
// accumulation and, for q8_0/q4_0, the activations quantized to 8 bits.
TEST(ForwardVsReference, TiedOutputUsesTokenEmbedding) {
  RandomModelSpec spec = TinySpec(GgmlType::kF32);
  spec.tied_output = true;
  auto model = MakeRandomModel(spec, {.n_threads = 2});
  ASSERT_TRUE(model->config().tied_output);
  const std::vector<int32_t> tokens = SomeTokens(5, model->config().n_vocab);
  Batch batch;
  batch.AddChain(tokens, 0, 0, true);
  EXPECT_LT(RelativeError(model->Forward(batch), ReferenceLlama(*model).Forward(tokens)), 1e-4);
}

// Q8_0 and Q4_0 matrices are regrouped at load where the kernels have group kernels (AVX2 and
// AVX-512); grouped or not, the logits meet the reference's bound.
TEST(ForwardVsReference, GroupedAndRowWeightsBothMatchReference) {
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_0}) {
    auto grouped = MakeRandomModel(TinySpec(type), {.n_threads = 2});
    auto rows = MakeRandomModel(TinySpec(type), {.n_threads = 2, .group_weights = false});
    EXPECT_EQ(rows->grouped_bytes(), 0u);
    if (ActiveKernels().group_q8_0 != nullptr) {
      EXPECT_GT(grouped->grouped_bytes(), 0u) << GgmlTypeName(type);
    }
    const std::vector<int32_t> tokens = SomeTokens(9, grouped->config().n_vocab);
    const std::vector<double> ref = ReferenceLlama(*rows).Forward(tokens);
    for (Model* model : {grouped.get(), rows.get()}) {
      Batch batch;
      batch.AddChain(tokens, 0, 0, /*all_logits=*/true);
      EXPECT_LT(RelativeError(model->Forward(batch), ref), 3e-2) << GgmlTypeName(type);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Types, ForwardVsReference,
    ::testing::Values(TypeBound{GgmlType::kF32, 1e-4}, TypeBound{GgmlType::kF16, 1e-4},
                      TypeBound{GgmlType::kBF16, 1e-4}, TypeBound{GgmlType::kQ8_0, 3e-2},
                      TypeBound{GgmlType::kQ4_0, 3e-2}),
    [](const auto& info) { return std::string(GgmlTypeName(info.param.type)); });

// A 64-node tree: node i > 0 hangs under node (i - 1) / 3 (a ternary tree in BFS order), above a
// committed prefix. Returns the batch.
Batch TernaryTree(int n, int32_t prefix_len, int32_t n_vocab) {
  Batch b;
  std::vector<int32_t> depth(n, 0);
  for (int i = 0; i < n; ++i) {
    const int32_t parent = i == 0 ? -1 : (i - 1) / 3;
    depth[i] = parent < 0 ? 0 : depth[parent] + 1;
    b.Add((i * 53 + 7) % n_vocab, prefix_len + depth[i], 0, parent, true);
  }
  return b;
}

// Runs `prefix` in the model's cache 0 and returns a ternary tree of n nodes above it (not run).
Batch RunPrefixForTree(Model& model, const std::vector<int32_t>& prefix, int n) {
  Batch batch;
  batch.AddChain(prefix, 0, 0);
  model.Forward(batch);
  return TernaryTree(n, model.cache(0).length(), model.config().n_vocab);
}

// `view`: the logits of `next` continuing, in the cache, the kept path `nodes` of `tree` above
// `prefix`. They must equal those of the same tokens run from an empty cache as one chain.
void ExpectEqualToRecomputed(Model& model, std::span<const float> view,
                             const std::vector<int32_t>& prefix, const Batch& tree,
                             std::initializer_list<int32_t> nodes, int32_t next) {
  const std::vector<float> continued(view.begin(), view.end());
  std::vector<int32_t> full = prefix;
  for (int32_t node : nodes) full.push_back(tree.tokens[node]);
  full.push_back(next);
  model.cache(0).Clear();
  Batch batch;
  batch.AddChain(full, 0, 0);
  const std::span<const float> fresh = model.Forward(batch);
  ASSERT_EQ(continued.size(), fresh.size());
  EXPECT_EQ(0, std::memcmp(continued.data(), fresh.data(), fresh.size_bytes()));
}

class Contract2 : public ::testing::TestWithParam<GgmlType> {};

TEST_P(Contract2, TreeBatchRowsEqualEachPathRunAlone) {
  auto model = MakeRandomModel(TinySpec(GetParam()), {.n_threads = 2});
  const int32_t nv = model->config().n_vocab;
  const std::vector<int32_t> prefix = SomeTokens(9, nv, 3);
  Batch batch;
  batch.AddChain(prefix, 0, 0);
  model->Forward(batch);
  const int32_t prefix_len = model->cache(0).length();

  const int n = 64;
  Batch tree = TernaryTree(n, prefix_len, nv);
  std::span<const float> tree_logits_view = model->Forward(tree);
  const std::vector<float> tree_logits(tree_logits_view.begin(), tree_logits_view.end());
  EXPECT_EQ(model->cache(0).length(), prefix_len + n);

  for (int node = 0; node < n; ++node) {
    // Root-to-node path, run alone as a causal chain after the same prefix.
    std::vector<int32_t> path;
    for (int j = node; j >= 0; j = tree.parents[j]) path.insert(path.begin(), tree.tokens[j]);
    model->cache(0).Truncate(prefix_len);
    Batch chain;
    chain.AddChain(path, prefix_len, 0);
    std::span<const float> alone = model->Forward(chain);
    ASSERT_EQ(alone.size(), static_cast<std::size_t>(nv));
    EXPECT_EQ(0, std::memcmp(alone.data(), tree_logits.data() + static_cast<std::size_t>(node) * nv,
                             nv * sizeof(float)))
        << "node " << node << " differs between the tree batch and its path alone";
  }
}

TEST_P(Contract2, TokenAloneEqualsTokenInsideBatch) {
  auto model = MakeRandomModel(TinySpec(GetParam()), {.n_threads = 2});
  const int32_t nv = model->config().n_vocab;
  const std::vector<int32_t> tokens = SomeTokens(64, nv, 5);
  Batch batch;
  batch.AddChain(tokens, 0, 0, true);
  std::span<const float> view = model->Forward(batch);
  const std::vector<float> all(view.begin(), view.end());
  // Each token decoded alone after its prefix gives bit-identical logits.
  for (int i : {0, 1, 31, 63}) {
    model->cache(0).Truncate(0);
    if (i > 0) {
      Batch prefix;
      prefix.AddChain(std::span<const int32_t>(tokens).first(i), 0, 0);
      model->Forward(prefix);
    }
    Batch one;
    one.Add(tokens[i], i, 0, -1, true);
    std::span<const float> alone = model->Forward(one);
    EXPECT_EQ(0, std::memcmp(alone.data(), all.data() + static_cast<std::size_t>(i) * nv,
                             nv * sizeof(float)))
        << "token " << i;
  }
}

// 20 tokens: attention on the calling thread; 100: over 2^18 multiply-adds (ops/parallel.h), so
// its shares go to whichever threads claim them.
TEST_P(Contract2, ThreadCountDoesNotChangeLogits) {
  auto one = MakeRandomModel(TinySpec(GetParam()), {.n_threads = 1});
  for (int threads : {2, 3}) {
    auto more = MakeRandomModel(TinySpec(GetParam()), {.n_threads = threads});
    for (int32_t n : {20, 100}) {
      one->cache(0).Clear();
      more->cache(0).Clear();
      Batch batch;
      batch.AddChain(SomeTokens(n, one->config().n_vocab), 0, 0, true);
      std::span<const float> a = one->Forward(batch);
      std::span<const float> b = more->Forward(batch);
      ASSERT_EQ(a.size(), b.size());
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size_bytes()))
          << threads << " threads, " << n << " tokens";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, Contract2,
                         ::testing::Values(GgmlType::kF32, GgmlType::kF16, GgmlType::kQ8_0,
                                           GgmlType::kQ4_0),
                         [](const auto& info) { return std::string(GgmlTypeName(info.param)); });

TEST(KvCache, CompactThenContinueEqualsRecompute) {
  auto model = MakeRandomModel(TinySpec(GgmlType::kF32), {.n_threads = 2});
  const int32_t nv = model->config().n_vocab;
  const std::vector<int32_t> prefix = SomeTokens(7, nv, 1);
  const Batch tree = RunPrefixForTree(*model, prefix, 13);
  const int32_t p = model->cache(0).length();
  model->Forward(tree);
  Batch batch;
  // Accept the path 0 -> 2 -> 8 (depths 0, 1, 2), drop the rest.
  model->cache(0).Compact(p, std::vector<int32_t>{p + 0, p + 2, p + 8});
  ASSERT_EQ(model->cache(0).length(), p + 3);
  const int32_t next = 99 % nv;
  batch.Clear();
  batch.Add(next, p + 3, 0, -1, true);
  ExpectEqualToRecomputed(*model, model->Forward(batch), prefix, tree, {0, 2, 8}, next);
}

// An f16 cache (--cache-type f16) holds half the bytes, and its slots move and fork as a float
// cache's do: a compacted tree path continues with the bits of recomputing it, and a forked
// sequence continues as its parent would.
TEST(KvCache, HalfFloatCacheCompactsAndForksAsItComputes) {
  const ModelOptions f16{.n_threads = 2, .n_seq = 2, .cache_type = KvCacheType::kF16};
  auto model = MakeRandomModel(TinySpec(GgmlType::kQ8_0), f16);
  auto floats = MakeRandomModel(TinySpec(GgmlType::kQ8_0), {.n_threads = 2, .n_seq = 2});
  EXPECT_EQ(model->cache_type(), KvCacheType::kF16);
  EXPECT_EQ(2 * model->cache(0).bytes(), floats->cache(0).bytes());
  EXPECT_EQ(2 * model->cache(0).bytes_for(40), floats->cache(0).bytes_for(40));
  EXPECT_THROW(model->cache(0).key(0, 0), Error);  // rows of another type

  const int32_t nv = model->config().n_vocab;
  const std::vector<int32_t> prefix = SomeTokens(7, nv, 1);
  const Batch tree = RunPrefixForTree(*model, prefix, 13);
  const int32_t p = model->cache(0).length();
  model->Forward(tree);
  model->cache(0).Compact(p, std::vector<int32_t>{p + 0, p + 2, p + 8});
  Batch batch;
  batch.Add(99 % nv, p + 3, 0, -1, true);
  ExpectEqualToRecomputed(*model, model->Forward(batch), prefix, tree, {0, 2, 8}, 99 % nv);

  // The f16 cache rounds keys and values, so its logits differ from the float cache's, but by
  // less than what 8-bit weights (the same model's, in f32) change in them.
  const std::vector<int32_t> tokens = SomeTokens(40, nv, 5);
  auto all_logits = [&](Model& m) {
    m.cache(0).Clear();
    Batch chain;
    chain.AddChain(tokens, 0, 0, /*all_logits=*/true);
    const std::span<const float> out = m.Forward(chain);
    return std::vector<float>(out.begin(), out.end());
  };
  auto max_diff = [](const std::vector<float>& x, const std::vector<float>& y) {
    float d = 0;
    for (std::size_t i = 0; i < x.size(); ++i) d = std::max(d, std::abs(x[i] - y[i]));
    return d;
  };
  const std::vector<float> half = all_logits(*model), full = all_logits(*floats);
  const std::vector<float> unquantized =
      all_logits(*MakeRandomModel(TinySpec(GgmlType::kF32), {.n_threads = 2}));
  const float rounding = max_diff(half, full);
  std::printf("f16 cache against f32: max |logit difference| %g; q8_0 weights against f32: %g\n",
              rounding, max_diff(full, unquantized));
  EXPECT_GT(rounding, 0.0f) << "no rounding at all: the cache kept floats";
  EXPECT_LT(rounding, max_diff(full, unquantized));

  // A fork copies half-float rows.
  EXPECT_TRUE(ForkContinuesAsParent(*model, tokens, 30));
}

// A draft model expands a tree one level per forward pass, each level continuing from the cache
// slots of the previous one: every node's logits must equal those of the whole tree in one batch.
TEST(KvCache, LevelByLevelTreeEqualsOneBatch) {
  auto model = MakeRandomModel(TinySpec(GgmlType::kQ8_0), {.n_threads = 2});
  const int32_t nv = model->config().n_vocab;
  const Batch tree =
      RunPrefixForTree(*model, SomeTokens(6, nv, 4), 13);  // levels: {0}, {1..3}, {4..12}
  const int32_t p = model->cache(0).length();
  Batch batch;
  std::span<const float> view = model->Forward(tree);
  const std::vector<float> whole(view.begin(), view.end());

  model->cache(0).Truncate(p);
  std::vector<int32_t> slot_of(13, -1);
  for (auto [begin, end] : {std::pair{0, 1}, std::pair{1, 4}, std::pair{4, 13}}) {
    batch.Clear();
    const int32_t first_slot = model->cache(0).length();
    for (int node = begin; node < end; ++node) {
      const int32_t parent = tree.parents[node];
      batch.Add(tree.tokens[node], tree.positions[node], 0, -1, true,
                parent < 0 ? Batch::kContinueCache : slot_of[parent]);
    }
    std::span<const float> level = model->Forward(batch);
    for (int node = begin; node < end; ++node) {
      slot_of[node] = first_slot + (node - begin);
      EXPECT_EQ(0,
                std::memcmp(level.data() + static_cast<std::size_t>(node - begin) * nv,
                            whole.data() + static_cast<std::size_t>(node) * nv, nv * sizeof(float)))
          << "node " << node;
    }
  }
  // Siblings broke the chain right after node 0's first child.
  EXPECT_EQ(model->cache(0).chain_length(), p + 2);
  const std::vector<int32_t> kept = {slot_of[0], slot_of[3], slot_of[12]};
  model->cache(0).Compact(p, kept);
  EXPECT_EQ(model->cache(0).chain_length(), p + 3);
}

// A pipeline stage commits the root of its tree and keeps the subtree of the hit child (pipe/):
// the kept nodes keep their tree, and a token continuing one of them sees exactly its path.
TEST(KvCache, KeepSubtreeThenContinueEqualsRecompute) {
  auto model = MakeRandomModel(TinySpec(GgmlType::kF32), {.n_threads = 2});
  const int32_t nv = model->config().n_vocab;
  const std::vector<int32_t> prefix = SomeTokens(7, nv, 5);
  const Batch tree = RunPrefixForTree(*model, prefix, 13);  // node 2's children: 7, 8, 9
  const int32_t p = model->cache(0).length();
  model->Forward(tree);
  Batch batch;
  const std::vector<int32_t> kept = {p + 2, p + 7, p + 8, p + 9};
  model->cache(0).KeepSubtree(p + 1, kept);  // node 0 committed
  KvCache& cache = model->cache(0);
  ASSERT_EQ(cache.length(), p + 5);
  EXPECT_EQ(cache.parent(p + 1), p);
  for (int32_t slot : {p + 2, p + 3, p + 4}) EXPECT_EQ(cache.parent(slot), p + 1);
  EXPECT_EQ(cache.chain_length(), p + 3);  // node 0, node 2, node 7
  const int32_t next = 77 % nv;
  batch.Clear();
  batch.Add(next, tree.positions[8] + 1, 0, -1, true, /*cache_parent=*/p + 3);  // under node 8
  ExpectEqualToRecomputed(*model, model->Forward(batch), prefix, tree, {0, 2, 8}, next);
}

TEST(KvCache, KeepSubtreeRefusesAnOrphan) {
  KvCache cache(1, 8, 4);
  cache.Append(5);
  cache.SetSlot(2, 2, 1, 0);
  cache.SetSlot(3, 3, 2, 0);
  cache.SetSlot(4, 3, 2, 0);
  const std::vector<int32_t> orphan = {3};  // its parent, slot 2, is neither kept nor before 2
  EXPECT_THROW(cache.KeepSubtree(2, orphan), Error);
  const std::vector<int32_t> with_parent = {2, 4};
  cache.KeepSubtree(2, with_parent);
  EXPECT_EQ(cache.length(), 4);
  EXPECT_EQ(cache.parent(3), 2);
}

TEST(KvCache, RejectsBadCompaction) {
  KvCache cache(1, 8, 4);
  cache.Append(6);
  const std::vector<int32_t> decreasing = {4, 3};
  EXPECT_THROW(cache.Compact(2, decreasing), Error);
  const std::vector<int32_t> out_of_range = {7};
  EXPECT_THROW(cache.Compact(2, out_of_range), Error);
  const std::vector<int32_t> in_prefix = {1};
  EXPECT_THROW(cache.Compact(2, in_prefix), Error);
  EXPECT_THROW(cache.Truncate(7), Error);
}

TEST(Model, MultipleSequencesInOneBatchAreIndependent) {
  auto model = MakeRandomModel(TinySpec(GgmlType::kF32), {.n_threads = 2, .n_seq = 2});
  const int32_t nv = model->config().n_vocab;
  const auto a = SomeTokens(5, nv, 1), b = SomeTokens(6, nv, 2);
  Batch both;
  both.AddChain(a, 0, 0);
  both.AddChain(b, 0, 1);
  std::span<const float> view = model->Forward(both);
  const std::vector<float> together(view.begin(), view.end());
  for (int s = 0; s < 2; ++s) model->cache(s).Clear();
  Batch only_b;
  only_b.AddChain(b, 0, 1);
  std::span<const float> alone = model->Forward(only_b);
  EXPECT_EQ(0, std::memcmp(alone.data(), together.data() + nv, nv * sizeof(float)));
}

// Pipeline stages (ForwardLayers): a model run as three stages, each a context of its own over the
// same parameters with its own caches, gives the whole forward's logits bit for bit, for a prompt
// and then a token tree continuing it; a middle stage's output is its hidden states.
TEST(Model, StagesChainedEqualTheWholeForward) {
  RandomModelSpec spec = TinySpec(GgmlType::kQ8_0);
  spec.n_layer = 5;
  auto whole = MakeRandomModel(spec, {.n_threads = 2});
  const int32_t nv = whole->config().n_vocab, d = whole->config().n_embd;
  const std::vector<std::pair<int32_t, int32_t>> ranges = {{0, 2}, {2, 3}, {3, 5}};
  std::vector<std::unique_ptr<Model>> stages;
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    stages.push_back(Model::Create(whole->parameters(), {.n_threads = 2}));
  }
  auto run_stages = [&](const Batch& batch) {
    std::vector<float> hidden;
    std::span<const float> out;
    for (std::size_t i = 0; i < stages.size(); ++i) {
      out = stages[i]->ForwardLayers(batch, ranges[i].first, ranges[i].second, hidden);
      if (i + 1 < stages.size()) {
        EXPECT_EQ(out.size(), static_cast<std::size_t>(batch.size()) * d);
        EXPECT_EQ(out.data(), stages[i]->hidden_states().data());
      }
      hidden.assign(out.begin(), out.end());
    }
    return hidden;
  };
  Batch prompt;
  prompt.AddChain(SomeTokens(7, nv, 3), 0, 0);
  const std::span<const float> expected_prompt = whole->Forward(prompt);
  const std::vector<float> prompt_logits(expected_prompt.begin(), expected_prompt.end());
  EXPECT_EQ(run_stages(prompt), prompt_logits);
  // A tree: two children of the cache's last token, one grandchild under the second.
  Batch tree;
  tree.Add(11, 7, 0, -1, true);
  tree.Add(12, 7, 0, -1, true);
  tree.Add(13, 8, 0, 1, true);
  const std::span<const float> expected_tree = whole->Forward(tree);
  const std::vector<float> tree_logits(expected_tree.begin(), expected_tree.end());
  ASSERT_EQ(tree_logits.size(), 3u * nv);
  EXPECT_EQ(run_stages(tree), tree_logits);
  for (const auto& stage : stages) EXPECT_EQ(stage->cache(0).length(), 10);
}

TEST(Model, StagesRefuseBadRangesAndHiddenSizes) {
  auto model = MakeRandomModel(TinySpec(GgmlType::kF32), {.n_threads = 1});
  Batch batch;
  batch.AddChain(SomeTokens(3, model->config().n_vocab, 1), 0, 0);
  const std::vector<float> wrong(5, 0.0f);
  EXPECT_THROW(model->ForwardLayers(batch, 1, 1, {}), Error);
  EXPECT_THROW(model->ForwardLayers(batch, 0, 3, {}), Error);  // the model has 2 layers
  EXPECT_THROW(model->ForwardLayers(batch, -1, 1, {}), Error);
  EXPECT_THROW(model->ForwardLayers(batch, 1, 2, wrong), Error);
  EXPECT_THROW(model->ForwardLayers(batch, 0, 1, wrong), Error);  // the first stage embeds
  EXPECT_EQ(model->cache(0).length(), 0);                         // nothing changed
}

// Barriers per decoded token (issue 3): per layer one dispatch for Q/K/V, one for attention, one
// for the output projection, one for gate/up/SwiGLU, one for down (norms of a few rows run on the
// calling thread); one more for the logits.
// Decoding dispatches to the pool only where splitting pays (ops/parallel.h): a tiny model runs
// every op on the calling thread; a wide one splits its four matmuls per layer (Q/K/V fused,
// output projection, gate/up/SwiGLU fused, down) and the logits, and nothing else.
TEST(Model, DecodeDispatchesPerToken) {
  for (const bool wide : {false, true}) {
    RandomModelSpec spec = TinySpec(GgmlType::kQ8_0);
    if (wide) {
      spec.n_embd = 768;
      spec.n_head = 12;
      spec.n_head_kv = 4;
      spec.n_ff = 2048;
      spec.n_vocab = 1024;
    }
    auto model = MakeRandomModel(spec, {.n_threads = 2});
    const int32_t nv = model->config().n_vocab;
    Batch prefix;
    prefix.AddChain(SomeTokens(4, nv, 3), 0, 0);
    model->Forward(prefix);
    Batch one;
    one.Add(SomeTokens(1, nv, 4)[0], 4, 0, -1, true);
    const uint64_t before = model->pool().dispatch_count();
    model->Forward(one);
    EXPECT_EQ(model->pool().dispatch_count() - before, wide ? 4u * model->config().n_layer + 1 : 0u)
        << wide;
  }
}

// A prompt longer than max_batch runs in chunks; the last logits equal one big batch bit for bit.
TEST(Model, ForwardChainSplitsLongPromptsExactly) {
  auto chunked = MakeRandomModel(TinySpec(GgmlType::kQ8_0), {.n_threads = 2, .max_batch = 8});
  auto whole = MakeRandomModel(TinySpec(GgmlType::kQ8_0), {.n_threads = 2, .max_batch = 32});
  const std::vector<int32_t> tokens = SomeTokens(21, chunked->config().n_vocab, 6);
  Batch a, b;
  std::span<const float> x = chunked->ForwardChain(tokens, 0, 0, a, true);
  std::span<const float> y = whole->ForwardChain(tokens, 0, 0, b, true);
  ASSERT_EQ(x.size(), static_cast<std::size_t>(chunked->config().n_vocab));
  EXPECT_EQ(0, std::memcmp(x.data(), y.data(), x.size_bytes()));
  EXPECT_EQ(chunked->cache(0).length(), 21);
  EXPECT_TRUE(
      chunked->ForwardChain(std::span<const int32_t>(tokens).first(3), 21, 0, a, false).empty());
}

TEST(Model, RejectsMalformedBatches) {
  auto model =
      MakeRandomModel(TinySpec(GgmlType::kF32), {.n_threads = 1, .n_ctx = 16, .max_batch = 8});
  Batch b;
  EXPECT_THROW(model->Forward(b), Error);  // empty
  b.Add(100000, 0, 0, -1, true);
  EXPECT_THROW(model->Forward(b), Error);  // token out of vocabulary
  b.Clear();
  b.Add(1, 0, 3, -1, true);
  EXPECT_THROW(model->Forward(b), Error);  // no such sequence
  b.Clear();
  b.Add(1, 0, 0, 0, true);
  EXPECT_THROW(model->Forward(b), Error);  // parent not earlier
  b.Clear();
  b.Add(1, 0, 0, -1, true, /*cache_parent=*/5);
  EXPECT_THROW(model->Forward(b), Error);  // continues a slot the cache does not hold
  b.Clear();
  b.AddChain(SomeTokens(9, 300), 0, 0);
  EXPECT_THROW(model->Forward(b), Error);  // over max_batch
  EXPECT_EQ(model->cache(0).length(), 0) << "a rejected batch must change nothing";
  for (int i = 0; i < 2; ++i) {
    b.Clear();
    b.AddChain(SomeTokens(8, 300, i), i * 8, 0);
    model->Forward(b);
  }
  b.Clear();
  b.Add(1, 16, 0, -1, true);
  try {
    model->Forward(b);
    FAIL() << "expected context full";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("context full"), std::string::npos) << e.what();
  }
}

// Writes a model whose file is valid GGUF but wrong as a llama model, and checks the error.
void ExpectModelError(const std::function<void(GgufWriter&)>& edit, const RandomModelSpec& spec,
                      const std::string& needle) {
  const std::string path = testing::TempPath("bad_model.gguf");
  GgufWriter w = RandomModelWriter(spec);
  edit(w);
  w.WriteFile(path);
  try {
    Model::Load(path);
    FAIL() << "expected an error containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
}

// A file read into memory at load (FileBacking::kCopied, what a server does with the drafters it
// swaps) is not read again: rewritten in place while the model runs, cut short even, it changes
// nothing the model computes (mapped, the next forward would die of SIGBUS).
TEST(Model, AFileCopiedAtLoadSurvivesItsFileRewrittenInPlace) {
  const std::string path = testing::TempPath("copied.gguf");
  RandomModelWriter(testing::TinySpec(GgmlType::kQ8_0)).WriteFile(path);
  auto model = Model::Load(
      path,
      {.n_threads = 2, .n_ctx = 64, .group_weights = false, .file_backing = FileBacking::kCopied});
  Batch batch;
  batch.AddChain(std::vector<int32_t>{1, 5, 9, 2}, 0, 0, /*all_logits=*/true);
  const std::span<const float> first = model->Forward(batch);
  const std::vector<float> before(first.begin(), first.end());
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);  // the same inode, cut to nothing
    out << "a draft being trained into this very file";
  }
  model->cache(0).Clear();
  const std::span<const float> again = model->Forward(batch);
  EXPECT_EQ(std::vector<float>(again.begin(), again.end()), before);
}

// A backend refuses at load a layer kind it has no op for, naming the layer (layer_kind.h); the
// kinds it lists pass.
TEST(LayerKinds, ABackendRefusesAKindItHasNoOpForNamingTheLayer) {
  const std::vector<LayerKind> layers(3);
  constexpr MixerKind kAttentionOnly[] = {MixerKind::kAttention};
  constexpr FeedForwardKind kGatedOnly[] = {FeedForwardKind::kGated};
  EXPECT_NO_THROW(
      CheckLayerKinds(layers, {.mixers = kAttentionOnly, .feed_forwards = kGatedOnly}, "cpu"));
  auto refusal = [&](const BackendKinds& kinds) {
    try {
      CheckLayerKinds(layers, kinds, "gpu");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_EQ(refusal({.mixers = {}, .feed_forwards = kGatedOnly}),
            "gpu: layer 0 is attention, which this backend has no op for");
  EXPECT_EQ(refusal({.mixers = kAttentionOnly, .feed_forwards = {}}),
            "gpu: layer 0's feed-forward is gated feed-forward, which this backend has no op for");
}

TEST(ModelMalformed, UnknownArchitecture) {
  ExpectModelError([](GgufWriter& w) { w.SetString("general.architecture", "mamba"); }, TinySpec(),
                   "unsupported architecture 'mamba'");
}

TEST(ModelMalformed, ShapeMismatchNamesTensor) {
  // Claim a wider FFN than the tensors have.
  ExpectModelError([](GgufWriter& w) { w.SetUint32("llama.feed_forward_length", 128); }, TinySpec(),
                   "tensor 'blk.0.ffn_gate.weight': expected 64x128, got 64x96");
}

TEST(ModelMalformed, MissingTensorAndBadHyperParameters) {
  RandomModelSpec spec = TinySpec();
  ExpectModelError([](GgufWriter& w) { w.SetUint32("llama.block_count", 3); }, spec,
                   "missing tensor 'blk.2.attn_norm.weight'");
  ExpectModelError([](GgufWriter& w) { w.SetUint32("llama.attention.head_count_kv", 3); }, spec,
                   "not a multiple of head_count_kv");
  ExpectModelError([](GgufWriter& w) { w.SetUint32("llama.attention.head_count", 0); }, spec,
                   "'llama.attention.head_count' = 0 is out of range");
  ExpectModelError([](GgufWriter& w) { w.SetString("llama.embedding_length", "wide"); }, spec,
                   "'llama.embedding_length' is string");
}

TEST(ModelMalformed, UnsupportedWeightTypeNamesTensor) {
  // One matrix stored as q8_1 (llama.cpp's activation type, which no model file uses for weights
  // and grove does not read).
  const std::string path = testing::TempPath("q8_1-matrix.gguf");
  testing::WriteModelWithTensorType(TinySpec(), path, "blk.1.attn_q.weight", GgmlType::kQ8_1);
  try {
    Model::Load(path, {.n_threads = 1});
    ADD_FAILURE() << "a q8_1 matrix loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'blk.1.attn_q.weight' has type q8_1"),
              std::string::npos)
        << e.what();
  }
}

// A block scale that is NaN or infinite (a damaged file) is refused at load, naming the tensor and
// the row: its block would be NaN, and through the next layers every logit. Both fields of a scale
// are checked: d (q8_0) and the min's scale (q4_1's m), written into the file's bytes; and MXFP4's
// exponent byte (0xFF is E8M0's NaN), in a dense matrix and in a mixture's experts.
TEST(ModelMalformed, NonFiniteBlockScaleNamesTensorAndRow) {
  struct Case {
    RandomModelSpec spec;
    std::string tensor;
    std::size_t field_offset;  // of the scale in the block
    uint16_t bits;             // written there, little-endian (MXFP4: 0xFF, then qs[0] = 0)
    std::string what;
  };
  RandomModelSpec mixture = testing::FamilyTestSpec("qwen3moe", GgmlType::kMXFP4);
  mixture.n_layer = 2;
  const Case cases[] = {
      {TinySpec(GgmlType::kQ8_0), "blk.1.ffn_down.weight", 0, 0x7E00 /* NaN */,
       "NaN or infinite scale"},
      {TinySpec(GgmlType::kQ4_1), "blk.1.ffn_down.weight", 2, 0xFC00 /* -inf */,
       "NaN or infinite scale"},
      {TinySpec(GgmlType::kMXFP4), "blk.1.ffn_down.weight", 0, 0x00FF,
       "an exponent of 0xFF (E8M0's NaN)"},
      {mixture, "blk.1.ffn_up_exps.weight", 0, 0x00FF, "an exponent of 0xFF (E8M0's NaN)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.tensor + " " + std::string(GgmlTypeName(c.spec.type)));
    const std::string path = testing::TempPath("bad-scale-" + c.spec.arch + "-" +
                                               std::string(GgmlTypeName(c.spec.type)));
    RandomModelWriter(c.spec).WriteFile(path);
    uint64_t at = 0, row_bytes = 0;
    {
      auto file = GgufFile::Open(path);
      const GgufTensor& t = file->GetTensor(c.tensor);
      ASSERT_EQ(t.type, c.spec.type);
      row_bytes = GgmlRowBytes(t.type, t.shape[0]);
      // Row 3, its second block.
      at = file->data_offset() + t.offset + 3 * row_bytes + GgmlTraits(t.type).type_size +
           c.field_offset;
    }
    {
      std::FILE* f = std::fopen(path.c_str(), "r+b");
      ASSERT_NE(f, nullptr);
      ASSERT_EQ(std::fseek(f, static_cast<long>(at), SEEK_SET), 0);
      ASSERT_EQ(std::fwrite(&c.bits, sizeof(c.bits), 1, f), 1u);
      std::fclose(f);
    }
    try {
      Model::Load(path, {.n_threads = 2});
      ADD_FAILURE() << "a model with a non-finite scale loaded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("tensor '" + c.tensor + "' (" +
                                           std::string(GgmlTypeName(c.spec.type)) + ") of"),
                std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find(c.what + " in block 1 of row 3"), std::string::npos)
          << e.what();
    }
  }
}

// The real model: greedy decoding from BOS reproduces llama2.c's known output.
TEST(Stories260K, GreedyFromBosMatchesKnownText) {
  const std::string path = testing::SharedPath("models/stories260K.gguf");
  GROVE_SKIP_IF_MISSING(path);
  auto model = Model::Load(path, {.n_threads = 2});
  ASSERT_NE(model->tokenizer(), nullptr);
  const Tokenizer& tok = *model->tokenizer();
  std::vector<int32_t> tokens = {tok.bos()};
  Batch batch;
  batch.AddChain(tokens, 0, 0);
  std::span<const float> logits = model->Forward(batch);
  for (int step = 0; step < 40; ++step) {
    const int32_t next = Sampler::Argmax(logits);
    tokens.push_back(next);
    batch.Clear();
    batch.Add(next, static_cast<int32_t>(tokens.size()) - 1, 0, -1, true);
    logits = model->Forward(batch);
  }
  const std::string text = tok.Decode(tokens);
  EXPECT_EQ(text.rfind("Once upon a time, there was a little girl named Lily. She loved to play "
                       "outside in the park.",
                       0),
            0u)
      << "got: " << text;
}

}  // namespace
}  // namespace grove
