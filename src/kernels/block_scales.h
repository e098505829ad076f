// Sub-block scales of the k-quant formats, unpacked by plain integer code that every kernel level
// shares. `static`, like the ActQ8 helpers of kernel_set.h: each file gets its own copy, so no copy
// compiled with SIMD flags can become the one another file calls (see CMakeLists.txt).
#pragma once

#include <cstdint>

#include "quant/blocks.h"

namespace grove {

// The 16 signed scales sc - 32 of a Q3_K block (see BlockQ3_K for the packing).
static void UnpackQ3_KScales(const uint8_t* packed, int8_t scales[16]) {
  for (int i = 0; i < 16; ++i) {
    const int low = (packed[i % 8] >> (4 * (i / 8))) & 0x0f;
    const int high = (packed[8 + i % 4] >> (2 * (i / 4))) & 3;
    scales[i] = static_cast<int8_t>((low | (high << 4)) - 32);
  }
}

// The signed scale ls - 32 of sub-block j (0..7) of an IQ4_XS block.
static int IQ4_XSScale(const BlockIQ4_XS& block, int j) {
  const int low = (block.scales_l[j / 2] >> (4 * (j % 2))) & 0x0f;
  const int high = (block.scales_h >> (2 * j)) & 3;
  return (low | (high << 4)) - 32;
}

}  // namespace grove
