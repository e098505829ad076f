// Block formats of the quantized weight types, laid out exactly as ggml/GGUF stores them, so a
// tensor memory-mapped from a GGUF file is used in place.
//
// This header holds plain structs only (no inline functions): it is included by the SIMD kernel
// files, which are compiled with -mavx2/-mavx512*, and an inline function emitted there could be
// the copy the linker keeps for the whole program (see kernels/CMakeLists.txt).
#pragma once

#include <cstdint>

namespace grove {

// Elements per block of Q8_0 and Q4_0 (ggml's QK8_0 and QK4_0).
inline constexpr int kQBlock = 32;

// Q8_0: value = qs[j] * d, d stored as IEEE fp16 bits.
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQBlock];
};
static_assert(sizeof(BlockQ8_0) == 34, "BlockQ8_0 must match ggml's block_q8_0");

// Q4_0: element j (j < 16) is the low nibble of qs[j], element j + 16 the high nibble of qs[j];
// value = (nibble - 8) * d, d stored as IEEE fp16 bits.
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQBlock / 2];
};
static_assert(sizeof(BlockQ4_0) == 18, "BlockQ4_0 must match ggml's block_q4_0");

static_assert(alignof(BlockQ8_0) == 2 && alignof(BlockQ4_0) == 2,
              "blocks are packed back to back in GGUF rows");

}  // namespace grove
