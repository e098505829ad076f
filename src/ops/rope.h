// Rotary position embedding as GGUF stores Llama weights: the converter permutes Q/K rows so that
// each head rotates adjacent pairs (x[2i], x[2i+1]) by angle pos * freq_scale * base^(-2i / n_rot).
#pragma once

#include <cstdint>

namespace grove {

struct RopeParams {
  int32_t head_dim = 0;
  int32_t n_rot = 0;  // leading dimensions of each head that rotate
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;              // 1 / linear scaling factor
  const float* freq_factors = nullptr;  // (n_rot / 2) divisors of each frequency, or null
};

// Fills cos_sin with (n_rot / 2) pairs {cos, sin} for one position. Depends only on the position,
// so a token's rotation is the same alone or in any batch.
void RopeAngles(const RopeParams& p, int32_t position, float* cos_sin);

// Rotates n_heads consecutive heads of x (each head_dim long) in place.
void RopeApply(const RopeParams& p, const float* cos_sin, float* x, int32_t n_heads);

}  // namespace grove
