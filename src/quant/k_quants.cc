#include "quant/k_quants.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "quant/half.h"
#include "quant/iq4_levels.h"
#include "quant/nearest_int.h"

// Bit-exactness with ggml depends on doing the same float operations in the same order: every
// expression below keeps ggml's association (a * b * c is (a * b) * c, int operands converted to
// float first), sums run in element order, and this file is compiled with -ffp-contract=off
// (CMakeLists.txt) so no multiply-add is fused. The algorithms are described in prose; the code is
// grove's own.

namespace grove {
namespace {

constexpr int kSub4 = 32;  // Q4_K and Q5_K sub-block: one scale and min per 32 elements
constexpr int kSub6 = 16;  // Q2_K, Q3_K and Q6_K sub-block: one scale (and min) per 16

// ---- Q4_K

// How a Q2_K, Q4_K or Q5_K sub-block is fitted: ggml's make_qkx2_quants parameters for each format.
struct ScaleMinFit {
  int size;             // n: elements per sub-block, 16 (Q2_K) or 32
  int max_level;        // nmax: 3 (Q2_K), 15 (Q4_K) or 31 (Q5_K)
  float first_steps;    // rmin: the first candidate has max_level + rmin steps
  int steps;            // nstep: candidates max_level + rmin + 0.1 s for s = 0..steps
  bool absolute_error;  // use_mad: weigh |error| (Q2_K) instead of its square
};
constexpr ScaleMinFit kQ2_KFit = {16, 3, -0.5f, 15, true};
constexpr ScaleMinFit kQ4_KFit = {32, 15, -1.0f, 20, false};
constexpr ScaleMinFit kQ5_KFit = {32, 31, -0.5f, 15, false};

// Fits x[i] ~ scale * L[i] - neg_min (i < size) with L[i] in [0, max_level] and neg_min >= 0,
// minimising the weighted squared (or absolute) error (ggml's make_qkx2_quants, rdelta 0.1). Start
// from the range [min(x, 0), max(x)] split into max_level steps; then for each candidate step count
// max_level + first_steps + 0.1 s round x onto that grid, solve the weighted least-squares line
// through (L, x) for scale and offset (offset clamped to <= 0), and keep the best candidate.
float FitScaleMin(const ScaleMinFit& fit, const float* x, const float* weight, uint8_t* levels,
                  float* neg_min) {
  const int n = fit.size;
  const int kMaxLevel = fit.max_level;
  const int kSteps = fit.steps;
  const auto cost = [&](float diff) { return fit.absolute_error ? std::fabs(diff) : diff * diff; };
  float lo = x[0];
  float hi = x[0];
  float sum_w = weight[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < lo) lo = x[i];
    if (x[i] > hi) hi = x[i];
    sum_w += weight[i];
    sum_x += weight[i] * x[i];
  }
  if (lo > 0) lo = 0;
  if (hi == lo) {
    std::fill(levels, levels + n, uint8_t{0});
    *neg_min = -lo;
    return 0.0f;
  }
  float inv_step = static_cast<float>(kMaxLevel) / (hi - lo);
  float scale = 1 / inv_step;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int level = std::clamp(NearestInt(inv_step * (x[i] - lo)), 0, kMaxLevel);
    levels[i] = static_cast<uint8_t>(level);
    const float diff = scale * static_cast<float>(level) + lo - x[i];
    best_error += weight[i] * cost(diff);
  }
  uint8_t trial[kSub4];  // n <= kSub4
  for (int s = 0; s <= kSteps; ++s) {
    // lo moves with the best fit so far, as in ggml: later candidates grid from the new offset.
    inv_step = (fit.first_steps + 0.1f * static_cast<float>(s) + static_cast<float>(kMaxLevel)) /
               (hi - lo);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int level = std::clamp(NearestInt(inv_step * (x[i] - lo)), 0, kMaxLevel);
      trial[i] = static_cast<uint8_t>(level);
      const float wl = weight[i] * static_cast<float>(level);
      sum_l += wl;
      sum_l2 += wl * static_cast<float>(level);
      sum_xl += wl * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (!(det > 0)) continue;
    float trial_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float trial_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (trial_min > 0) {
      trial_min = 0;
      trial_scale = sum_xl / sum_l2;
    }
    float error = 0;
    for (int i = 0; i < n; ++i) {
      const float diff = trial_scale * static_cast<float>(trial[i]) + trial_min - x[i];
      error += weight[i] * cost(diff);
    }
    if (error < best_error) {
      std::memcpy(levels, trial, n);
      best_error = error;
      scale = trial_scale;
      lo = trial_min;
    }
  }
  *neg_min = -lo;
  return scale;
}

