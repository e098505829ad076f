// What the k-quant files share (k_quants.cc, k_quants_scale_min.cc): the sub-block sizes and the
// 2-bit packing of Q2_K and Q3_K. Integer work only: no rounding to keep bit-exact here.
#pragma once

#include <cstdint>

#include "quant/blocks.h"

namespace grove {

inline constexpr int kSub4 = 32;  // Q4_K and Q5_K sub-block: one scale and min per 32 elements
inline constexpr int kSub6 = 16;  // Q2_K, Q3_K and Q6_K sub-block: one scale (and min) per 16

// Bits 2c, 2c + 1 of the 2-bit quants as Q2_K and Q3_K store them: element e of the super-block
// (see BlockQ2_K).
inline int Low2Bits(const uint8_t* qs, int e) {
  const int h = e / 128, c = e % 128 / 32, r = e % 32;
  return (qs[32 * h + r] >> (2 * c)) & 3;
}

// Stores 256 levels of 0..3 as Q2_K's and Q3_K's qs: element 128h + 32c + r is bits 2c, 2c + 1 of
// qs[32h + r].
inline void PackLow2Bits(const uint8_t* levels, uint8_t* qs) {
  for (int h = 0; h < 2; ++h) {
    for (int r = 0; r < 32; ++r) {
      const uint8_t* l = levels + 128 * h + r;
      qs[32 * h + r] = static_cast<uint8_t>(l[0] | (l[32] << 2) | (l[64] << 4) | (l[96] << 6));
    }
  }
}

}  // namespace grove
