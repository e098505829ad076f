#include "model/random_model.h"

#include <cmath>
#include <cstring>

#include "base/error.h"
#include "base/fnv1a.h"
#include "model/family.h"
#include "quant/quant.h"

namespace grove {
namespace {

// SplitMix64: a fast, well-mixed stream, enough for weights that only need to look like weights.
class SplitMix {
 public:
  explicit SplitMix(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [-1, 1).
  float Symmetric() {
    return static_cast<float>(static_cast<double>(Next() >> 11) * 0x1.0p-52 - 1.0);
  }

 private:
  uint64_t state_;
};

uint64_t HashName(std::string_view s, uint64_t seed) { return Fnv1a(seed).Mix(s).value(); }

// Control tokens, 256 byte tokens, then pieces over "▁" and a-z in order of length, so that every
// piece of length k > 1 splits into a piece of length k - 1 and one symbol (SentencePiece merges
// only ever join existing pieces).
void AddVocab(GgufWriter& w, int32_t n_vocab) {
  if (n_vocab < 3 + 256 + 27)
    Fail("random model: vocabulary of ", n_vocab, " is too small (>= 286)");
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    tokens.emplace_back(buf);
    types.push_back(6);
  }
  std::vector<std::string> symbols = {"\xE2\x96\x81"};
  for (char c = 'a'; c <= 'z'; ++c) symbols.emplace_back(1, c);
  std::vector<std::string> frontier = symbols;
  while (static_cast<int32_t>(tokens.size()) < n_vocab) {
    std::vector<std::string> next;
    for (const std::string& piece : frontier) {
      if (static_cast<int32_t>(tokens.size()) >= n_vocab) break;
      tokens.push_back(piece);
      types.push_back(1);
      for (const std::string& s : symbols) next.push_back(piece + s);
    }
    frontier = std::move(next);
  }
  std::vector<float> scores(tokens.size());
  for (std::size_t i = 0; i < scores.size(); ++i)
    scores[i] = types[i] == 1 ? -static_cast<float>(i) : 0.0f;
  w.SetString("tokenizer.ggml.model", "llama");
  w.SetStringArray("tokenizer.ggml.tokens", std::move(tokens));
  w.SetFloat32Array("tokenizer.ggml.scores", scores);
  w.SetInt32Array("tokenizer.ggml.token_type", types);
  w.SetUint32("tokenizer.ggml.unknown_token_id", 0);
  w.SetUint32("tokenizer.ggml.bos_token_id", 1);
  w.SetUint32("tokenizer.ggml.eos_token_id", 2);
}

// Uniform(-a, a) with a = sqrt(3 / n) has variance 1 / n.
float UniformAmplitude(float gain, int64_t n) {
  return gain * std::sqrt(3.0f / static_cast<float>(n));
}

}  // namespace

std::optional<RandomModelSpec> NamedModelShape(std::string_view name) {
  struct Shape {
    std::string_view name, arch;
    int32_t n_vocab, n_embd, n_layer, n_head, n_head_kv, n_ff, n_ctx;
    int32_t head_dim = 0;
    float rope_freq_base = 10000.0f;
    bool tied = false;
  };
  // Real models' shapes from their published configurations (what a GGUF of each holds).
  static const Shape kShapes[] = {
      {"qwen2.5-0.5b", "qwen2", 151936, 896, 24, 14, 2, 4864, 32768, 0, 1e6f, true},
      {"qwen2.5-7b", "qwen2", 152064, 3584, 28, 28, 4, 18944, 32768, 0, 1e6f},
      {"qwen3-0.6b", "qwen3", 151936, 1024, 28, 16, 8, 3072, 40960, 128, 1e6f, true},
      {"qwen3-8b", "qwen3", 151936, 4096, 36, 32, 8, 12288, 40960, 128, 1e6f},
      {"gemma3-1b", "gemma3", 262144, 1152, 26, 4, 1, 6912, 32768, 256, 1e6f, true},
      {"gemma3-4b", "gemma3", 262144, 2560, 34, 8, 4, 10240, 131072, 256, 1e6f, true},
      {"llama3.2-1b", "llama", 128256, 2048, 16, 32, 8, 8192, 131072, 0, 5e5f, true},
      {"llama3.1-8b", "llama", 128256, 4096, 32, 32, 8, 14336, 131072, 0, 5e5f},
      {"phi4-mini", "phi3", 200064, 3072, 32, 24, 8, 8192, 131072, 0, 1e4f, true},
      {"tinyllama-1.1b", "llama", 32000, 2048, 22, 32, 4, 5632, 2048},
      {"draft-68m", "llama", 32000, 768, 2, 12, 12, 3072, 2048},
      {"llama-60m", "llama", 4096, 768, 8, 12, 4, 2048, 2048},
      {"tiny", "llama", 512, 64, 2, 4, 2, 160, 2048},
      // Qwen3.5-0.8B as its config.json reads (not checked against a GGUF here): 24 layers, every
      // 4th gated attention with 8 heads of 256 (2 KV), a quarter rotating; 16 Gated DeltaNet
      // heads of 128.
      {"qwen3.5-0.8b", "qwen35", 248320, 1024, 24, 8, 2, 3584, 262144, 256, 1e7f, true},
      {"qwen3-30b-a3b", "qwen3moe", 151936, 2048, 48, 32, 4, 6144, 40960, 128, 1e6f},
      // gpt-oss-20b as its config.json reads: 24 layers of 64 query heads of 64 (8 KV), every
      // even layer through a window of 128, YaRN 32x from 4096; 32 experts of 2880, 4 used.
      {"gpt-oss-20b", "gpt-oss", 201088, 2880, 24, 64, 8, 2880, 131072, 64, 150000.0f},
  };
  for (const Shape& shape : kShapes) {
    if (shape.name != name) continue;
    RandomModelSpec s;
    s.name = std::string(name);
    s.arch = std::string(shape.arch);
    s.n_vocab = shape.n_vocab, s.n_embd = shape.n_embd, s.n_layer = shape.n_layer;
    s.n_head = shape.n_head, s.n_head_kv = shape.n_head_kv, s.n_ff = shape.n_ff;
    s.n_ctx = shape.n_ctx, s.head_dim = shape.head_dim, s.rope_freq_base = shape.rope_freq_base;
    s.tied_output = shape.tied;
    if (s.arch != "llama") s.rms_eps = 1e-6f;
    if (name == "gemma3-1b") s.sliding_window = 512;
    if (name == "gemma3-4b") s.sliding_window = 1024, s.rope_scale = 8.0f;
    if (name == "llama3.2-1b" || name == "llama3.1-8b") s.rope_freq_factors = true;
    if (name == "phi4-mini") s.n_rot = 96, s.longrope_orig_ctx = 4096, s.rms_eps = 1e-5f;
    if (name == "qwen3.5-0.8b") {
      s.n_rot = 64;
      s.ssm_state = 128, s.ssm_groups = 16, s.ssm_v_heads = 16, s.ssm_conv_kernel = 4;
    }
    if (name == "qwen3-30b-a3b") s.n_expert = 128, s.n_expert_used = 8, s.n_ff_expert = 768;
    if (name == "gpt-oss-20b") {
      s.n_expert = 32, s.n_expert_used = 4, s.n_ff_expert = 2880;
      s.sliding_window = 128, s.rope_scale = 32.0f, s.yarn_orig_ctx = 4096, s.rms_eps = 1e-5f;
    }
    return s;
  }
  return std::nullopt;
}

std::vector<std::string> NamedModelShapes() {
  return {"qwen2.5-0.5b", "qwen2.5-7b",     "qwen3-0.6b",    "qwen3-8b",
          "gemma3-1b",    "gemma3-4b",      "llama3.2-1b",   "llama3.1-8b",
          "phi4-mini",    "tinyllama-1.1b", "draft-68m",     "llama-60m",
          "tiny",         "qwen3.5-0.8b",   "qwen3-30b-a3b", "gpt-oss-20b"};
}

namespace {

// What the writer needs of a spec: heads that divide the width, widths of whole blocks of its
// weight type. Throws grove::Error.
void CheckRandomSpec(const RandomModelSpec& spec) {
  if (!CanQuantize(spec.type))
    Fail("random model: grove does not write type ", GgmlTypeName(spec.type));
  const int64_t block = GgmlTraits(spec.type).block_size;
  if (spec.n_head <= 0 || spec.n_head_kv <= 0 || spec.n_head % spec.n_head_kv != 0 ||
      (spec.head_dim == 0 && spec.n_embd % spec.n_head != 0)) {
    Fail("random model: heads (", spec.n_head, "/", spec.n_head_kv, ") do not divide width ",
         spec.n_embd);
  }
  const int32_t q_dim = spec.n_head * spec.head_size();
  if (spec.n_embd % block != 0 || spec.n_ff % block != 0 || q_dim % block != 0 ||
      spec.n_ff_expert % block != 0) {
    Fail("random model: widths ", spec.n_embd, ", ", spec.n_ff, ", ", spec.n_ff_expert, " and ",
         q_dim, " must be multiples of the ", GgmlTypeName(spec.type), " block size ", block);
  }
  const bool experts = FindFamily(spec.arch).feed_forward == FeedForwardKind::kExperts;
  if (experts != (spec.n_expert > 0) || spec.n_expert_used > spec.n_expert ||
      (experts && (spec.n_expert_used <= 0 || spec.n_ff_expert <= 0))) {
    Fail("random model: '", spec.arch, "' with ", spec.n_expert, " experts (", spec.n_expert_used,
         " used, ", spec.n_ff_expert, " wide) is not a model of its family");
  }
}

// The architecture's keys, as converters write them.
void SetHyperparameters(GgufWriter& w, const RandomModelSpec& spec, int32_t n_rot) {
  const std::string a = spec.arch + ".";
  w.SetString("general.architecture", spec.arch);
  w.SetString("general.name", spec.name);
  w.SetUint32(a + "context_length", spec.n_ctx);
  w.SetUint32(a + "embedding_length", spec.n_embd);
  w.SetUint32(a + "block_count", spec.n_layer);
  w.SetUint32(a + "feed_forward_length", spec.n_ff);
  w.SetUint32(a + "attention.head_count", spec.n_head);
  w.SetUint32(a + "attention.head_count_kv", spec.n_head_kv);
  if (spec.head_dim > 0) {
    w.SetUint32(a + "attention.key_length", spec.head_size());
    w.SetUint32(a + "attention.value_length", spec.head_size());
  }
  w.SetUint32(a + "rope.dimension_count", n_rot);
  w.SetFloat32(a + "attention.layer_norm_rms_epsilon", spec.rms_eps);
  w.SetFloat32(a + "rope.freq_base", spec.rope_freq_base);
  if (spec.rope_freq_base_local > 0.0f)
    w.SetFloat32(a + "rope.freq_base_swa", spec.rope_freq_base_local);
  if (spec.rope_scale > 0.0f) {
    w.SetString(a + "rope.scaling.type", spec.yarn_orig_ctx > 0 ? "yarn" : "linear");
    w.SetFloat32(a + "rope.scaling.factor", spec.rope_scale);
    if (spec.yarn_orig_ctx > 0)
      w.SetUint32(a + "rope.scaling.original_context_length", spec.yarn_orig_ctx);
  }
  if (spec.sliding_window > 0) w.SetUint32(a + "attention.sliding_window", spec.sliding_window);
  if (spec.window_pattern > 0)
    w.SetUint32(a + "attention.sliding_window_pattern", spec.window_pattern);
  if (spec.n_expert > 0) {
    w.SetUint32(a + "expert_count", spec.n_expert);
    w.SetUint32(a + "expert_used_count", spec.n_expert_used);
    w.SetUint32(a + "expert_feed_forward_length", spec.n_ff_expert);
    // The shared expert (qwen35moe) is n_ff wide: the spec's dense width.
    if (FindFamily(spec.arch).shared_expert)
      w.SetUint32(a + "expert_shared_feed_forward_length", spec.n_ff);
  }
  if (spec.final_logit_softcap > 0.0f)
    w.SetFloat32(a + "final_logit_softcapping", spec.final_logit_softcap);
  if (FindFamily(spec.arch).gated_delta_net) {
    w.SetUint32(a + "ssm.conv_kernel", spec.ssm_conv_kernel);
    w.SetUint32(a + "ssm.state_size", spec.ssm_state);
    w.SetUint32(a + "ssm.group_count", spec.ssm_groups);
    w.SetUint32(a + "ssm.time_step_rank", spec.ssm_v_heads);
    w.SetUint32(a + "ssm.inner_size", spec.ssm_state * spec.ssm_v_heads);
    w.SetUint32(a + "full_attention_interval", spec.full_attention_interval);
    // Rotary pairs shared among the three sections of text as Qwen3.5's [11, 11, 10, 0] shares
    // 32: the interleaved rotation gives pair i to section i % 3 (config.cc).
    const int32_t pairs = n_rot / 2;
    const int32_t sections[] = {(pairs + 2) / 3, (pairs + 1) / 3, pairs / 3, 0};
    w.SetInt32Array(a + "rope.dimension_sections", sections);
  }
  if (spec.longrope_orig_ctx > 0) {
    // As the converter writes LongRoPE: the original context and sqrt(1 + ln(s) / ln(orig)).
    const double scale = static_cast<double>(spec.n_ctx) / spec.longrope_orig_ctx;
    w.SetUint32(a + "rope.scaling.original_context_length", spec.longrope_orig_ctx);
    w.SetFloat32(a + "rope.scaling.attn_factor",
                 scale > 1.0 ? static_cast<float>(std::sqrt(
                                   1.0 + std::log(scale) / std::log(spec.longrope_orig_ctx)))
                             : 1.0f);
  }
}

// Adds tensors to a writer whose values are drawn, when the file is written, from the spec's seed
// and each tensor's name.
class RandomTensors {
 public:
  RandomTensors(GgufWriter& w, const RandomModelSpec& spec) : w_(w), spec_(spec) {}

