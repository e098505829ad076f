#include "model/config.h"

#include <cmath>
#include <limits>

#include "base/error.h"
#include "io/gguf.h"

namespace grove {
namespace {

int32_t PositiveInt(const GgufFile& gguf, const std::string& key, uint64_t max) {
  uint64_t v = gguf.GetUint(key);
  if (v == 0 || v > max)
    Fail("model: metadata '", key, "' = ", v, " is out of range (1 to ", max, ")");
  return static_cast<int32_t>(v);
}

}  // namespace

int64_t ModelConfig::n_params() const {
  int64_t per_layer = int64_t{n_embd} * q_dim() * 2 + int64_t{n_embd} * kv_dim() * 2 +
                      int64_t{n_embd} * n_ff * 3 + int64_t{n_embd} * 2;
  int64_t embed = int64_t{n_vocab} * n_embd;
  return per_layer * n_layer + embed * (tied_output ? 1 : 2) + n_embd;
}

ModelConfig ConfigFromGguf(const GgufFile& gguf) {
  ModelConfig c;
  c.arch = gguf.GetString("general.architecture");
  // Mistral-style models without sliding window and TinyLlama/SmolLM are all stored as "llama".
  if (c.arch != "llama") {
    Fail("model: unsupported architecture '", c.arch, "' (grove supports 'llama')");
  }
  const std::string p = c.arch + ".";
  c.name = gguf.GetString("general.name", "");
  constexpr uint64_t kMaxDim = 1 << 20;
  c.n_embd = PositiveInt(gguf, p + "embedding_length", kMaxDim);
  c.n_layer = PositiveInt(gguf, p + "block_count", 4096);
  c.n_ff = PositiveInt(gguf, p + "feed_forward_length", kMaxDim);
  c.n_head = PositiveInt(gguf, p + "attention.head_count", 4096);
  c.n_head_kv = gguf.Has(p + "attention.head_count_kv")
                    ? PositiveInt(gguf, p + "attention.head_count_kv", 4096)
                    : c.n_head;
  c.n_ctx_train = gguf.Has(p + "context_length")
                      ? PositiveInt(gguf, p + "context_length", std::numeric_limits<int32_t>::max())
                      : 2048;
  if (c.n_head % c.n_head_kv != 0) {
    Fail("model: attention.head_count ", c.n_head, " is not a multiple of head_count_kv ",
         c.n_head_kv);
  }
  if (gguf.Has(p + "attention.key_length")) {
    c.head_dim = PositiveInt(gguf, p + "attention.key_length", kMaxDim);
    if (gguf.Has(p + "attention.value_length") &&
        gguf.GetUint(p + "attention.value_length") != static_cast<uint64_t>(c.head_dim)) {
      Fail("model: attention.value_length differs from key_length (not supported)");
    }
  } else {
    if (c.n_embd % c.n_head != 0) {
      Fail("model: embedding_length ", c.n_embd, " is not a multiple of head_count ", c.n_head);
    }
    c.head_dim = c.n_embd / c.n_head;
  }
  if (c.head_dim % 2 != 0) Fail("model: head dimension ", c.head_dim, " is odd; RoPE needs pairs");
  c.n_rot = gguf.Has(p + "rope.dimension_count")
                ? PositiveInt(gguf, p + "rope.dimension_count", c.head_dim)
                : c.head_dim;
  if (c.n_rot % 2 != 0) Fail("model: rope.dimension_count ", c.n_rot, " is odd");
  c.rms_eps = static_cast<float>(gguf.GetFloat(p + "attention.layer_norm_rms_epsilon", 1e-5));
  if (!(c.rms_eps > 0.0f && c.rms_eps < 1.0f)) {
    Fail("model: attention.layer_norm_rms_epsilon = ", c.rms_eps, " is out of range");
  }
  c.rope_freq_base = static_cast<float>(gguf.GetFloat(p + "rope.freq_base", 10000.0));
  if (!(c.rope_freq_base > 1.0f) || !std::isfinite(c.rope_freq_base)) {
    Fail("model: rope.freq_base = ", c.rope_freq_base, " is out of range");
  }
  std::string scaling = gguf.GetString(p + "rope.scaling.type", "none");
  double factor = gguf.GetFloat(p + "rope.scaling.factor", 0.0);
  if (scaling == "linear" ||
      (scaling == "none" && factor > 0.0 && !gguf.Has(p + "rope.scaling.type"))) {
    if (factor > 0.0) {
      if (!(factor >= 1.0 && factor < 1e6))
        Fail("model: rope.scaling.factor = ", factor, " is out of range");
      c.rope_freq_scale = static_cast<float>(1.0 / factor);
    }
  } else if (scaling != "none") {
    Fail("model: rope.scaling.type '", scaling, "' is not supported (supported: none, linear)");
  }
  if (gguf.Has(p + "rope.scale_linear")) {  // older files
    double f = gguf.GetFloat(p + "rope.scale_linear");
    if (!(f >= 1.0 && f < 1e6)) Fail("model: rope.scale_linear = ", f, " is out of range");
    c.rope_freq_scale = static_cast<float>(1.0 / f);
  }
  if (gguf.Has(p + "attention.sliding_window")) {
    Fail("model: sliding-window attention ('", p, "attention.sliding_window') is not supported");
  }
  const GgufTensor& embd = gguf.GetTensor("token_embd.weight");
  if (embd.shape.size() != 2 || embd.shape[0] != c.n_embd) {
    Fail("model: tensor 'token_embd.weight': expected ", c.n_embd, "xN_VOCAB, got ",
         embd.shape_string());
  }
  if (embd.shape[1] > std::numeric_limits<int32_t>::max()) Fail("model: vocabulary too large");
  c.n_vocab = static_cast<int32_t>(embd.shape[1]);
  if (gguf.Has(p + "vocab_size") &&
      gguf.GetUint(p + "vocab_size") != static_cast<uint64_t>(c.n_vocab)) {
    Fail("model: metadata '", p, "vocab_size' = ", gguf.GetUint(p + "vocab_size"),
         " but tensor 'token_embd.weight' has ", c.n_vocab, " rows");
  }
  c.tied_output = gguf.FindTensor("output.weight") == nullptr;
  return c;
}

}  // namespace grove
