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
    cos_sin[2 * i] = static_cast<float>(std::cos(theta));
    cos_sin[2 * i + 1] = static_cast<float>(std::sin(theta));
  }
}

void RopeApply(const RopeParams& p, const float* cos_sin, float* x, int32_t n_heads) {
  for (int32_t h = 0; h < n_heads; ++h) {
    float* head = x + static_cast<int64_t>(h) * p.head_dim;
    for (int32_t i = 0; i < p.n_rot / 2; ++i) {
      const float c = cos_sin[2 * i];
      const float s = cos_sin[2 * i + 1];
      const float a = head[2 * i];
      const float b = head[2 * i + 1];
      head[2 * i] = a * c - b * s;
      head[2 * i + 1] = a * s + b * c;
    }
  }
}

}  // namespace grove
