// Model hyper-parameters, read from GGUF metadata. Model shape is data, never a template parameter.
#pragma once

#include <cstdint>
#include <string>

namespace grove {

class GgufFile;

struct ModelConfig {
  std::string arch;  // "llama"
  std::string name;  // general.name, if present
  int32_t n_vocab = 0;
  int32_t n_embd = 0;  // model width (dim)
  int32_t n_layer = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;  // grouped-query attention: n_head % n_head_kv == 0
  int32_t head_dim = 0;   // n_embd / n_head unless attention.key_length says otherwise
  int32_t n_ff = 0;       // SwiGLU hidden width
  int32_t n_ctx_train = 0;
  int32_t n_rot = 0;  // dimensions of each head that RoPE rotates (rope.dimension_count)
  float rms_eps = 1e-5f;
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;  // 1 / linear scaling factor
  bool tied_output = false;      // no output.weight: logits reuse token_embd

  int32_t q_dim() const { return n_head * head_dim; }
  int32_t kv_dim() const { return n_head_kv * head_dim; }
  // Parameters in the weight matrices and norms.
  int64_t n_params() const;
};

// Reads and validates the config of a llama-architecture GGUF. n_vocab comes from the token
// embedding tensor, since vocab-less files exist. Throws grove::Error naming the key that is
// missing or wrong.
ModelConfig ConfigFromGguf(const GgufFile& gguf);

}  // namespace grove
