#include "quant/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "quant/blocks.h"
#include "quant/half.h"
#include "quant/k_quants.h"

namespace grove {
namespace {

// The scalar quantizers below are ggml's reference ones (quantize_row_q8_0_ref,
// quantize_row_q4_0_ref) step for step, so a file grove writes matches llama-quantize bit for bit.

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
    for (int j = 0; j < kQBlock; ++j) dst[b].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
  }
}

void DequantizeRowQ8_0(const BlockQ8_0* src, float* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float d = Fp16ToFp32(src[b].d);
    for (int j = 0; j < kQBlock; ++j) dst[b * kQBlock + j] = static_cast<float>(src[b].qs[j]) * d;
  }
}

void QuantizeRowQ4_0(const float* src, BlockQ4_0* dst, int64_t n_blocks) {
  constexpr int kHalf = kQBlock / 2;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float* x = src + b * kQBlock;
    // The signed value of largest magnitude maps to -8, so the full range [-8, 7] is used.
    float amax = 0.0f;
    float max = 0.0f;
    for (int j = 0; j < kQBlock; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = Fp32ToFp16(d);
    for (int j = 0; j < kHalf; ++j) {
      const int lo = std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f)));
      const int hi = std::min(15, static_cast<int>(static_cast<int8_t>(x[j + kHalf] * id + 8.5f)));
      dst[b].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

void DequantizeRowQ4_0(const BlockQ4_0* src, float* dst, int64_t n_blocks) {
  constexpr int kHalf = kQBlock / 2;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float d = Fp16ToFp32(src[b].d);
    float* y = dst + b * kQBlock;
    for (int j = 0; j < kHalf; ++j) {
      y[j] = static_cast<float>((src[b].qs[j] & 0x0f) - 8) * d;
      y[j + kHalf] = static_cast<float>((src[b].qs[j] >> 4) - 8) * d;
    }
  }
}

int64_t BlockCount(GgmlType type, int64_t n) {
  if (!IsSupportedWeightType(type)) {
    Fail("quant: type ", GgmlTypeName(type),
         " is not supported (grove computes with f32, f16, "
         "bf16, q8_0, q4_0, q4_k, q6_k)");
  }
  const int64_t block_size = GgmlTraits(type).block_size;
  if (n < 0 || n % block_size != 0) {
    Fail("quant: row of ", n, " elements is not a multiple of the ", GgmlTypeName(type),
         " block size ", block_size);
  }
  return n / block_size;
}

}  // namespace

bool IsSupportedWeightType(GgmlType type) {
  switch (type) {
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16:
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_K:
    case GgmlType::kQ6_K:
      return true;
    default:
      return false;
  }
}

void DequantizeRow(GgmlType type, const void* src, float* dst, int64_t n) {
  const int64_t n_blocks = BlockCount(type, n);
  switch (type) {
    case GgmlType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case GgmlType::kF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = Fp16ToFp32(h[i]);
      return;
    }
    case GgmlType::kBF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = Bf16ToFp32(h[i]);
      return;
    }
    case GgmlType::kQ8_0:
      DequantizeRowQ8_0(static_cast<const BlockQ8_0*>(src), dst, n_blocks);
      return;
    case GgmlType::kQ4_0:
      DequantizeRowQ4_0(static_cast<const BlockQ4_0*>(src), dst, n_blocks);
      return;
    case GgmlType::kQ4_K:
      DequantizeRowQ4_K(static_cast<const BlockQ4_K*>(src), dst, n_blocks);
      return;
    case GgmlType::kQ6_K:
      DequantizeRowQ6_K(static_cast<const BlockQ6_K*>(src), dst, n_blocks);
      return;
    default:
      break;
  }
  Fail("quant: no dequantizer for ", GgmlTypeName(type));
}

void QuantizeRow(GgmlType type, const float* src, void* dst, int64_t n) {
  const int64_t n_blocks = BlockCount(type, n);
  switch (type) {
    case GgmlType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case GgmlType::kF16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = Fp32ToFp16(src[i]);
      return;
    }
    case GgmlType::kBF16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = Fp32ToBf16(src[i]);
      return;
    }
    case GgmlType::kQ8_0:
      QuantizeRowQ8_0(src, static_cast<BlockQ8_0*>(dst), n_blocks);
      return;
    case GgmlType::kQ4_0:
      QuantizeRowQ4_0(src, static_cast<BlockQ4_0*>(dst), n_blocks);
      return;
    case GgmlType::kQ4_K:
      QuantizeRowQ4_K(src, static_cast<BlockQ4_K*>(dst), n_blocks);
      return;
    case GgmlType::kQ6_K:
      QuantizeRowQ6_K(src, static_cast<BlockQ6_K*>(dst), n_blocks);
      return;
    default:
      break;
  }
  Fail("quant: no quantizer for ", GgmlTypeName(type));
}

}  // namespace grove
