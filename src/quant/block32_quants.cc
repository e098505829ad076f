#include "quant/block32_quants.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>

#include "quant/half.h"
#include "quant/iq4_levels.h"

namespace grove {
namespace {

constexpr int kHalf = kQBlock / 2;

// (int8_t)v and (uint8_t)v as ggml's C code writes them and x86 computes them (a truncating
// conversion to int32, whose low byte is kept): the same bits for every v, but defined. Converting
// a float outside the target's range (inf or NaN from a block of infinities, a scale of 0 for a
// block of huge values) is undefined behaviour in C and C++; x86 gives 0x80000000 for anything
// outside int32, whose low byte is 0.
int32_t TruncateLikeX86(float v) {
  if (!(v > -2147483648.0f && v < 2147483648.0f)) return std::numeric_limits<int32_t>::min();
  return static_cast<int32_t>(v);
}
int8_t Int8Of(float v) { return static_cast<int8_t>(TruncateLikeX86(v)); }
uint8_t Uint8Of(float v) { return static_cast<uint8_t>(TruncateLikeX86(v)); }

// The 5-bit quants of a Q5_0/Q5_1 block: element j < 16 takes the low nibble of qs[j] and bit j of
// qh, element j + 16 the high nibble and bit j + 16.
void Unpack5Bit(const uint8_t qh_bytes[4], const uint8_t qs[kHalf], int q[kQBlock]) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, sizeof(qh));
  for (int j = 0; j < kHalf; ++j) {
    q[j] = (qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1u) << 4);
    q[j + kHalf] = (qs[j] >> 4) | static_cast<int>(((qh >> (j + kHalf)) & 1u) << 4);
  }
}

void Pack5Bit(const int q[kQBlock], uint8_t qh_bytes[4], uint8_t qs[kHalf]) {
  uint32_t qh = 0;
  for (int j = 0; j < kHalf; ++j) {
    qs[j] = static_cast<uint8_t>((q[j] & 0x0f) | ((q[j + kHalf] & 0x0f) << 4));
    qh |= static_cast<uint32_t>((q[j] & 0x10) >> 4) << j;
    qh |= static_cast<uint32_t>((q[j + kHalf] & 0x10) >> 4) << (j + kHalf);
  }
  std::memcpy(qh_bytes, &qh, sizeof(qh));
}

// The block's value of largest magnitude, signed (the first one on ties), as ggml's symmetric
// reference quantizers find it.
float SignedAbsMax(const float* x) {
  float amax = 0.0f;
  float max = 0.0f;
  for (int j = 0; j < kQBlock; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

void MinMax(const float* x, float* min, float* max) {
  *min = FLT_MAX;
  *max = -FLT_MAX;
  for (int j = 0; j < kQBlock; ++j) {
    if (x[j] < *min) *min = x[j];
    if (x[j] > *max) *max = x[j];
  }
}

// Q4_1's and Q5_1's affine step: the block's range [min, max] in max_level steps, stored as d and
// m = min; returns the inverse step (0 for a constant block) and the min, as ggml computes them.
template <typename Block>
float StoreAffineStep(const float* x, float max_level, Block* out, float* min) {
  float max;
  MinMax(x, min, &max);
  const float d = (max - *min) / max_level;
  out->d = Fp32ToFp16(d);
  out->m = Fp32ToFp16(*min);
  return d != 0.0f ? 1.0f / d : 0.0f;
}

}  // namespace

void QuantizeRowQ8_0(const float* src, BlockQ8_0* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float* x = src + b * kQBlock;
    float amax = 0.0f;
    for (int j = 0; j < kQBlock; ++j) {
      const float v = std::fabs(x[j]);
      amax = amax > v ? amax : v;  // ggml's MAX(), NaN handling included
    }
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = Fp32ToFp16(d);
    for (int j = 0; j < kQBlock; ++j) dst[b].qs[j] = Int8Of(std::round(x[j] * id));
  }
}

void DequantizeRowQ8_0(const BlockQ8_0* src, float* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float d = Fp16ToFp32(src[b].d);
    for (int j = 0; j < kQBlock; ++j) dst[b * kQBlock + j] = static_cast<float>(src[b].qs[j]) * d;
  }
}

