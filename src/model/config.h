// Model hyper-parameters, read from GGUF metadata. Model shape is data, never a template parameter:
// what the family does differently (family.h) and the numbers the file gives (widths, window, rope
// bases) are resolved here once, so the forward pass reads plain fields.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/family.h"
#include "model/layer_kind.h"

namespace grove {

class GgufFile;

// Rotary embedding of one kind of layer (Gemma 3's local layers rotate with their own base).
struct RopeFrequencies {
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;  // 1 / linear scaling factor
};

// YaRN's blend of interpolated and extrapolated frequencies (rope.scaling.type "yarn"), as
// llama.cpp applies it to every layer: ext_factor 0 is plain linear scaling.
struct YarnScaling {
  float ext_factor = 0.0f;
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
};

// The shape of a Gated DeltaNet layer (Qwen3.5), from `<arch>.ssm.*` as llama.cpp reads them:
// n_k_heads (group_count) heads of query and key of d_state each, n_v_heads (time_step_rank)
// heads of value of d_state each (inner_size = d_state x n_v_heads), a causal conv1d of
// conv_kernel taps over the q, k and v channels. Value head h reads key head h % n_k_heads (the
// converter orders the value heads for ggml's broadcast, which tiles).
struct GatedDeltaNetShape {
  int32_t conv_kernel = 0;
  int32_t d_state = 0;
  int32_t n_k_heads = 0;
  int32_t n_v_heads = 0;

  int32_t key_dim() const { return d_state * n_k_heads; }
  int32_t value_dim() const { return d_state * n_v_heads; }
  int32_t conv_dim() const { return 2 * key_dim() + value_dim(); }  // channels of q, k, v
  // Floats of one sequence's state on one layer: conv_kernel - 1 inputs and the delta-rule state.
  int64_t conv_state_size() const { return int64_t{conv_kernel - 1} * conv_dim(); }
  int64_t delta_state_size() const { return int64_t{n_v_heads} * d_state * d_state; }
};

struct ModelConfig {
  std::string arch;  // general.architecture
  const ModelFamily* family = nullptr;
  std::string name;  // general.name, if present
  int32_t n_vocab = 0;
  int32_t n_embd = 0;  // model width (dim)
  int32_t n_layer = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;  // grouped-query attention: n_head % n_head_kv == 0
  int32_t head_dim = 0;   // n_embd / n_head unless attention.key_length says otherwise
  int32_t n_ff = 0;       // gated feed-forward hidden width (in a mixture, its widest expert's)
  // A mixture of experts (family feed_forward kExperts, ops/experts.h): n_expert gated
  // feed-forwards of n_ff_expert each, n_expert_used of them per token.
  int32_t n_expert = 0;
  int32_t n_expert_used = 0;
  int32_t n_ff_expert = 0;
  // The shared expert's width (family shared_expert; 0 without one).
  int32_t n_ff_shared = 0;
  int32_t n_ctx_train = 0;
  int32_t n_rot = 0;  // dimensions of each head that RoPE rotates (rope.dimension_count)
  float rms_eps = 1e-5f;
  RopeFrequencies rope;        // global layers (every layer but Gemma 3's local ones)
  RopeFrequencies rope_local;  // layers that see a window, when the family rotates them apart
  bool local_rope = false;     // local layers use rope_local
  // LongRoPE (Phi-3.5, Phi-4-mini): cos and sin are scaled by this (attention sharpening), and the
  // long factors apply when the context exceeds the original context length.
  float rope_attn_factor = 1.0f;
  int32_t rope_orig_ctx = 0;  // LongRoPE's and YaRN's original context
  YarnScaling yarn;
  // Sliding-window attention: a token at position p sees keys at positions > p - sliding_window
  // on the layers marked local (0: no window anywhere).
  int32_t sliding_window = 0;
  std::vector<uint8_t> local_layers;   // (n_layer) 1 where the window applies
  std::vector<LayerKind> layer_kinds;  // (n_layer) what each layer computes (layer_kind.h)
  float query_scale = 0.0f;            // attention logits = query_scale * q.k
  float embedding_scale = 1.0f;        // token embeddings are multiplied by it
  float logit_softcap = 0.0f;          // logits = c * tanh(logits / c) when > 0
  bool tied_output = false;            // no output.weight: logits reuse token_embd
  GatedDeltaNetShape gdn;              // layers of kind kGatedDeltaNet (family.gated_delta_net)
  // What the file holds that grove reads and does not apply (unknown keys, a window the family
  // does not use): the loader passes them to the log once (ModelParameters).
  std::vector<std::string> notes;

  int32_t q_dim() const { return n_head * head_dim; }
  int32_t kv_dim() const { return n_head_kv * head_dim; }
  bool is_recurrent(int32_t layer) const {
    return layer_kinds[layer].mixer == MixerKind::kGatedDeltaNet;
  }
  bool has_recurrent_layers() const;
  bool is_local(int32_t layer) const { return sliding_window > 0 && local_layers[layer] != 0; }
  int32_t n_local_layers() const;
  // Parameters in the weight matrices and norms.
  int64_t n_params() const;
};

// Reads and validates the config of a GGUF model of a family grove runs. n_vocab comes from the
// token embedding tensor, since vocab-less files exist. Throws grove::Error naming the key that is
// missing or wrong; keys that grove does not apply are listed in `notes`.
ModelConfig ConfigFromGguf(const GgufFile& gguf);

}  // namespace grove
