#include "model/random_model.h"

#include <cmath>
#include <cstring>

#include "base/error.h"
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

uint64_t HashName(std::string_view s, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ seed;
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  return h;
}

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

}  // namespace

std::optional<RandomModelSpec> NamedModelShape(std::string_view name) {
  RandomModelSpec s;
  s.name = std::string(name);
  if (name == "tinyllama-1.1b") {
    s.n_vocab = 32000, s.n_embd = 2048, s.n_layer = 22, s.n_head = 32, s.n_head_kv = 4,
    s.n_ff = 5632;
  } else if (name == "draft-68m") {
    s.n_vocab = 32000, s.n_embd = 768, s.n_layer = 2, s.n_head = 12, s.n_head_kv = 12,
    s.n_ff = 3072;
  } else if (name == "llama-60m") {
    s.n_vocab = 4096, s.n_embd = 768, s.n_layer = 8, s.n_head = 12, s.n_head_kv = 4, s.n_ff = 2048;
  } else if (name == "tiny") {
    s.n_vocab = 512, s.n_embd = 64, s.n_layer = 2, s.n_head = 4, s.n_head_kv = 2, s.n_ff = 160;
  } else {
    return std::nullopt;
  }
  return s;
}

std::vector<std::string> NamedModelShapes() {
  return {"tinyllama-1.1b", "draft-68m", "llama-60m", "tiny"};
}

GgufWriter RandomModelWriter(const RandomModelSpec& spec) {
  if (!IsSupportedWeightType(spec.type))
    Fail("random model: type ", GgmlTypeName(spec.type), " is not supported");
  const int64_t block = GgmlTraits(spec.type).block_size;
  if (spec.n_embd % spec.n_head != 0 || spec.n_head % spec.n_head_kv != 0) {
    Fail("random model: heads (", spec.n_head, "/", spec.n_head_kv, ") do not divide width ",
         spec.n_embd);
  }
  if (spec.n_embd % block != 0 || spec.n_ff % block != 0) {
    Fail("random model: widths ", spec.n_embd, " and ", spec.n_ff, " must be multiples of the ",
         GgmlTypeName(spec.type), " block size ", block);
  }
  GgufWriter w;
  w.SetString("general.architecture", "llama");
  w.SetString("general.name", spec.name);
  w.SetUint32("llama.context_length", spec.n_ctx);
  w.SetUint32("llama.embedding_length", spec.n_embd);
  w.SetUint32("llama.block_count", spec.n_layer);
  w.SetUint32("llama.feed_forward_length", spec.n_ff);
  w.SetUint32("llama.attention.head_count", spec.n_head);
  w.SetUint32("llama.attention.head_count_kv", spec.n_head_kv);
  w.SetUint32("llama.rope.dimension_count", spec.n_embd / spec.n_head);
  w.SetFloat32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.SetFloat32("llama.rope.freq_base", spec.rope_freq_base);
  if (spec.with_vocab) AddVocab(w, spec.n_vocab);

  const uint64_t seed = spec.seed;
  // Uniform(-a, a) with a = sqrt(3 / n_in) has variance 1 / n_in, so activations keep their scale
  // through each matrix and the logits are neither flat nor saturated.
  auto matrix = [&](const std::string& name, int64_t n_in, int64_t n_out) {
    const GgmlType type = spec.type;
    w.AddTensor(name, {n_in, n_out}, type, [name, n_in, n_out, type, seed](std::span<uint8_t> out) {
      SplitMix rng(HashName(name, seed));
      const float a = std::sqrt(3.0f / static_cast<float>(n_in));
      std::vector<float> row(n_in);
      const int64_t row_bytes = GgmlRowBytes(type, n_in);
      for (int64_t r = 0; r < n_out; ++r) {
        for (float& v : row) v = a * rng.Symmetric();
        QuantizeRow(type, row.data(), out.data() + r * row_bytes, n_in);
      }
    });
  };
  auto norm = [&](const std::string& name, int64_t n) {
    w.AddTensor(name, {n}, GgmlType::kF32, [name, n, seed](std::span<uint8_t> out) {
      SplitMix rng(HashName(name, seed));
      for (int64_t i = 0; i < n; ++i) {
        float v = 1.0f + 0.1f * rng.Symmetric();
        std::memcpy(out.data() + i * 4, &v, 4);
      }
    });
  };
  const int32_t head_dim = spec.n_embd / spec.n_head;
  const int32_t kv_dim = spec.n_head_kv * head_dim;
  matrix("token_embd.weight", spec.n_embd, spec.n_vocab);
  for (int32_t i = 0; i < spec.n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    norm(p + "attn_norm.weight", spec.n_embd);
    matrix(p + "attn_q.weight", spec.n_embd, spec.n_embd);
    matrix(p + "attn_k.weight", spec.n_embd, kv_dim);
    matrix(p + "attn_v.weight", spec.n_embd, kv_dim);
    matrix(p + "attn_output.weight", spec.n_embd, spec.n_embd);
    norm(p + "ffn_norm.weight", spec.n_embd);
    matrix(p + "ffn_gate.weight", spec.n_embd, spec.n_ff);
    matrix(p + "ffn_up.weight", spec.n_embd, spec.n_ff);
    matrix(p + "ffn_down.weight", spec.n_ff, spec.n_embd);
  }
  norm("output_norm.weight", spec.n_embd);
  if (!spec.tied_output) matrix("output.weight", spec.n_embd, spec.n_vocab);
  return w;
}

}  // namespace grove
