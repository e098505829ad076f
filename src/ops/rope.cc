#include "ops/rope.h"

#include <cmath>

namespace grove {

void RopeAngles(const RopeParams& p, int32_t position, float* cos_sin) {
  // Angles in double: at position 100k the float product pos * theta would carry errors of ~0.01
  // rad.
  const double pos = static_cast<double>(position) * p.freq_scale;
  for (int32_t i = 0; i < p.n_rot / 2; ++i) {
    double theta = pos * std::pow(static_cast<double>(p.freq_base), -2.0 * i / p.n_rot);
    if (p.freq_factors) theta /= p.freq_factors[i];
    cos_sin[2 * i] = static_cast<float>(std::cos(theta) * p.attn_factor);
    cos_sin[2 * i + 1] = static_cast<float>(std::sin(theta) * p.attn_factor);
  }
}

void RopeApply(const RopeParams& p, const float* cos_sin, float* x, int32_t n_heads) {
  const int32_t half = p.n_rot / 2;
  // Pair i is (x[a * i], x[a * i + b]): adjacent (a = 2, b = 1) or halves (a = 1, b = half).
  const int32_t a = p.pairing == RopePairing::kAdjacent ? 2 : 1;
  const int32_t b = p.pairing == RopePairing::kAdjacent ? 1 : half;
  for (int32_t h = 0; h < n_heads; ++h) {
    float* head = x + static_cast<int64_t>(h) * p.head_dim;
    for (int32_t i = 0; i < half; ++i) {
      const float c = cos_sin[2 * i];
      const float s = cos_sin[2 * i + 1];
      const float x0 = head[a * i];
      const float x1 = head[a * i + b];
      head[a * i] = x0 * c - x1 * s;
      head[a * i + b] = x0 * s + x1 * c;
    }
  }
}

}  // namespace grove