void PackScaleMin(const uint8_t* sc, const uint8_t* m, uint8_t* scales) {
  for (int j = 0; j < 4; ++j) {
    scales[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    scales[j + 4] = static_cast<uint8_t>(m[j] | ((m[j + 4] >> 4) << 6));
    scales[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0x0f) | ((m[j + 4] & 0x0f) << 4));
  }
}

// Stores the levels (0..max_level) of one super-block: the low nibbles as Q4_K's qs, and for Q5_K
// bit 4 of element e as bit e / 32 of qh[e % 32].
void PackLevels(const uint8_t* levels, BlockQ4_K* out) {
  for (int g = 0; g < kKBlock / 64; ++g) {
    for (int l = 0; l < 32; ++l) {
      out->qs[32 * g + l] =
          static_cast<uint8_t>(levels[64 * g + l] | (levels[64 * g + 32 + l] << 4));
    }
  }
}

void PackLevels(const uint8_t* levels, BlockQ5_K* out) {
  std::fill(out->qh, out->qh + kKBlock / 8, uint8_t{0});
  for (int g = 0; g < kKBlock / 64; ++g) {
    for (int l = 0; l < 32; ++l) {
      const int lo = levels[64 * g + l], hi = levels[64 * g + 32 + l];
      out->qs[32 * g + l] = static_cast<uint8_t>((lo & 0x0f) | ((hi & 0x0f) << 4));
      out->qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * g)) | ((hi >> 4) << (2 * g + 1)));
    }
  }
}

// One Q4_K or Q5_K super-block, as ggml's quantize_row_q4_K_ref / quantize_row_q5_K_ref.
template <typename Block>
void QuantizeScaleMinBlock(const ScaleMinFit& fit, const float* x, Block* out) {
  constexpr int kSubBlocks = kKBlock / kSub4;
  uint8_t levels[kKBlock];
  float sub_scale[kSubBlocks];
  float sub_min[kSubBlocks];
  float max_scale = 0;  // mins are subtracted, so scales are >= 0
  float max_min = 0;
  for (int j = 0; j < kSubBlocks; ++j) {
    const float* xs = x + j * kSub4;
    // Importance of each element: the sub-block's RMS plus the element's magnitude.
    float sum_x2 = 0;
    for (int i = 0; i < kSub4; ++i) sum_x2 += xs[i] * xs[i];
    const float rms = std::sqrt(sum_x2 / static_cast<float>(kSub4));
    float weight[kSub4];
    for (int i = 0; i < kSub4; ++i) weight[i] = rms + std::fabs(xs[i]);
    sub_scale[j] = FitScaleMin(fit, xs, weight, levels + j * kSub4, &sub_min[j]);
    if (sub_scale[j] > max_scale) max_scale = sub_scale[j];
    if (sub_min[j] > max_min) max_min = sub_min[j];
  }
  // Scales and mins become 6-bit multiples of the block's d = max / 63 and dmin = max_min / 63.
  const float inv_d = max_scale > 0 ? 63.0f / max_scale : 0.0f;
  const float inv_dmin = max_min > 0 ? 63.0f / max_min : 0.0f;
  uint8_t sc[kSubBlocks], m[kSubBlocks];
  for (int j = 0; j < kSubBlocks; ++j) {
    // The int -> uint8_t wrap is ggml's too (it only matters for a negative fitted scale).
    sc[j] = std::min<uint8_t>(63, static_cast<uint8_t>(NearestInt(inv_d * sub_scale[j])));
    m[j] = std::min<uint8_t>(63, static_cast<uint8_t>(NearestInt(inv_dmin * sub_min[j])));
  }
  PackScaleMin(sc, m, out->scales);
  out->d = Fp32ToFp16(max_scale / 63.0f);
  out->dmin = Fp32ToFp16(max_min / 63.0f);
  // Re-round every element against the scale and min actually stored; a sub-block whose stored
  // scale is 0 keeps the levels of its fit.
  const float d = Fp16ToFp32(out->d);
  const float dmin = Fp16ToFp32(out->dmin);
  for (int j = 0; j < kSubBlocks; ++j) {
    const float step = d * static_cast<float>(sc[j]);
    if (step == 0) continue;
    const float offset = dmin * static_cast<float>(m[j]);
    for (int i = 0; i < kSub4; ++i) {
      const float v = x[j * kSub4 + i];
      levels[j * kSub4 + i] =
          static_cast<uint8_t>(std::clamp(NearestInt((v + offset) / step), 0, fit.max_level));
    }
  }
  PackLevels(levels, out);
}

