// Portable scalar conversions between float and the 16-bit float formats (IEEE fp16, bfloat16).
//
// Exact integer arithmetic, no F16C: this header is used by code compiled for baseline x86-64 (the
// SIMD kernels convert with their own intrinsics). fp32 -> fp16 rounds to nearest even, overflows
// to infinity, produces subnormals, and keeps NaNs quiet NaNs. fp32 -> bf16 rounds like ggml's
// ggml_compute_fp32_to_bf16 (nearest even, NaN forced quiet, no flush of subnormals).
#pragma once

#include <bit>
#include <cstdint>

namespace grove {

inline float Fp16ToFp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0)
    return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
  // Zero or subnormal: mantissa * 2^-24, exact in float (every fp16 subnormal is a normal float).
  const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
  return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(magnitude));
}

inline uint16_t Fp32ToFp16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) {  // NaN: keep the top payload bits, force the quiet bit.
    return static_cast<uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
  }
  // 65520 = halfway between the largest half (65504, odd mantissa) and 2^16: ties go up to inf.
  if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (magnitude >=
      0x38800000u) {  // Normal half: rebias the exponent (127 -> 15), round the mantissa.
    const uint32_t rounded = magnitude - 0x38000000u + 0xfffu + ((magnitude >> 13) & 1u);
    return static_cast<uint16_t>(sign | (rounded >> 13));
  }
  // Subnormal half: round(|f| * 2^24) to nearest even. 2^-25 (a tie) and below round to zero.
  if (magnitude <= 0x33000000u) return sign;
  const uint32_t exponent = magnitude >> 23;                         // 102..112
  const uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;  // |f| = sig * 2^(exp - 150)
  const uint32_t shift = 126 - exponent;                             // 14..24
  uint32_t q = significand >> shift;
  const uint32_t remainder = significand & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  if (remainder > half || (remainder == half && (q & 1u))) ++q;  // may carry into the min normal
  return static_cast<uint16_t>(sign | q);
}

inline float Bf16ToFp32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

inline uint16_t Fp32ToBf16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 64u);
  return static_cast<uint16_t>((bits + (0x7fffu + ((bits >> 16) & 1u))) >> 16);
}

}  // namespace grove