  // Uniform(-a, a) in the spec's weight type, a row of n_in values for each of n_out (of each of
  // n_expert, a 3-D tensor of (n_in, n_out, n_expert), when n_expert > 0).
  void Matrix(const std::string& name, int64_t n_in, int64_t n_out, float amplitude,
              int64_t n_expert = 0) {
    MatrixOfType(spec_.type, name, n_in, n_out, amplitude, n_expert);
  }
  void MatrixOfType(GgmlType type, const std::string& name, int64_t n_in, int64_t n_out,
                    float amplitude, int64_t n_expert = 0) {
    const uint64_t seed = spec_.seed;
    std::vector<int64_t> shape = {n_in, n_out};
    if (n_expert > 0) shape.push_back(n_expert), n_out *= n_expert;
    w_.AddTensor(name, shape, type,
                 [name, n_in, n_out, type, seed, amplitude](std::span<uint8_t> out) {
                   SplitMix rng(HashName(name, seed));
                   std::vector<float> row(n_in);
                   const int64_t row_bytes = GgmlRowBytes(type, n_in);
                   for (int64_t r = 0; r < n_out; ++r) {
                     for (float& v : row) v = amplitude * rng.Symmetric();
                     QuantizeRow(type, row.data(), out.data() + r * row_bytes, n_in);
                   }
                 });
  }
  // Uniform(-a, a) with a = gain * sqrt(3 / n_in), of variance gain^2 / n_in: with gain 1
  // activations keep their scale through each matrix.
  void Weight(const std::string& name, int64_t n_in, int64_t n_out, int64_t n_expert = 0) {
    Matrix(name, n_in, n_out, UniformAmplitude(spec_.matrix_gain, n_in), n_expert);
  }
  // The router of a mixture in f32, as converters write it and llama.cpp's quantize keeps it.
  void Router(const std::string& name, int64_t n_in, int64_t n_out) {
    MatrixOfType(GgmlType::kF32, name, n_in, n_out, UniformAmplitude(spec_.matrix_gain, n_in));
  }
  // f32: center + spread * Uniform(-1, 1).
  void Vector(const std::string& name, int64_t n, float center, float spread) {
    const uint64_t seed = spec_.seed;
    w_.AddTensor(name, {n}, GgmlType::kF32,
                 [name, n, seed, center, spread](std::span<uint8_t> out) {
                   SplitMix rng(HashName(name, seed));
                   for (int64_t i = 0; i < n; ++i) {
                     const float v = center + spread * rng.Symmetric();
                     std::memcpy(out.data() + i * 4, &v, 4);
                   }
                 });
  }
  void Norm(const std::string& name, int64_t n) { Vector(name, n, 1.0f, 0.1f); }
  // Uniform(-a, a) kept in f32 whatever the spec's type (llama.cpp keeps ssm_conv1d in f32).
  void F32Matrix(const std::string& name, int64_t n_in, int64_t n_out, float amplitude) {
    const uint64_t seed = spec_.seed;
    w_.AddTensor(name, {n_in, n_out}, GgmlType::kF32,
                 [name, n_in, n_out, seed, amplitude](std::span<uint8_t> out) {
                   SplitMix rng(HashName(name, seed));
                   for (int64_t i = 0; i < n_in * n_out; ++i) {
                     const float v = amplitude * rng.Symmetric();
                     std::memcpy(out.data() + i * 4, &v, 4);
                   }
                 });
  }