// ---- Q2_K and Q3_K

// Bits 2c, 2c + 1 of the 2-bit quants as Q2_K and Q3_K store them: element e of the super-block
// (see BlockQ2_K).
int Low2Bits(const uint8_t* qs, int e) {
  const int h = e / 128, c = e % 128 / 32, r = e % 32;
  return (qs[32 * h + r] >> (2 * c)) & 3;
}

// The 6-bit scale of sub-block i (0..15) of a Q3_K block, before the -32 (see BlockQ3_K).
int Q3_KScale(const uint8_t* scales, int i) {
  const int low = (scales[i % 8] >> (4 * (i / 8))) & 0x0f;
  const int high = (scales[8 + i % 4] >> (2 * (i / 4))) & 3;
  return low | (high << 4);
}

// The signed quant of element e of a Q3_K block, in [-4, 3]: the low 2 bits, less 4 where the
// hmask bit is clear.
int Q3_KQuant(const BlockQ3_K& block, int e) {
  const int high = (block.hmask[e % 32] >> (e / 32)) & 1;
  return Low2Bits(block.qs, e) - (high ? 0 : 4);
}

// Stores 256 levels of 0..3 as Q2_K's and Q3_K's qs: element 128h + 32c + r is bits 2c, 2c + 1 of
// qs[32h + r].
void PackLow2Bits(const uint8_t* levels, uint8_t* qs) {
  for (int h = 0; h < 2; ++h) {
    for (int r = 0; r < 32; ++r) {
      const uint8_t* l = levels + 128 * h + r;
      qs[32 * h + r] = static_cast<uint8_t>(l[0] | (l[32] << 2) | (l[64] << 4) | (l[96] << 6));
    }
  }
}

// One Q2_K super-block, as ggml's quantize_row_q2_K_ref: each sub-block of 16 is fitted with
// weights |x|, then scales and mins become 4-bit multiples of max / 15 (no clamp: the largest
// rounds to 15), and every element is re-rounded against what is stored.
void QuantizeBlockQ2_K(const float* x, BlockQ2_K* out) {
  constexpr int kSubBlocks = kKBlock / kSub6;
  constexpr float kMaxScale = 15.0f;
  uint8_t levels[kKBlock];
  float sub_scale[kSubBlocks];
  float sub_min[kSubBlocks];
  float max_scale = 0;
  float max_min = 0;
  for (int j = 0; j < kSubBlocks; ++j) {
    float weight[kSub6];
    for (int i = 0; i < kSub6; ++i) weight[i] = std::fabs(x[j * kSub6 + i]);
    sub_scale[j] = FitScaleMin(kQ2_KFit, x + j * kSub6, weight, levels + j * kSub6, &sub_min[j]);
    if (sub_scale[j] > max_scale) max_scale = sub_scale[j];
    if (sub_min[j] > max_min) max_min = sub_min[j];
  }
  // The stores keep ggml's int -> uint8_t conversions (they only matter for negative fits).
  if (max_scale > 0) {
    const float inv = kMaxScale / max_scale;
    for (int j = 0; j < kSubBlocks; ++j) {
      out->scales[j] = static_cast<uint8_t>(NearestInt(inv * sub_scale[j]));
    }
    out->d = Fp32ToFp16(max_scale / kMaxScale);
  } else {
    std::fill(out->scales, out->scales + kSubBlocks, uint8_t{0});
    out->d = Fp32ToFp16(0.0f);
  }
  if (max_min > 0) {
    const float inv = kMaxScale / max_min;
    for (int j = 0; j < kSubBlocks; ++j) {
      out->scales[j] = static_cast<uint8_t>(out->scales[j] | (NearestInt(inv * sub_min[j]) << 4));
    }
    out->dmin = Fp32ToFp16(max_min / kMaxScale);
  } else {
    out->dmin = Fp32ToFp16(0.0f);
  }
  const float d = Fp16ToFp32(out->d);
  const float dmin = Fp16ToFp32(out->dmin);
  for (int j = 0; j < kSubBlocks; ++j) {
    const float step = d * static_cast<float>(out->scales[j] & 0x0f);
    if (step == 0) continue;
    const float offset = dmin * static_cast<float>(out->scales[j] >> 4);
    for (int i = 0; i < kSub6; ++i) {
      levels[j * kSub6 + i] =
          static_cast<uint8_t>(std::clamp(NearestInt((x[j * kSub6 + i] + offset) / step), 0, 3));
    }
  }
  PackLow2Bits(levels, out->qs);
}

