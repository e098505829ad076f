// Sub-block scales of the k-quant formats, unpacked by plain integer code that every kernel level
// shares. `static`, like the ActQ8 helpers of kernel_set.h: each file gets its own copy, so no copy
// compiled with SIMD flags can become the one another file calls (see CMakeLists.txt).
#pragma once

#include <cstdint>
#include <cstring>

#include "quant/blocks.h"

namespace grove {

// The 16 scales of a Q3_K block (see BlockQ3_K for the packing) as stored, sc + 32 in 0..63, four
// per 32-bit word (scale i in byte i % 4 of word i / 4). Scale i takes its low 4 bits from byte
// i % 8 (the low nibble for i < 8, the high one after) and its top 2 bits from byte 8 + i % 4
// (bits 2 (i / 4) and up).
static inline void Q3_KScaleWords(const uint8_t* packed, uint32_t words[4]) {
  uint32_t a[3];
  std::memcpy(a, packed, sizeof(a));
  constexpr uint32_t kLow4 = 0x0f0f0f0fu, kLow2 = 0x03030303u;
  words[0] = (a[0] & kLow4) | ((a[2] & kLow2) << 4);
  words[1] = (a[1] & kLow4) | (((a[2] >> 2) & kLow2) << 4);
  words[2] = ((a[0] >> 4) & kLow4) | (((a[2] >> 4) & kLow2) << 4);
  words[3] = ((a[1] >> 4) & kLow4) | (((a[2] >> 6) & kLow2) << 4);
}

// The 16 signed scales sc - 32 of a Q3_K block.
static inline void UnpackQ3_KScales(const uint8_t* packed, int8_t scales[16]) {
  uint32_t words[4];
  Q3_KScaleWords(packed, words);
  uint8_t stored[16];
  std::memcpy(stored, words, sizeof(stored));
  for (int i = 0; i < 16; ++i) scales[i] = static_cast<int8_t>(stored[i] - 32);
}

// The signed scale ls - 32 of sub-block j (0..7) of an IQ4_XS block.
static int IQ4_XSScale(const BlockIQ4_XS& block, int j) {
  const int low = (block.scales_l[j / 2] >> (4 * (j % 2))) & 0x0f;
  const int high = (block.scales_h >> (2 * j)) & 3;
  return (low | (high << 4)) - 32;
}

}  // namespace grove
