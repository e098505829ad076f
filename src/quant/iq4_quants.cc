#include "quant/iq4_quants.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "quant/half.h"
#include "quant/iq4_levels.h"
#include "quant/nearest_int.h"

// Bit-exactness with ggml: the same float operations in the same order (a * b * c is (a * b) * c,
// int levels converted to float at each use, sums in element order), compiled with
// -ffp-contract=off (CMakeLists.txt). The algorithm is described in prose; the code is grove's own.

namespace grove {
namespace {

constexpr int kSub = 32;              // elements per scale of the search (an IQ4_XS sub-block)
constexpr int kCandidates = 7;        // the search tries level_0 + t for t in [-7, 7]
constexpr float kTinyGroup = 1e-15f;  // a group whose largest |x| is below this gets scale 0

// The index of the level nearest v (the upper one on a tie), by bisection over the sorted levels.
int NearestLevel(float v) {
  const int8_t* levels = kIq4NlLevels;
  if (v <= levels[0]) return 0;
  if (v >= levels[15]) return 15;
  int lo = 0;
  int hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (v < levels[mid]) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return v - levels[hi - 1] < levels[hi] - v ? hi - 1 : hi;
}

// The weighted sums of a grid: sum w q x and sum w q^2, q the level nearest inv_scale * x[i].
struct GridFit {
  float sum_qx = 0;
  float sum_q2 = 0;
};
GridFit FitGrid(const float* x, const float* weight, float inv_scale, uint8_t* levels) {
  GridFit fit;
  for (int i = 0; i < kSub; ++i) {
    const int l = NearestLevel(inv_scale * x[i]);
    if (levels) levels[i] = static_cast<uint8_t>(l);
    const float q = kIq4NlLevels[l];
    const float w = weight[i];
    fit.sum_qx += w * q * x[i];
    fit.sum_q2 += w * q * q;
  }
  return fit;
}

// The scale of 32 elements, weights x^2 (no importance matrix). The first grid puts the element
// of largest magnitude on the outermost level (-127, with the sign that makes it so); its
// least-squares scale is the first best. Then the grids whose outermost level is scaled to
// level_0 + t, t in [-7, 7], are tried, each with its least-squares scale, and the one of least
// weighted error (the greatest sum_qx^2 / sum_q2) kept. Returns 0 for a group of (near) zeros.
float SearchScale(const float* x) {
  float weight[kSub];
  float amax = 0;
  float max = 0;  // the element of largest magnitude, signed; the first of equals
  for (int i = 0; i < kSub; ++i) {
    weight[i] = x[i] * x[i];
    const float a = std::fabs(x[i]);
    if (a > amax) {
      amax = a;
      max = x[i];
    }
  }
  if (amax < kTinyGroup) return 0;
  const float first = -max / kIq4NlLevels[0];
  GridFit fit = FitGrid(x, weight, 1 / first, nullptr);
  float scale = fit.sum_q2 > 0 ? fit.sum_qx / fit.sum_q2 : 0.0f;
  float best = scale * fit.sum_qx;
  for (int t = -kCandidates; t <= kCandidates; ++t) {
    const float inv_scale = static_cast<float>(t + kIq4NlLevels[0]) / max;
    fit = FitGrid(x, weight, inv_scale, nullptr);
    if (fit.sum_q2 > 0 && fit.sum_qx * fit.sum_qx > best * fit.sum_q2) {
      scale = fit.sum_qx / fit.sum_q2;
      best = scale * fit.sum_qx;
    }
  }
  return scale;
}

// Level indices of n elements on the grid of `scale` (index 8, the level nearest 0, when it is 0).
void Levels(const float* x, float scale, int n, uint8_t* levels) {
  const float inv = scale != 0 ? 1 / scale : 0.0f;
  for (int i = 0; i < n; ++i) levels[i] = static_cast<uint8_t>(NearestLevel(inv * x[i]));
}

// Nibbles as IQ4_NL stores them: per 32 elements, element r < 16 in the low nibble of byte r,
// element 16 + r in its high nibble.
void PackNibbles(const uint8_t* levels, int n, uint8_t* qs) {
  for (int g = 0; g < n / kSub; ++g) {
    for (int r = 0; r < kSub / 2; ++r) {
      qs[g * 16 + r] =
          static_cast<uint8_t>(levels[g * kSub + r] | (levels[g * kSub + 16 + r] << 4));
    }
  }
}

}  // namespace

void QuantizeRowIQ4_NL(const float* src, BlockIQ4_NL* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float* x = src + b * kQBlock;
    const float scale = SearchScale(x);
    uint8_t levels[kQBlock];
    Levels(x, scale, kQBlock, levels);
    dst[b].d = Fp32ToFp16(scale);
    PackNibbles(levels, kQBlock, dst[b].qs);
  }
}

// Each 32-element sub-block's scale is searched as IQ4_NL's; the super-block scale d makes the
// sub-block of largest |scale| -32 * d (the 6-bit range is [-32, 31]), every sub-block scale is
// rounded to a multiple of d, and the levels are chosen again on the rounded grid.
void QuantizeRowIQ4_XS(const float* src, BlockIQ4_XS* dst, int64_t n_blocks) {
  constexpr int kSubs = kKBlock / kSub;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float* x = src + b * kKBlock;
    BlockIQ4_XS& out = dst[b];
    float sub_scale[kSubs];
    float amax_scale = 0;
    float max_scale = 0;
    for (int s = 0; s < kSubs; ++s) {
      sub_scale[s] = SearchScale(x + s * kSub);
      if (std::fabs(sub_scale[s]) > amax_scale) {
        amax_scale = std::fabs(sub_scale[s]);
        max_scale = sub_scale[s];
      }
    }
    const float d = -max_scale / 32;
    out.d = Fp32ToFp16(d);
    const float inv_d = d != 0 ? 1 / d : 0.0f;
    out.scales_h = 0;
    uint8_t levels[kKBlock];
    for (int s = 0; s < kSubs; ++s) {
      const int l = std::clamp(NearestInt(inv_d * sub_scale[s]), -32, 31);
      Levels(x + s * kSub, d * static_cast<float>(l), kSub, levels + s * kSub);
      const int stored = l + 32;
      const auto low = static_cast<uint8_t>(stored & 0xf);
      if (s % 2 == 0) {
        out.scales_l[s / 2] = low;
      } else {
        out.scales_l[s / 2] = static_cast<uint8_t>(out.scales_l[s / 2] | (low << 4));
      }
      out.scales_h = static_cast<uint16_t>(out.scales_h | ((stored >> 4) << (2 * s)));
    }
    PackNibbles(levels, kKBlock, out.qs);
  }
}

}  // namespace grove