 private:
  GgufWriter& w_;
  const RandomModelSpec& spec_;
};

// A Gated DeltaNet layer's tensors (Qwen3.5), as llama.cpp's converter names and shapes them.
void AddGatedDeltaNet(RandomTensors& t, const RandomModelSpec& spec, const std::string& p) {
  const int32_t key_dim = spec.ssm_state * spec.ssm_groups;
  const int32_t value_dim = spec.ssm_state * spec.ssm_v_heads;
  const int32_t conv_dim = 2 * key_dim + value_dim;
  t.Weight(p + "attn_qkv.weight", spec.n_embd, conv_dim);
  t.Weight(p + "attn_gate.weight", spec.n_embd, value_dim);
  t.F32Matrix(p + "ssm_conv1d.weight", spec.ssm_conv_kernel, conv_dim,
              UniformAmplitude(1.0f, spec.ssm_conv_kernel));
  // A decay exp(softplus(alpha + dt) * a) in about (0.3, 0.95): a = -exp(A_log), A_log small.
  t.Vector(p + "ssm_dt.bias", spec.ssm_v_heads, 0.0f, 1.0f);
  t.Vector(p + "ssm_a", spec.ssm_v_heads, -0.5f, 0.4f);
  t.Weight(p + "ssm_beta.weight", spec.n_embd, spec.ssm_v_heads);
  t.Weight(p + "ssm_alpha.weight", spec.n_embd, spec.ssm_v_heads);
  t.Norm(p + "ssm_norm.weight", spec.ssm_state);
  t.Weight(p + "ssm_out.weight", value_dim, spec.n_embd);
}

// Block i's tensors, as the family names and shapes them.
void AddBlock(RandomTensors& t, const ModelFamily& family, const RandomModelSpec& spec, int32_t i) {
  const int32_t head_dim = spec.head_size();
  const int32_t q_dim = spec.n_head * head_dim;
  const int32_t kv_dim = spec.n_head_kv * head_dim;
  const std::string p = "blk." + std::to_string(i) + ".";
  t.Norm(p + "attn_norm.weight", spec.n_embd);
  const bool recurrent = family.gated_delta_net && (i + 1) % spec.full_attention_interval != 0;
  if (recurrent) {
    AddGatedDeltaNet(t, spec, p);
  } else if (family.gated_attention) {
    t.Weight(p + "attn_q.weight", spec.n_embd, 2 * q_dim);  // each head's query, then its gate
    t.Weight(p + "attn_k.weight", spec.n_embd, kv_dim);
    t.Weight(p + "attn_v.weight", spec.n_embd, kv_dim);
  } else if (family.fused_qkv) {
    t.Weight(p + "attn_qkv.weight", spec.n_embd, q_dim + 2 * kv_dim);
  } else {
    t.Weight(p + "attn_q.weight", spec.n_embd, q_dim);
    t.Weight(p + "attn_k.weight", spec.n_embd, kv_dim);
    t.Weight(p + "attn_v.weight", spec.n_embd, kv_dim);
  }
  if (family.qkv_bias) {
    t.Vector(p + "attn_q.bias", q_dim, 0.0f, 0.5f);
    t.Vector(p + "attn_k.bias", kv_dim, 0.0f, 0.5f);
    t.Vector(p + "attn_v.bias", kv_dim, 0.0f, 0.5f);
  }
  if (family.qk_norm && !recurrent) {
    t.Norm(p + "attn_q_norm.weight", head_dim);
    t.Norm(p + "attn_k_norm.weight", head_dim);
  }
  if (!recurrent) t.Weight(p + "attn_output.weight", q_dim, spec.n_embd);
  if (family.output_bias) t.Vector(p + "attn_output.bias", spec.n_embd, 0.0f, 0.5f);
  // Sinks of about the scores' scale, so that some heads give a good part of their weight to none.
  if (family.attention_sinks) t.Vector(p + "attn_sinks.weight", spec.n_head, 0.0f, 2.0f);
  if (family.sandwich_norms) t.Norm(p + "post_attention_norm.weight", spec.n_embd);
  t.Norm(p + std::string(family.ffn_norm) + ".weight", spec.n_embd);
  if (family.feed_forward == FeedForwardKind::kExperts) {
    t.Router(p + "ffn_gate_inp.weight", spec.n_embd, spec.n_expert);
    t.Weight(p + "ffn_gate_exps.weight", spec.n_embd, spec.n_ff_expert, spec.n_expert);
    t.Weight(p + "ffn_up_exps.weight", spec.n_embd, spec.n_ff_expert, spec.n_expert);
    t.Weight(p + "ffn_down_exps.weight", spec.n_ff_expert, spec.n_embd, spec.n_expert);
    if (family.expert_biases) {
      t.Vector(p + "ffn_gate_inp.bias", spec.n_expert, 0.0f, 0.5f);
      t.F32Matrix(p + "ffn_gate_exps.bias", spec.n_ff_expert, spec.n_expert, 0.5f);
      t.F32Matrix(p + "ffn_up_exps.bias", spec.n_ff_expert, spec.n_expert, 0.5f);
      t.F32Matrix(p + "ffn_down_exps.bias", spec.n_embd, spec.n_expert, 0.5f);
    }
    if (family.shared_expert) {
      // Its gate is one row of n_embd, written as the 1-D vector llama.cpp declares; spread as a
      // router row's so that sigmoid(gate) varies between tokens.
      t.Vector(p + "ffn_gate_inp_shexp.weight", spec.n_embd, 0.0f,
               UniformAmplitude(spec.matrix_gain, spec.n_embd));
      t.Weight(p + "ffn_gate_shexp.weight", spec.n_embd, spec.n_ff);
      t.Weight(p + "ffn_up_shexp.weight", spec.n_embd, spec.n_ff);
      t.Weight(p + "ffn_down_shexp.weight", spec.n_ff, spec.n_embd);
    }
  } else if (family.fused_gate_up) {
    t.Weight(p + "ffn_up.weight", spec.n_embd, 2 * spec.n_ff);
    t.Weight(p + "ffn_down.weight", spec.n_ff, spec.n_embd);
  } else {
    t.Weight(p + "ffn_gate.weight", spec.n_embd, spec.n_ff);
    t.Weight(p + "ffn_up.weight", spec.n_embd, spec.n_ff);
    t.Weight(p + "ffn_down.weight", spec.n_ff, spec.n_embd);
  }
  if (family.sandwich_norms) t.Norm(p + "post_ffw_norm.weight", spec.n_embd);
}

}  // namespace

GgufWriter RandomModelWriter(const RandomModelSpec& spec) {
  const ModelFamily& family = FindFamily(spec.arch);
  CheckRandomSpec(spec);
  const int32_t n_rot = spec.n_rot > 0 ? spec.n_rot : spec.head_size();
  GgufWriter w;
  SetHyperparameters(w, spec, n_rot);
  if (spec.with_vocab) AddVocab(w, spec.n_vocab);
  RandomTensors t(w, spec);
  t.Matrix("token_embd.weight", spec.n_embd, spec.n_vocab,
           UniformAmplitude(spec.embedding_gain, spec.n_embd));
  if (spec.rope_freq_factors) {
    if (family.rope_factors != RopeFactorRule::kFrequencies)
      Fail("random model: '", spec.arch, "' has no rope_freqs");
    t.Vector("rope_freqs.weight", n_rot / 2, 2.0f, 1.0f);
  }
  if (spec.longrope_orig_ctx > 0) {
    if (family.rope_factors != RopeFactorRule::kLongShort)
      Fail("random model: '", spec.arch, "' has no LongRoPE factors");
    t.Vector("rope_factors_long.weight", n_rot / 2, 4.0f, 3.0f);
    t.Vector("rope_factors_short.weight", n_rot / 2, 1.1f, 0.1f);
  }
  for (int32_t i = 0; i < spec.n_layer; ++i) AddBlock(t, family, spec, i);
  t.Vector("output_norm.weight", spec.n_embd, spec.output_norm_gain, 0.1f * spec.output_norm_gain);
  if (!spec.tied_output) t.Weight("output.weight", spec.n_embd, spec.n_vocab);
  return w;
}

}  // namespace grove
