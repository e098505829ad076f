#include "ops/rope.h"

#include <algorithm>
#include <cmath>

namespace grove {

namespace {

// The dimension (of n_rot) whose pair turns `turns` times over n_ctx_orig positions.
float YarnCorrectionDim(const RopeParams& p, float turns) {
  constexpr float kPi = 3.14159265358979323846f;
  return static_cast<float>(p.n_rot) *
         std::log(static_cast<float>(p.n_ctx_orig) / (turns * 2.0f * kPi)) /
         (2.0f * std::log(p.freq_base));
}

}  // namespace

void YarnCorrectionDims(const RopeParams& p, float dims[2]) {
  const float start = std::floor(YarnCorrectionDim(p, p.beta_fast));
  const float end = std::ceil(YarnCorrectionDim(p, p.beta_slow));
  dims[0] = std::max(0.0f, start);
  dims[1] = std::min(static_cast<float>(p.n_rot - 1), end);
}

void RopeAngles(const RopeParams& p, int32_t position, float* cos_sin) {
  // Angles in double: at position 100k the float product pos * theta would carry errors of ~0.01
  // rad.
  const double pos = static_cast<double>(position);
  float dims[2] = {0.0f, 0.0f};
  double mscale = p.attn_factor;
  if (p.ext_factor != 0.0f) {
    YarnCorrectionDims(p, dims);
    mscale *= 1.0 + 0.1 * std::log(1.0 / static_cast<double>(p.freq_scale));
  }
  for (int32_t i = 0; i < p.n_rot / 2; ++i) {
    double extrap = pos * std::pow(static_cast<double>(p.freq_base), -2.0 * i / p.n_rot);
    if (p.freq_factors) extrap /= p.freq_factors[i];
    double theta = extrap * p.freq_scale;
    if (p.ext_factor != 0.0f) {
      const double y = (i - dims[0]) / std::max(0.001, static_cast<double>(dims[1] - dims[0]));
      const double ramp = (1.0 - std::clamp(y, 0.0, 1.0)) * p.ext_factor;
      theta = theta * (1.0 - ramp) + extrap * ramp;
    }
    cos_sin[2 * i] = static_cast<float>(std::cos(theta) * mscale);
    cos_sin[2 * i + 1] = static_cast<float>(std::sin(theta) * mscale);
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