// The element of largest magnitude of a sub-block of 16, with its sign, in *signed_max (the first
// one on ties, as ggml's scan keeps it). False for a sub-block ggml counts as all zero (largest
// magnitude under GROUP_MAX_EPS): its levels are then set to 0.
bool LargestOfSubBlock(const float* x, uint8_t* levels, float* signed_max) {
  float amax = 0;
  *signed_max = 0;
  for (int i = 0; i < kSub6; ++i) {
    const float a = std::fabs(x[i]);
    if (a > amax) {
      amax = a;
      *signed_max = x[i];
    }
  }
  if (amax < 1e-15f) {
    std::fill(levels, levels + kSub6, uint8_t{0});
    return false;
  }
  return true;
}

// ---- Q3_K

// Fits x[i] ~ scale * (L[i] - 4) with L[i] in [0, 7] for one sub-block of 16 (ggml's
// make_q3_quants with nmax 4 and its refinement): the element of largest magnitude maps to -4;
// then up to five passes move single elements to the level that raises the weighted (x^2)
// correlation sum(w x l)^2 / sum(w l^2). An all-zero sub-block gets levels 0 and scale 0.
float FitQ3Scale(const float* x, uint8_t* levels) {
  constexpr int kHalfRange = 4;
  float signed_max = 0;
  if (!LargestOfSubBlock(x, levels, &signed_max)) return 0.0f;
  const float inv_step = static_cast<float>(-kHalfRange) / signed_max;
  int l[kSub6];
  float sum_xl = 0, sum_l2 = 0;
  for (int i = 0; i < kSub6; ++i) {
    l[i] = std::clamp(NearestInt(inv_step * x[i]), -kHalfRange, kHalfRange - 1);
    const float w = x[i] * x[i];
    sum_xl += w * x[i] * static_cast<float>(l[i]);
    sum_l2 += w * static_cast<float>(l[i]) * static_cast<float>(l[i]);
  }
  for (int pass = 0; pass < 5; ++pass) {
    int changed = 0;
    for (int i = 0; i < kSub6; ++i) {
      const float w = x[i] * x[i];
      float xl = sum_xl - w * x[i] * static_cast<float>(l[i]);
      if (!(xl > 0)) continue;
      float l2 = sum_l2 - w * static_cast<float>(l[i]) * static_cast<float>(l[i]);
      const int moved = std::clamp(NearestInt(x[i] * l2 / xl), -kHalfRange, kHalfRange - 1);
      if (moved == l[i]) continue;
      xl += w * x[i] * static_cast<float>(moved);
      l2 += w * static_cast<float>(moved) * static_cast<float>(moved);
      if (l2 > 0 && xl * xl * sum_l2 > sum_xl * sum_xl * l2) {
        l[i] = moved;
        sum_xl = xl;
        sum_l2 = l2;
        ++changed;
      }
    }
    if (changed == 0) break;
  }
  for (int i = 0; i < kSub6; ++i) levels[i] = static_cast<uint8_t>(l[i] + kHalfRange);
  return sum_l2 > 0.0f ? sum_xl / sum_l2 : 0.0f;
}

