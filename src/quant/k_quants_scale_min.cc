// The k-quants with a scale and a min per sub-block, fitted by weighted least squares: Q2_K (16
// elements a sub-block), Q4_K and Q5_K (32). The symmetric ones, Q3_K and Q6_K, are k_quants.cc's.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "quant/half.h"
#include "quant/k_quant_bits.h"
#include "quant/k_quants.h"
#include "quant/nearest_int.h"

// Bit-exactness with ggml depends on doing the same float operations in the same order: every
// expression below keeps ggml's association (a * b * c is (a * b) * c, int operands converted to
// float first), sums run in element order, and this file is compiled with -ffp-contract=off
// (CMakeLists.txt) so no multiply-add is fused. The algorithms are described in prose; the code is
// grove's own.

namespace grove {
namespace {

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
// Rounds x (i < fit.size) onto the grid of inv_step from lo, clamped to [0, max_level].
void RoundOntoGrid(const ScaleMinFit& fit, const float* x, float inv_step, float lo,
                   uint8_t* levels) {
  for (int i = 0; i < fit.size; ++i) {
    levels[i] =
        static_cast<uint8_t>(std::clamp(NearestInt(inv_step * (x[i] - lo)), 0, fit.max_level));
  }
}

// The weighted error of x ~ scale * L + offset, squared or absolute as the fit says.
float WeightedError(const ScaleMinFit& fit, const float* x, const float* weight,
                    const uint8_t* levels, float scale, float offset) {
  float error = 0;
  for (int i = 0; i < fit.size; ++i) {
    const float diff = scale * static_cast<float>(levels[i]) + offset - x[i];
    error += weight[i] * (fit.absolute_error ? std::fabs(diff) : diff * diff);
  }
  return error;
}

// The weighted least-squares line through (levels, x): scale and offset, the offset clamped to
// <= 0 (the scale refitted through the origin then). False when the levels are all alike.
bool SolveScaleMin(const ScaleMinFit& fit, const float* x, const float* weight,
                   const uint8_t* levels, float sum_w, float sum_x, float* scale, float* offset) {
  float sum_l = 0, sum_l2 = 0, sum_xl = 0;
  for (int i = 0; i < fit.size; ++i) {
    const float wl = weight[i] * static_cast<float>(levels[i]);
    sum_l += wl;
    sum_l2 += wl * static_cast<float>(levels[i]);
    sum_xl += wl * x[i];
  }
  const float det = sum_w * sum_l2 - sum_l * sum_l;
  if (!(det > 0)) return false;
  *scale = (sum_w * sum_xl - sum_x * sum_l) / det;
  *offset = (sum_l2 * sum_x - sum_l * sum_xl) / det;
  if (*offset > 0) {
    *offset = 0;
    *scale = sum_xl / sum_l2;
  }
  return true;
}

float FitScaleMin(const ScaleMinFit& fit, const float* x, const float* weight, uint8_t* levels,
                  float* neg_min) {
  const int n = fit.size;
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
  float inv_step = static_cast<float>(fit.max_level) / (hi - lo);
  float scale = 1 / inv_step;
  RoundOntoGrid(fit, x, inv_step, lo, levels);
  float best_error = WeightedError(fit, x, weight, levels, scale, lo);
  uint8_t trial[kSub4];  // n <= kSub4
  for (int s = 0; s <= fit.steps; ++s) {
    // lo moves with the best fit so far, as in ggml: later candidates grid from the new offset.
    inv_step =
        (fit.first_steps + 0.1f * static_cast<float>(s) + static_cast<float>(fit.max_level)) /
        (hi - lo);
    RoundOntoGrid(fit, x, inv_step, lo, trial);
    float trial_scale = 0, trial_min = 0;
    if (!SolveScaleMin(fit, x, weight, trial, sum_w, sum_x, &trial_scale, &trial_min)) continue;
    const float error = WeightedError(fit, x, weight, trial, trial_scale, trial_min);
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

// ---- Q2_K

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

void QuantizeRowQ2_K(const float* src, BlockQ2_K* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b) QuantizeBlockQ2_K(src + b * kKBlock, &dst[b]);
}

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

void UnpackQ4_KScaleMin(const uint8_t* scales, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = scales[j] & 63;
    *m = scales[j + 4] & 63;
  } else {
    *sc = (scales[j + 4] & 0x0f) | ((scales[j - 4] >> 6) << 4);
    *m = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
  }
}

void QuantizeRowQ4_K(const float* src, BlockQ4_K* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b)
    QuantizeScaleMinBlock(kQ4_KFit, src + b * kKBlock, &dst[b]);
}

void QuantizeRowQ5_K(const float* src, BlockQ5_K* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b)
    QuantizeScaleMinBlock(kQ5_KFit, src + b * kKBlock, &dst[b]);
}

void DequantizeRowQ4_K(const BlockQ4_K* src, float* dst, int64_t n_blocks) {
  DequantizeScaleMinRow(src, dst, n_blocks, [](const BlockQ4_K&, int, int) { return 0; });
}

void DequantizeRowQ5_K(const BlockQ5_K* src, float* dst, int64_t n_blocks) {
  DequantizeScaleMinRow(src, dst, n_blocks,
                        [](const BlockQ5_K& b, int j, int i) { return (b.qh[i] >> j) & 1; });
}

}  // namespace grove
