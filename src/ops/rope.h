// Rotary position embedding. Each head rotates its first n_rot dimensions in pairs, pair i by the
// angle pos * freq_scale * base^(-2i / n_rot) / factor_i. Which dimensions form pair i is the
// model's layout: adjacent ones (x[2i], x[2i+1]) in `llama` files, whose converter permutes the Q
// and K rows to that end, or halves (x[i], x[i + n_rot / 2]) as Hugging Face stores every other
// family (GPT-NeoX style). Dimensions from n_rot on pass through.
#pragma once

#include <cstdint>

namespace grove {

enum class RopePairing : uint8_t { kAdjacent, kHalves };

struct RopeParams {
  int32_t head_dim = 0;
  int32_t n_rot = 0;  // leading dimensions of each head that rotate
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;              // 1 / linear scaling factor
  const float* freq_factors = nullptr;  // (n_rot / 2) divisors of each frequency, or null
  RopePairing pairing = RopePairing::kAdjacent;
  // cos and sin are multiplied by it (LongRoPE's attention factor; 1 otherwise): both q and k are
  // scaled, so attention logits grow by its square, as in llama.cpp's ggml_rope_ext.
  float attn_factor = 1.0f;
  // YaRN (ext_factor > 0): pair i turns at theta_interp (1 - r_i) + theta_extrap r_i, where
  // theta_extrap is the unscaled angle, theta_interp = freq_scale theta_extrap, and the ramp r_i
  // (times ext_factor) is 1 for the pairs that turn more than beta_fast times over n_ctx_orig
  // positions and 0 for those that turn less than beta_slow times; cos and sin are then scaled by
  // attn_factor (1 + 0.1 ln(1 / freq_scale)). As ggml's rope_yarn, to the float.
  float ext_factor = 0.0f;
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
  int32_t n_ctx_orig = 0;
};

// YaRN's ramp ends, ggml_rope_yarn_corr_dims: the pairs i whose frequency turns beta_fast and
// beta_slow times over n_ctx_orig positions, floored and ceiled, clamped to [0, n_rot - 1].
void YarnCorrectionDims(const RopeParams& p, float dims[2]);

// Fills cos_sin with (n_rot / 2) pairs {cos, sin} for one position. Depends only on the position,
// so a token's rotation is the same alone or in any batch.
void RopeAngles(const RopeParams& p, int32_t position, float* cos_sin);

// Rotates n_heads consecutive heads of x (each head_dim long) in place.
void RopeApply(const RopeParams& p, const float* cos_sin, float* x, int32_t n_heads);

}  // namespace grove