// One Q3_K super-block, as ggml's quantize_row_q3_K_ref: the 16 fitted scales become 6-bit
// multiples of the one of largest magnitude / -32, and every element is re-rounded against the
// stored scale.
void QuantizeBlockQ3_K(const float* x, BlockQ3_K* out) {
  constexpr int kSubBlocks = kKBlock / kSub6;
  uint8_t levels[kKBlock];
  float sub_scale[kSubBlocks];
  float max_scale = 0;  // signed: the scale of largest magnitude
  float amax = 0;
  for (int j = 0; j < kSubBlocks; ++j) {
    sub_scale[j] = FitQ3Scale(x + j * kSub6, levels + j * kSub6);
    const float a = std::fabs(sub_scale[j]);
    if (a > amax) {
      amax = a;
      max_scale = sub_scale[j];
    }
  }
  std::fill(out->scales, out->scales + 12, uint8_t{0});
  if (max_scale != 0) {
    const float inv = -32.0f / max_scale;
    for (int j = 0; j < kSubBlocks; ++j) {
      // ggml keeps the rounded value in an int8_t before clamping; |inv * scale| <= 32 here.
      const auto rounded = static_cast<int8_t>(NearestInt(inv * sub_scale[j]));
      const int sc = std::clamp<int>(rounded, -32, 31) + 32;
      out->scales[j % 8] =
          static_cast<uint8_t>(out->scales[j % 8] | ((sc & 0x0f) << (4 * (j / 8))));
      out->scales[8 + j % 4] =
          static_cast<uint8_t>(out->scales[8 + j % 4] | ((sc >> 4) << (2 * (j / 4))));
    }
    out->d = Fp32ToFp16(1 / inv);
  } else {
    out->d = Fp32ToFp16(0.0f);
  }
  const float d = Fp16ToFp32(out->d);
  for (int j = 0; j < kSubBlocks; ++j) {
    const float step = d * static_cast<float>(Q3_KScale(out->scales, j) - 32);
    if (step == 0) continue;
    for (int i = 0; i < kSub6; ++i) {
      const int level = std::clamp(NearestInt(x[j * kSub6 + i] / step), -4, 3);
      levels[j * kSub6 + i] = static_cast<uint8_t>(level + 4);
    }
  }
  // Levels 4..7 keep their low 2 bits with the hmask bit set; 0..3 are stored as they are.
  std::fill(out->hmask, out->hmask + kKBlock / 8, uint8_t{0});
  for (int e = 0; e < kKBlock; ++e) {
    if (levels[e] > 3) {
      out->hmask[e % 32] = static_cast<uint8_t>(out->hmask[e % 32] | (1 << (e / 32)));
      levels[e] = static_cast<uint8_t>(levels[e] - 4);
    }
  }
  PackLow2Bits(levels, out->qs);
}

// ---- Q6_K

// Fits x[i] ~ scale * (L[i] - 32) with L[i] in [0, 63] for one sub-block of 16 (ggml's
// make_qx_quants with nmax 32 and weights x^2): the element of largest magnitude maps to -32;
// then 18 nearby step sizes (32 + 0.1 s, s = -9..9, s != 0) are tried, each scored by the weighted
// least-squares scale of its rounding, and the best is kept.
float FitScale(const float* x, uint8_t* levels) {
  constexpr int kHalfRange = 32;
  float signed_max = 0;
  if (!LargestOfSubBlock(x, levels, &signed_max)) return 0.0f;
  // Rounds x onto the grid of inv_step and returns the weighted sums sum(w x l), sum(w l^2).
  auto score = [&](float inv_step, float* sum_xl, float* sum_l2, uint8_t* out) {
    float xl = 0, l2 = 0;
    for (int i = 0; i < kSub6; ++i) {
      const int level = std::clamp(NearestInt(inv_step * x[i]), -kHalfRange, kHalfRange - 1);
      if (out != nullptr) out[i] = static_cast<uint8_t>(level + kHalfRange);
      const float weight = x[i] * x[i];
      xl += weight * x[i] * static_cast<float>(level);
      l2 += weight * static_cast<float>(level) * static_cast<float>(level);
    }
    *sum_xl = xl;
    *sum_l2 = l2;
  };
  float sum_xl, sum_l2;
  score(static_cast<float>(-kHalfRange) / signed_max, &sum_xl, &sum_l2, levels);
  float scale = sum_l2 != 0 ? sum_xl / sum_l2 : 0.0f;
  float best = scale * sum_xl;
  for (int s = -9; s <= 9; ++s) {
    if (s == 0) continue;
    const float inv_step =
        -(static_cast<float>(kHalfRange) + 0.1f * static_cast<float>(s)) / signed_max;
    score(inv_step, &sum_xl, &sum_l2, nullptr);
    if (sum_l2 > 0 && sum_xl * sum_xl > best * sum_l2) {
      score(inv_step, &sum_xl, &sum_l2, levels);
      scale = sum_xl / sum_l2;
      best = scale * sum_xl;
    }
  }
  return scale;
}

