// Random-weight models of a named shape, of any family grove runs (family.h), written as GGUF.
// Benchmarks of real shapes (Qwen2.5-7B, Gemma 3 1B, TinyLlama-1.1B, ...) and tests need models
// that anyone can reproduce without downloads. The vocabulary is synthetic but complete (byte
// fallback tokens plus pieces built so every SentencePiece merge has its parts), so any prompt
// tokenizes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/ggml_type.h"
#include "io/gguf_writer.h"

namespace grove {

struct RandomModelSpec {
  std::string name = "random";
  std::string arch = "llama";  // general.architecture: the family's tensors and keys are written
  int32_t n_vocab = 512;
  int32_t n_embd = 64;
  int32_t n_layer = 2;
  int32_t n_head = 4;
  int32_t n_head_kv = 2;
  int32_t n_ff = 160;
  int32_t n_ctx = 2048;
  // A mixture of experts (qwen3moe): n_expert experts of n_ff_expert, n_expert_used per token;
  // a family with a shared expert (qwen35moe) makes it n_ff wide.
  int32_t n_expert = 0;
  int32_t n_expert_used = 0;
  int32_t n_ff_expert = 0;
  int32_t head_dim = 0;  // 0: n_embd / n_head; otherwise written as attention.key_length
  int32_t n_rot = 0;     // 0: the whole head rotates
  float rope_freq_base = 10000.0f;
  float rope_freq_base_local = 0.0f;  // > 0: written as rope.freq_base_swa (Gemma 3)
  float rope_scale = 0.0f;            // > 0: linear rope scaling by this factor
  // > 0: YaRN scaling by rope_scale (rope.scaling.type "yarn") from this original context
  // (gpt-oss: 32 from 4096).
  int32_t yarn_orig_ctx = 0;
  int32_t sliding_window = 0;        // > 0: attention.sliding_window
  int32_t window_pattern = 0;        // > 0: attention.sliding_window_pattern (Gemma 3)
  bool rope_freq_factors = false;    // llama: a rope_freqs.weight tensor (Llama 3.1 style)
  int32_t longrope_orig_ctx = 0;     // phi3, > 0: LongRoPE factors and their original context
  float final_logit_softcap = 0.0f;  // gemma3, > 0: final_logit_softcapping
  float rms_eps = 1e-5f;
  // qwen35 (Gated DeltaNet layers): the ssm.* keys; value heads of ssm_state each. Every
  // full_attention_interval-th layer is attention. ssm_conv1d is written in f32 whatever `type`.
  int32_t ssm_conv_kernel = 4;
  int32_t ssm_state = 32;
  int32_t ssm_groups = 2;
  int32_t ssm_v_heads = 4;
  int32_t full_attention_interval = 4;
  GgmlType type = GgmlType::kF32;  // of the weight matrices; norms and biases are always f32
  bool tied_output = false;
  bool with_vocab = true;  // false: no tokenizer (any n_vocab, e.g. 8 for exact-distribution tests)
  // Scales of the random weights: matrices are uniform with variance matrix_gain^2 / n_in, token
  // embeddings with variance embedding_gain^2 / n_embd. Small embeddings under strong matrices
  // make the layers, not the current token, decide the next token, so that greedy text from random
  // weights varies instead of repeating one token (what tests of text need).
  float matrix_gain = 1.0f;
  float embedding_gain = 1.0f;
  // The final norm's weights are centred on it: logits scale with it (tied or not), so that the
  // next-token distributions of random weights can be as peaked as a trained model's.
  float output_norm_gain = 1.0f;
  uint64_t seed = 1;

  int32_t head_size() const { return head_dim > 0 ? head_dim : n_embd / n_head; }
};

// Shapes by name: real models' ("qwen2.5-0.5b", "qwen2.5-7b", "qwen3-0.6b", "qwen3-8b",
// "gemma3-1b", "gemma3-4b", "llama3.2-1b", "llama3.1-8b", "phi4-mini", "tinyllama-1.1b",
// "qwen3.5-0.8b", "qwen3-30b-a3b": 128 experts of 768, 8 used, 48 layers of which a run may keep
// fewer; "gpt-oss-20b": 32 experts of 2880, 4 used, 24 layers), a 68M
// draft ("draft-68m": 768 wide, 2 layers), "llama-60m" (768 wide, 8 layers, vocab 4096: 57M
// parameters, most of them in the layers, so its Q8_0 weights exceed the last-level cache and a
// forward is bound by memory; sliced to one layer it gives its own draft), "tiny" (for tests).
std::optional<RandomModelSpec> NamedModelShape(std::string_view name);
std::vector<std::string> NamedModelShapes();

// Describes the model; tensors are generated (deterministically from spec.seed) while writing.
// Throws grove::Error when the spec is not a model of its family.
GgufWriter RandomModelWriter(const RandomModelSpec& spec);

}  // namespace grove
