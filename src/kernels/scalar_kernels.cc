// Scalar reference kernels: the plain definition of every operation, used on CPUs without AVX2, as
// the reference the SIMD levels are tested against, and as documentation of what they compute.
//
// Each output is one sequential float accumulation over k (per block for the integer types), so it
// is trivially independent of how many rows are computed together. Compiled with -ffp-contract=off
// so that no compiler fuses a multiply-add differently in different inlined copies.
#include <cfloat>
#include <cmath>
#include <cstdint>

#include "kernels/block_scales.h"
#include "kernels/kernel_tables.h"
#include "quant/blocks.h"
#include "quant/half.h"
#include "quant/iq4_levels.h"
#include "quant/k_quants.h"
#include "quant/mxfp4_levels.h"

namespace grove {
namespace {

// ActQ8 layout of this level: quants are signed bytes, then one float scale per block.
const float* ActScales(const uint8_t* act_row, int64_t n_in) {
  return reinterpret_cast<const float*>(act_row + ActQ8ScaleOffset(n_in));
}

void QuantizeAct(const float* x, int64_t n_in, void* act_row) {
  auto* qs = static_cast<int8_t*>(act_row);
  auto* scales = reinterpret_cast<float*>(static_cast<uint8_t*>(act_row) + ActQ8ScaleOffset(n_in));
  auto* sums = reinterpret_cast<float*>(static_cast<uint8_t*>(act_row) + ActQ8SumOffset(n_in));
  auto* half_sums =
      reinterpret_cast<float*>(static_cast<uint8_t*>(act_row) + ActQ8HalfSumOffset(n_in));
  for (int64_t b = 0; b < n_in / kQBlock; ++b) {
    const float* xb = x + b * kQBlock;
    float amax = 0.0f;
    for (int j = 0; j < kQBlock; ++j) {
      const float v = std::fabs(xb[j]);
      amax = amax > v ? amax : v;
    }
    // The same arithmetic as quant.cc's Q8_0 quantizer, except that the scale stays a float.
    const float d = amax / 127.0f;
    // 0 where 1 / d overflows (a block of amax below about 4e-37): its quants are 0 then.
    const float id = d != 0.0f && 1.0f / d <= FLT_MAX ? 1.0f / d : 0.0f;
    scales[b] = d;
    int32_t half[2] = {0, 0};
    for (int j = 0; j < kQBlock; ++j) {
      qs[b * kQBlock + j] = static_cast<int8_t>(std::round(xb[j] * id));
      half[j / 16] += qs[b * kQBlock + j];
    }
    sums[b] = d * static_cast<float>(half[0] + half[1]);
    half_sums[2 * b] = d * static_cast<float>(half[0]);
    half_sums[2 * b + 1] = d * static_cast<float>(half[1]);
  }
}

void DotF32(const void* w_row, int64_t n_in, const void* x, int64_t x_stride, int n_x, float* y,
            int64_t y_stride) {
  const auto* w = static_cast<const float*>(w_row);
  for (int i = 0; i < n_x; ++i) {
    const auto* xr = reinterpret_cast<const float*>(static_cast<const uint8_t*>(x) + i * x_stride);
    float acc = 0.0f;
    for (int64_t k = 0; k < n_in; ++k) acc += w[k] * xr[k];
    y[i * y_stride] = acc;
  }
}

template <bool kBf16>
void DotHalf(const void* w_row, int64_t n_in, const void* x, int64_t x_stride, int n_x, float* y,
             int64_t y_stride) {
  const auto* w = static_cast<const uint16_t*>(w_row);
  for (int i = 0; i < n_x; ++i) {
    const auto* xr = reinterpret_cast<const float*>(static_cast<const uint8_t*>(x) + i * x_stride);
    float acc = 0.0f;
    for (int64_t k = 0; k < n_in; ++k) {
      acc += (kBf16 ? Bf16ToFp32(w[k]) : Fp16ToFp32(w[k])) * xr[k];
    }
    y[i * y_stride] = acc;
  }
}

// Integer dot of one weight block with one activation block (exact in int32), then one float
// multiply-add per block: sum_b (d_w * d_x) * sumi_b.
void DotQ8_0(const void* w_row, int64_t n_in, const void* x, int64_t x_stride, int n_x, float* y,
             int64_t y_stride) {
  const auto* w = static_cast<const BlockQ8_0*>(w_row);
  const int64_t n_blocks = n_in / kQBlock;
  for (int i = 0; i < n_x; ++i) {
    const uint8_t* act = static_cast<const uint8_t*>(x) + i * x_stride;
    const auto* xq = reinterpret_cast<const int8_t*>(act);
    const float* xd = ActScales(act, n_in);
    float acc = 0.0f;
    for (int64_t b = 0; b < n_blocks; ++b) {
      int32_t sumi = 0;
      for (int j = 0; j < kQBlock; ++j) sumi += w[b].qs[j] * xq[b * kQBlock + j];
      acc += (Fp16ToFp32(w[b].d) * xd[b]) * static_cast<float>(sumi);
    }
    y[i * y_stride] = acc;
  }
}

// A block's step: its fp16 d, or MXFP4's 2^(e - 128).
template <typename Block>
float BlockStep(const Block& b) {
  if constexpr (requires { b.e; }) {
    return kMxfp4Scales[b.e];
  } else {
    return Fp16ToFp32(b.d);
  }
}

// Q4_0, Q5_0, IQ4_NL and MXFP4: value = level(q) * step with q a 4- or 5-bit quant (nibbles as
// Q4_0: elements 0-15 low, 16-31 high; Q5_0 adds bit j of qh as bit 4), so the integer dot is exact
// and each block adds one float multiply-add, as Q8_0.
template <typename Block, typename Level>
void DotSigned32(const void* w_row, int64_t n_in, const void* x, int64_t x_stride, int n_x,
                 float* y, int64_t y_stride, Level level) {
  const auto* w = static_cast<const Block*>(w_row);
  const int64_t n_blocks = n_in / kQBlock;
  constexpr int kHalf = kQBlock / 2;
  for (int i = 0; i < n_x; ++i) {
    const uint8_t* act = static_cast<const uint8_t*>(x) + i * x_stride;
    const auto* xq = reinterpret_cast<const int8_t*>(act);
    const float* xd = ActScales(act, n_in);
    float acc = 0.0f;
    for (int64_t b = 0; b < n_blocks; ++b) {
      const int8_t* xb = xq + b * kQBlock;
      int32_t sumi = 0;
      for (int j = 0; j < kHalf; ++j) {
        sumi += level(w[b], w[b].qs[j] & 0x0f, j) * xb[j];
        sumi += level(w[b], w[b].qs[j] >> 4, j + kHalf) * xb[j + kHalf];
      }
      acc += (BlockStep(w[b]) * xd[b]) * static_cast<float>(sumi);
    }
    y[i * y_stride] = acc;
  }
}

void DotQ4_0(const void* w_row, int64_t n_in, const void* x, int64_t x_stride, int n_x, float* y,
             int64_t y_stride) {
  DotSigned32<BlockQ4_0>(w_row, n_in, x, x_stride, n_x, y, y_stride,
                         [](const BlockQ4_0&, int nibble, int) { return nibble - 8; });
}

void DotQ5_0(const void* w_row, int64_t n_in, const void* x, int64_t x_stride, int n_x, float* y,
             int64_t y_stride) {
  DotSigned32<BlockQ5_0>(w_row, n_in, x, x_stride, n_x, y, y_stride,
                         [](const BlockQ5_0& b, int nibble, int e) {
                           return (nibble | (((b.qh[e / 8] >> (e % 8)) & 1) << 4)) - 16;
                         });
}

void DotIQ4_NL(const void* w_row, int64_t n_in, const void* x, int64_t x_stride, int n_x, float* y,
               int64_t y_stride) {
  DotSigned32<BlockIQ4_NL>(
      w_row, n_in, x, x_stride, n_x, y, y_stride,
      [](const BlockIQ4_NL&, int nibble, int) -> int { return kIq4NlLevels[nibble]; });
}

void DotMXFP4(const void* w_row, int64_t n_in, const void* x, int64_t x_stride, int n_x, float* y,
              int64_t y_stride) {
  DotSigned32<BlockMXFP4>(
      w_row, n_in, x, x_stride, n_x, y, y_stride,
      [](const BlockMXFP4&, int nibble, int) -> int { return kMxfp4Levels[nibble]; });
}

// IQ4_XS: per sub-block j of 32 (activation block b), value = (d (ls_j - 32)) level(q), so the
// integer dot of the levels is exact and each block adds one float multiply-add with that step.
void DotIQ4_XS(const void* w_row, int64_t n_in, const void* x, int64_t x_stride, int n_x, float* y,
               int64_t y_stride) {
  const auto* w = static_cast<const BlockIQ4_XS*>(w_row);
  const int64_t n_super = n_in / kKBlock;
  for (int i = 0; i < n_x; ++i) {
    const uint8_t* act = static_cast<const uint8_t*>(x) + i * x_stride;
    const auto* xq = reinterpret_cast<const int8_t*>(act);
    const float* xd = ActScales(act, n_in);
    float acc = 0.0f;
    for (int64_t s = 0; s < n_super; ++s) {
      const float d = Fp16ToFp32(w[s].d);
      for (int j = 0; j < kKBlock / kQBlock; ++j) {
        const float step = d * static_cast<float>(IQ4_XSScale(w[s], j));
        const int64_t b = s * (kKBlock / kQBlock) + j;
        const uint8_t* q = w[s].qs + 16 * j;
        const int8_t* xb = xq + b * kQBlock;
        int32_t sumi = 0;
        for (int r = 0; r < kQBlock / 2; ++r) {
          sumi += kIq4NlLevels[q[r] & 0x0f] * xb[r];
          sumi += kIq4NlLevels[q[r] >> 4] * xb[r + kQBlock / 2];
        }
        acc += (step * xd[b]) * static_cast<float>(sumi);
      }
    }
    y[i * y_stride] = acc;
  }
}

// Q4_1 and Q5_1: value = d q + m, so per block b the dot is (d d_b) sum(q x_q) + m (d_b sum x_q),
// the second factor being the activation row's block sum. q: the nibble (elements 0-15 low,
// 16-31 high, as Q4_0) plus, for Q5_1, bit j of qh as bit 4 (HighBit).
template <typename Block, typename HighBit>
void DotOffset(const void* w_row, int64_t n_in, const void* x, int64_t x_stride, int n_x, float* y,
               int64_t y_stride, HighBit high_bit) {
  const auto* w = static_cast<const Block*>(w_row);
  const int64_t n_blocks = n_in / kQBlock;
  constexpr int kHalf = kQBlock / 2;
  for (int i = 0; i < n_x; ++i) {
    const uint8_t* act = static_cast<const uint8_t*>(x) + i * x_stride;
    const auto* xq = reinterpret_cast<const int8_t*>(act);
    const float* xd = ActScales(act, n_in);
    const auto* xsum = reinterpret_cast<const float*>(act + ActQ8SumOffset(n_in));
    float acc = 0.0f;
    float min_acc = 0.0f;
    for (int64_t b = 0; b < n_blocks; ++b) {
      const int8_t* xb = xq + b * kQBlock;
      int32_t sumi = 0;
      for (int j = 0; j < kHalf; ++j) {
        sumi += ((w[b].qs[j] & 0x0f) | (high_bit(w[b], j) << 4)) * xb[j];
        sumi += ((w[b].qs[j] >> 4) | (high_bit(w[b], j + kHalf) << 4)) * xb[j + kHalf];
      }
      acc += (Fp16ToFp32(w[b].d) * xd[b]) * static_cast<float>(sumi);
      min_acc += Fp16ToFp32(w[b].m) * xsum[b];
    }
    y[i * y_stride] = acc + min_acc;
  }
}

void DotQ4_1(const void* w_row, int64_t n_in, const void* x, int64_t x_stride, int n_x, float* y,
             int64_t y_stride) {
  DotOffset<BlockQ4_1>(w_row, n_in, x, x_stride, n_x, y, y_stride,
                       [](const BlockQ4_1&, int) { return 0; });
}

void DotQ5_1(const void* w_row, int64_t n_in, const void* x, int64_t x_stride, int n_x, float* y,
             int64_t y_stride) {
  DotOffset<BlockQ5_1>(w_row, n_in, x, x_stride, n_x, y, y_stride,
                       [](const BlockQ5_1& b, int e) { return (b.qh[e / 8] >> (e % 8)) & 1; });
}

// Q4_K and Q5_K: per sub-block j of 32 (activation block b), w = d sc_j q - dmin m_j, so
// dot = d_b (d sc_j sum(q x) - dmin m_j sum(x)): the integer dot is exact, the min term uses the
// activation row's block sums (kernel_set.h). q is the nibble of qs plus, for Q5_K, bit j of qh
// as bit 4 (HighBit).
template <typename Block, typename HighBit>
void DotScaleMin(const void* w_row, int64_t n_in, const void* x, int64_t x_stride, int n_x,
                 float* y, int64_t y_stride, HighBit high_bit) {
  const auto* w = static_cast<const Block*>(w_row);
  const int64_t n_super = n_in / kKBlock;
  for (int i = 0; i < n_x; ++i) {
    const uint8_t* act = static_cast<const uint8_t*>(x) + i * x_stride;
    const auto* xq = reinterpret_cast<const int8_t*>(act);
    const float* xd = ActScales(act, n_in);
    const auto* xsum = reinterpret_cast<const float*>(act + ActQ8SumOffset(n_in));
    float acc = 0.0f;
    for (int64_t s = 0; s < n_super; ++s) {
      const float d = Fp16ToFp32(w[s].d);
      const float dmin = Fp16ToFp32(w[s].dmin);
      for (int j = 0; j < kKBlock / kQBlock; ++j) {
        int sc, m;
        UnpackQ4_KScaleMin(w[s].scales, j, &sc, &m);
        const int64_t b = s * (kKBlock / kQBlock) + j;
        const uint8_t* q = w[s].qs + 32 * (j / 2);
        const int shift = 4 * (j % 2);
        int32_t sumi = 0;
        for (int l = 0; l < kQBlock; ++l) {
          const int level = ((q[l] >> shift) & 0x0f) | (high_bit(w[s], j, l) << 4);
          sumi += level * xq[b * kQBlock + l];
        }
        acc += (d * static_cast<float>(sc) * xd[b]) * static_cast<float>(sumi);
        acc -= (dmin * static_cast<float>(m)) * xsum[b];
      }
    }
    y[i * y_stride] = acc;
  }
}

void DotQ4_K(const void* w_row, int64_t n_in, const void* x, int64_t x_stride, int n_x, float* y,
             int64_t y_stride) {
  DotScaleMin<BlockQ4_K>(w_row, n_in, x, x_stride, n_x, y, y_stride,
                         [](const BlockQ4_K&, int, int) { return 0; });
}

void DotQ5_K(const void* w_row, int64_t n_in, const void* x, int64_t x_stride, int n_x, float* y,
             int64_t y_stride) {
  DotScaleMin<BlockQ5_K>(w_row, n_in, x, x_stride, n_x, y, y_stride,
                         [](const BlockQ5_K& b, int j, int l) { return (b.qh[l] >> j) & 1; });
}

// Q6_K: per activation block b of 32, its two 16-element sub-blocks' integer dots are combined
// exactly with their int8 scales, then one float multiply-add with d * d_b.
void DotQ6_K(const void* w_row, int64_t n_in, const void* x, int64_t x_stride, int n_x, float* y,
             int64_t y_stride) {
  const auto* w = static_cast<const BlockQ6_K*>(w_row);
  const int64_t n_super = n_in / kKBlock;
  for (int i = 0; i < n_x; ++i) {
    const uint8_t* act = static_cast<const uint8_t*>(x) + i * x_stride;
    const auto* xq = reinterpret_cast<const int8_t*>(act);
    const float* xd = ActScales(act, n_in);
    float acc = 0.0f;
    for (int64_t s = 0; s < n_super; ++s) {
      const float d = Fp16ToFp32(w[s].d);
      for (int c8 = 0; c8 < kKBlock / kQBlock; ++c8) {  // block of 32 within the super-block
        const int h = c8 / 4, c = c8 % 4;
        const uint8_t* ql = w[s].ql + 64 * h + 32 * (c % 2);
        const uint8_t* qh = w[s].qh + 32 * h;
        const int64_t b = s * (kKBlock / kQBlock) + c8;
        int32_t sumi[2] = {0, 0};
        for (int l = 0; l < kQBlock; ++l) {
          const int q = (((ql[l] >> (4 * (c / 2))) & 0x0f) | (((qh[l] >> (2 * c)) & 3) << 4)) - 32;
          sumi[l / 16] += q * xq[b * kQBlock + l];
        }
        const int32_t isum = w[s].scales[2 * c8] * sumi[0] + w[s].scales[2 * c8 + 1] * sumi[1];
        acc += (d * xd[b]) * static_cast<float>(isum);
      }
    }
    y[i * y_stride] = acc;
  }
}

// Q3_K: like Q6_K, per activation block b its two 16-element sub-blocks' integer dots combine
// exactly with their signed scales; q = (low 2 bits | hmask bit << 2) - 4.
void DotQ3_K(const void* w_row, int64_t n_in, const void* x, int64_t x_stride, int n_x, float* y,
             int64_t y_stride) {
  const auto* w = static_cast<const BlockQ3_K*>(w_row);
  const int64_t n_super = n_in / kKBlock;
  for (int i = 0; i < n_x; ++i) {
    const uint8_t* act = static_cast<const uint8_t*>(x) + i * x_stride;
    const auto* xq = reinterpret_cast<const int8_t*>(act);
    const float* xd = ActScales(act, n_in);
    float acc = 0.0f;
    for (int64_t s = 0; s < n_super; ++s) {
      const float d = Fp16ToFp32(w[s].d);
      int8_t scales[16];
      UnpackQ3_KScales(w[s].scales, scales);
      for (int c8 = 0; c8 < kKBlock / kQBlock; ++c8) {
        const uint8_t* qs = w[s].qs + 32 * (c8 / 4);
        const int shift = 2 * (c8 % 4);
        const int64_t b = s * (kKBlock / kQBlock) + c8;
        int32_t sumi[2] = {0, 0};
        for (int l = 0; l < kQBlock; ++l) {
          const int q = (((qs[l] >> shift) & 3) | (((w[s].hmask[l] >> c8) & 1) << 2)) - 4;
          sumi[l / 16] += q * xq[b * kQBlock + l];
        }
        const int32_t isum = scales[2 * c8] * sumi[0] + scales[2 * c8 + 1] * sumi[1];
        acc += (d * xd[b]) * static_cast<float>(isum);
      }
    }
    y[i * y_stride] = acc;
  }
}

// Q2_K: value = d sc q - dmin m per 16 elements (q in 0..3); per activation block b both the scaled
// quant dot and the min-weighted sum of x_q are exact integers over its two sub-blocks, then one
// float multiply-add each (the min term in its own accumulator, subtracted at the end).
void DotQ2_K(const void* w_row, int64_t n_in, const void* x, int64_t x_stride, int n_x, float* y,
             int64_t y_stride) {
  const auto* w = static_cast<const BlockQ2_K*>(w_row);
  const int64_t n_super = n_in / kKBlock;
  for (int i = 0; i < n_x; ++i) {
    const uint8_t* act = static_cast<const uint8_t*>(x) + i * x_stride;
    const auto* xq = reinterpret_cast<const int8_t*>(act);
    const float* xd = ActScales(act, n_in);
    float acc = 0.0f;
    float min_acc = 0.0f;
    for (int64_t s = 0; s < n_super; ++s) {
      const float d = Fp16ToFp32(w[s].d);
      const float dmin = Fp16ToFp32(w[s].dmin);
      for (int c8 = 0; c8 < kKBlock / kQBlock; ++c8) {
        const uint8_t* qs = w[s].qs + 32 * (c8 / 4);
        const int shift = 2 * (c8 % 4);
        const int64_t b = s * (kKBlock / kQBlock) + c8;
        int32_t scaled = 0, mins = 0;
        for (int l = 0; l < kQBlock; ++l) {
          const int packed = w[s].scales[2 * c8 + l / 16];
          const int xv = xq[b * kQBlock + l];
          scaled += (packed & 0x0f) * ((qs[l] >> shift) & 3) * xv;
          mins += (packed >> 4) * xv;
        }
        acc += (d * xd[b]) * static_cast<float>(scaled);
        min_acc += (dmin * xd[b]) * static_cast<float>(mins);
      }
    }
    y[i * y_stride] = acc - min_acc;
  }
}

// ---- Attention: the reference order, one running sum per output.

// An element of a float or half-float (f16 KV cache) row, as a float.
inline float Widen(float x) { return x; }
inline float Widen(uint16_t h) { return Fp16ToFp32(h); }

template <typename T>
void AttnScores(const float* q, const T* keys, int64_t stride, int32_t n, int32_t head_dim,
                float scale, float* scores) {
  for (int32_t j = 0; j < n; ++j) {
    const T* k = keys + j * stride;
    float sum = 0.0f;
    for (int32_t d = 0; d < head_dim; ++d) sum += q[d] * Widen(k[d]);
    scores[j] = sum * scale;
  }
}

float SoftmaxExp(float* x, int32_t n) {
  float max = x[0];
  for (int32_t j = 1; j < n; ++j) max = std::fmax(max, x[j]);
  float sum = 0.0f;
  for (int32_t j = 0; j < n; ++j) {
    x[j] = std::exp(x[j] - max);
    sum += x[j];
  }
  return sum;
}

template <typename T>
void AttnWeightedSum(const float* p, const T* values, int64_t stride, int32_t n, int32_t head_dim,
                     float* out) {
  for (int32_t j = 0; j < n; ++j) {
    const T* v = values + j * stride;
    for (int32_t d = 0; d < head_dim; ++d) out[d] += p[j] * Widen(v[d]);
  }
}

void ToF16(const float* x, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = Fp32ToFp16(x[i]);
}

void SiluMul(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void GeluMul(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    const float y = 1.5957691216f * g * (1.0f + 0.044715f * g * g);  // 2 sqrt(2 / pi) (g + ...)
    out[i] = g / (1.0f + std::exp(-y)) * up[i];
  }
}

double SumSquares(const float* x, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  return sum;
}

int32_t IndicesAbove(const float* x, int32_t n, float threshold, int32_t* indices) {
  int32_t count = 0;
  for (int32_t i = 0; i < n; ++i) {
    if (x[i] > threshold) indices[count++] = i;
  }
  return count;
}

float SumExp(const float* x, int32_t n, float max) {
  float sum = 0.0f;
  for (int32_t j = 0; j < n; ++j) sum += std::exp(x[j] - max);
  return sum;
}

}  // namespace

extern const KernelSet kScalarKernels = {
    .level = KernelLevel::kScalar,
    .name = "scalar",
    .act_q8_unsigned = false,
    .quantize_act = &QuantizeAct,
    .dot_f32 = &DotF32,
    .dot_f16 = &DotHalf<false>,
    .dot_bf16 = &DotHalf<true>,
    .dot_q8_0 = &DotQ8_0,
    .dot_q4_0 = &DotQ4_0,
    .dot_q5_0 = &DotQ5_0,
    .dot_iq4_nl = &DotIQ4_NL,
    .dot_mxfp4 = &DotMXFP4,
    .dot_q4_1 = &DotQ4_1,
    .dot_q5_1 = &DotQ5_1,
    .dot_q4_k = &DotQ4_K,
    .dot_q5_k = &DotQ5_K,
    .dot_q6_k = &DotQ6_K,
    .dot_iq4_xs = &DotIQ4_XS,
    .dot_q2_k = &DotQ2_K,
    .dot_q3_k = &DotQ3_K,
    .quantize_act_grouped = nullptr,  // no row-group kernels at this level: weights stay in rows
    .group_q8_0 = nullptr,
    .group_q4_0 = nullptr,
    .group_iq4_nl = nullptr,
    .group_q4_k = nullptr,
    .group_f16 = nullptr,
    .attn_scores = &AttnScores<float>,
    .softmax_exp = &SoftmaxExp,
    .attn_weighted_sum = &AttnWeightedSum<float>,
    .attn_scores_f16 = &AttnScores<uint16_t>,
    .attn_weighted_sum_f16 = &AttnWeightedSum<uint16_t>,
    .to_f16 = &ToF16,
    .silu_mul = &SiluMul,
    .gelu_mul = &GeluMul,
    .sum_squares = &SumSquares,
    .indices_above = &IndicesAbove,
    .sum_exp = &SumExp,
};

}  // namespace grove