// Stores 256 six-bit quants (levels in [0, 63]) in a Q6_K block's ql and qh (see BlockQ6_K).
void PackQ6_KLevels(const uint8_t* levels, BlockQ6_K* out) {
  for (int h = 0; h < kKBlock / 128; ++h) {
    const uint8_t* lv = levels + 128 * h;
    uint8_t* ql = out->ql + 64 * h;
    uint8_t* qh = out->qh + 32 * h;
    for (int l = 0; l < 32; ++l) {
      ql[l] = static_cast<uint8_t>((lv[l] & 0x0f) | ((lv[l + 64] & 0x0f) << 4));
      ql[l + 32] = static_cast<uint8_t>((lv[l + 32] & 0x0f) | ((lv[l + 96] & 0x0f) << 4));
      qh[l] = static_cast<uint8_t>((lv[l] >> 4) | ((lv[l + 32] >> 4) << 2) |
                                   ((lv[l + 64] >> 4) << 4) | ((lv[l + 96] >> 4) << 6));
    }
  }
}

void QuantizeBlockQ6_K(const float* x, BlockQ6_K* out) {
  constexpr int kSubBlocks = kKBlock / kSub6;
  uint8_t levels[kKBlock];
  float sub_scale[kSubBlocks];
  float max_scale = 0;
  float max_abs_scale = 0;
  for (int j = 0; j < kSubBlocks; ++j) {
    sub_scale[j] = FitScale(x + j * kSub6, levels + j * kSub6);
    if (std::fabs(sub_scale[j]) > max_abs_scale) {
      max_abs_scale = std::fabs(sub_scale[j]);
      max_scale = sub_scale[j];
    }
  }
  if (max_abs_scale < 1e-15f) {
    std::memset(out, 0, sizeof(BlockQ6_K));
    return;
  }
  // Sub-block scales become int8 multiples of d; the largest one maps to -128.
  const float inv_d = -128.0f / max_scale;
  out->d = Fp32ToFp16(1 / inv_d);
  for (int j = 0; j < kSubBlocks; ++j) {
    out->scales[j] = static_cast<int8_t>(std::min(127, NearestInt(inv_d * sub_scale[j])));
  }
  const float d = Fp16ToFp32(out->d);
  for (int j = 0; j < kSubBlocks; ++j) {
    const float step = d * static_cast<float>(out->scales[j]);
    if (step == 0) continue;
    for (int i = 0; i < kSub6; ++i) {
      const int level = std::clamp(NearestInt(x[j * kSub6 + i] / step), -32, 31);
      levels[j * kSub6 + i] = static_cast<uint8_t>(level + 32);
    }
  }
  PackQ6_KLevels(levels, out);
}

}  // namespace

void DequantizeRowQ2_K(const BlockQ2_K* src, float* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float d = Fp16ToFp32(src[b].d);
    const float dmin = Fp16ToFp32(src[b].dmin);
    float* y = dst + b * kKBlock;
    for (int j = 0; j < kKBlock / kSub6; ++j) {
      const uint8_t sc = src[b].scales[j];
      const float step = d * static_cast<float>(sc & 0x0f);
      const float offset = dmin * static_cast<float>(sc >> 4);
      for (int i = 0; i < kSub6; ++i) {
        const int e = j * kSub6 + i;
        y[e] = step * static_cast<float>(Low2Bits(src[b].qs, e)) - offset;
      }
    }
  }
}

void DequantizeRowQ3_K(const BlockQ3_K* src, float* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float d = Fp16ToFp32(src[b].d);
    float* y = dst + b * kKBlock;
    for (int j = 0; j < kKBlock / kSub6; ++j) {
      const float step = d * static_cast<float>(Q3_KScale(src[b].scales, j) - 32);
      for (int i = 0; i < kSub6; ++i) {
        const int e = j * kSub6 + i;
        y[e] = step * static_cast<float>(Q3_KQuant(src[b], e));
      }
    }
  }
}

void UnpackQ4_KScaleMin(const uint8_t* scales, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = scales[j] & 63;
    *m = scales[j + 4] & 63;
  } else {
    *sc = (scales[j + 4] & 0x0f) | ((scales[j - 4] >> 6) << 4);
    *m = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
  }
}

