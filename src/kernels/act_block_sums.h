// The ActQ8 block and half-block sums (kernel_set.h) of one block of 32 signed quants, for the SIMD
// levels' activation quantizers. AVX2 code: include only from files built with -mavx2 (the AVX2 and
// AVX-512 kernels). `static`, like block_scales.h: each file gets its own copy (CMakeLists.txt).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace grove {

// The sums of the first and last 16 quants of a block (exact).
struct HalfSums {
  int32_t lo, hi;
};
static inline HalfSums BlockHalfSums(__m256i q) {
  const __m256i biased = _mm256_xor_si256(q, _mm256_set1_epi8(char{-128}));  // q + 128, unsigned
  const __m256i sad = _mm256_sad_epu8(biased, _mm256_setzero_si256());  // 8 bytes per 64-bit lane
  const __m128i lo = _mm256_castsi256_si128(sad);
  const __m128i hi = _mm256_extracti128_si256(sad, 1);
  constexpr int32_t kBias = 128 * 16;
  return {static_cast<int32_t>(_mm_cvtsi128_si64(_mm_add_epi64(lo, _mm_unpackhi_epi64(lo, lo)))) -
              kBias,
          static_cast<int32_t>(_mm_cvtsi128_si64(_mm_add_epi64(hi, _mm_unpackhi_epi64(hi, hi)))) -
              kBias};
}

// Block b's sum and half sums, each d_b times the exact integer sum.
static inline void StoreBlockSums(__m256i q, float d, int64_t b, float* sums, float* half_sums) {
  const HalfSums h = BlockHalfSums(q);
  sums[b] = d * static_cast<float>(h.lo + h.hi);
  half_sums[2 * b] = d * static_cast<float>(h.lo);
  half_sums[2 * b + 1] = d * static_cast<float>(h.hi);
}

}  // namespace grove
