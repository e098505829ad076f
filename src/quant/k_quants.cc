// The symmetric k-quants, one signed scale per sub-block of 16: Q3_K and Q6_K; and the IQ4_XS
// dequantizer. The formats with a scale and a min (Q2_K, Q4_K, Q5_K) are k_quants_scale_min.cc's.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "quant/half.h"
#include "quant/iq4_levels.h"
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

void QuantizeRowQ3_K(const float* src, BlockQ3_K* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b) QuantizeBlockQ3_K(src + b * kKBlock, &dst[b]);
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