void QuantizeRowQ2_K(const float* src, BlockQ2_K* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b) QuantizeBlockQ2_K(src + b * kKBlock, &dst[b]);
}

void QuantizeRowQ3_K(const float* src, BlockQ3_K* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b) QuantizeBlockQ3_K(src + b * kKBlock, &dst[b]);
}

void QuantizeRowQ4_K(const float* src, BlockQ4_K* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b)
    QuantizeScaleMinBlock(kQ4_KFit, src + b * kKBlock, &dst[b]);
}

void QuantizeRowQ5_K(const float* src, BlockQ5_K* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b)
    QuantizeScaleMinBlock(kQ5_KFit, src + b * kKBlock, &dst[b]);
}

namespace {

// Q4_K and Q5_K share their layout but for Q5_K's fifth bit: value = d sc q - dmin m for sub-block
// j, q the nibble of qs (low for even j, high for odd) plus, for Q5_K, (HighBit(block, j, i) << 4).
template <typename Block, typename HighBit>
void DequantizeScaleMinRow(const Block* src, float* dst, int64_t n_blocks, HighBit high_bit) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float d = Fp16ToFp32(src[b].d);
    const float dmin = Fp16ToFp32(src[b].dmin);
    float* y = dst + b * kKBlock;
    for (int j = 0; j < kKBlock / kSub4; ++j) {
      int sc, m;
      UnpackQ4_KScaleMin(src[b].scales, j, &sc, &m);
      const float step = d * static_cast<float>(sc);
      const float offset = dmin * static_cast<float>(m);
      const uint8_t* q = src[b].qs + 32 * (j / 2);
      const int shift = 4 * (j % 2);
      for (int i = 0; i < kSub4; ++i) {
        const int level = ((q[i] >> shift) & 0x0f) | (high_bit(src[b], j, i) << 4);
        y[j * kSub4 + i] = step * static_cast<float>(level) - offset;
      }
    }
  }
}

}  // namespace

void DequantizeRowQ4_K(const BlockQ4_K* src, float* dst, int64_t n_blocks) {
  DequantizeScaleMinRow(src, dst, n_blocks, [](const BlockQ4_K&, int, int) { return 0; });
}

void DequantizeRowQ5_K(const BlockQ5_K* src, float* dst, int64_t n_blocks) {
  DequantizeScaleMinRow(src, dst, n_blocks,
                        [](const BlockQ5_K& b, int j, int i) { return (b.qh[i] >> j) & 1; });
}

void QuantizeRowQ6_K(const float* src, BlockQ6_K* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b) QuantizeBlockQ6_K(src + b * kKBlock, &dst[b]);
}

void DequantizeRowQ6_K(const BlockQ6_K* src, float* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float d = Fp16ToFp32(src[b].d);
    float* y = dst + b * kKBlock;
    for (int e = 0; e < kKBlock; ++e) {
      const int h = e / 128, c = e % 128 / 32, l = e % 32;
      const int low = (src[b].ql[64 * h + 32 * (c % 2) + l] >> (4 * (c / 2))) & 0x0f;
      const int high = (src[b].qh[32 * h + l] >> (2 * c)) & 3;
      const int q = (low | (high << 4)) - 32;
      const int scale = src[b].scales[e / kSub6];
      y[e] = d * static_cast<float>(scale) * static_cast<float>(q);
    }
  }
}

// ---- IQ4_XS

void DequantizeRowIQ4_XS(const BlockIQ4_XS* src, float* dst, int64_t n_blocks) {
  constexpr int kSub = 32;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float d = Fp16ToFp32(src[b].d);
    float* y = dst + b * kKBlock;
    for (int j = 0; j < kKBlock / kSub; ++j) {
      const int low = (src[b].scales_l[j / 2] >> (4 * (j % 2))) & 0x0f;
      const int high = (src[b].scales_h >> (2 * j)) & 3;
      const float step = d * static_cast<float>((low | (high << 4)) - 32);
      const uint8_t* qs = src[b].qs + 16 * j;
      for (int r = 0; r < kSub / 2; ++r) {
        y[j * kSub + r] = step * static_cast<float>(kIq4NlLevels[qs[r] & 0x0f]);
        y[j * kSub + 16 + r] = step * static_cast<float>(kIq4NlLevels[qs[r] >> 4]);
      }
    }
  }
}

}  // namespace grove