void QuantizeRowQ4_0(const float* src, BlockQ4_0* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float* x = src + b * kQBlock;
    // The signed value of largest magnitude maps to -8, so the full range [-8, 7] is used.
    const float d = SignedAbsMax(x) / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = Fp32ToFp16(d);
    for (int j = 0; j < kHalf; ++j) {
      const int lo = std::min(15, static_cast<int>(Int8Of(x[j] * id + 8.5f)));
      const int hi = std::min(15, static_cast<int>(Int8Of(x[j + kHalf] * id + 8.5f)));
      dst[b].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

void DequantizeRowQ4_0(const BlockQ4_0* src, float* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float d = Fp16ToFp32(src[b].d);
    float* y = dst + b * kQBlock;
    for (int j = 0; j < kHalf; ++j) {
      y[j] = static_cast<float>((src[b].qs[j] & 0x0f) - 8) * d;
      y[j + kHalf] = static_cast<float>((src[b].qs[j] >> 4) - 8) * d;
    }
  }
}

void QuantizeRowQ4_1(const float* src, BlockQ4_1* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float* x = src + b * kQBlock;
    float min;
    const float id = StoreAffineStep(x, 15.0f, &dst[b], &min);
    for (int j = 0; j < kHalf; ++j) {
      const int lo = std::min(15, static_cast<int>(Int8Of((x[j] - min) * id + 0.5f)));
      const int hi = std::min(15, static_cast<int>(Int8Of((x[j + kHalf] - min) * id + 0.5f)));
      dst[b].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

void DequantizeRowQ4_1(const BlockQ4_1* src, float* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float d = Fp16ToFp32(src[b].d);
    const float m = Fp16ToFp32(src[b].m);
    float* y = dst + b * kQBlock;
    for (int j = 0; j < kHalf; ++j) {
      y[j] = static_cast<float>(src[b].qs[j] & 0x0f) * d + m;
      y[j + kHalf] = static_cast<float>(src[b].qs[j] >> 4) * d + m;
    }
  }
}

void QuantizeRowQ5_0(const float* src, BlockQ5_0* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float* x = src + b * kQBlock;
    // The signed value of largest magnitude maps to -16: the full range [-16, 15] is used.
    const float d = SignedAbsMax(x) / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = Fp32ToFp16(d);
    int q[kQBlock];
    for (int j = 0; j < kQBlock; ++j) {
      q[j] = std::min(31, static_cast<int>(Int8Of(x[j] * id + 16.5f)));
    }
    Pack5Bit(q, dst[b].qh, dst[b].qs);
  }
}

void DequantizeRowQ5_0(const BlockQ5_0* src, float* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float d = Fp16ToFp32(src[b].d);
    int q[kQBlock];
    Unpack5Bit(src[b].qh, src[b].qs, q);
    for (int j = 0; j < kQBlock; ++j) dst[b * kQBlock + j] = static_cast<float>(q[j] - 16) * d;
  }
}

void QuantizeRowQ5_1(const float* src, BlockQ5_1* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float* x = src + b * kQBlock;
    float min;
    const float id = StoreAffineStep(x, 31.0f, &dst[b], &min);
    int q[kQBlock];
    // No clamp to 31 here, as in ggml: (max - min) * id rounds to at most 31.5.
    for (int j = 0; j < kQBlock; ++j) q[j] = Uint8Of((x[j] - min) * id + 0.5f);
    Pack5Bit(q, dst[b].qh, dst[b].qs);
  }
}

void DequantizeRowQ5_1(const BlockQ5_1* src, float* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float d = Fp16ToFp32(src[b].d);
    const float m = Fp16ToFp32(src[b].m);
    int q[kQBlock];
    Unpack5Bit(src[b].qh, src[b].qs, q);
    for (int j = 0; j < kQBlock; ++j) dst[b * kQBlock + j] = static_cast<float>(q[j]) * d + m;
  }
}

void DequantizeRowIQ4_NL(const BlockIQ4_NL* src, float* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float d = Fp16ToFp32(src[b].d);
    float* y = dst + b * kQBlock;
    for (int j = 0; j < kHalf; ++j) {
      y[j] = d * static_cast<float>(kIq4NlLevels[src[b].qs[j] & 0x0f]);
      y[j + kHalf] = d * static_cast<float>(kIq4NlLevels[src[b].qs[j] >> 4]);
    }
  }
}

}  // namespace grove
