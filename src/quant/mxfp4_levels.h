// The two facts of the MXFP4 format (OCP Microscaling Formats v1.0, as ggml stores it): the 16 FP4
// E2M1 values a nibble selects, doubled so that they are integers (0, 0.5, 1, 1.5, 2, 3, 4, 6 and
// their negatives, as ggml's kvalues_mxfp4), and the block's E8M0 exponent e, whose scale 2^(e-127)
// is halved to match the doubled levels. Shared by the quantizer and the kernels.
#pragma once

#include <cstdint>
#include <cstring>

namespace grove {

inline constexpr int8_t kMxfp4Levels[16] = {0, 1,  2,  3,  4,  6,  8,  12,
                                            0, -1, -2, -3, -4, -6, -8, -12};

// The exponent byte E8M0 uses for NaN; a block holding it is refused (ggml_validate_row_data).
inline constexpr uint8_t kMxfp4BadExponent = 0xFF;

// 2^(e - 128) as a float, bit for bit as ggml's ggml_e8m0_to_fp32_half: e = 0 and 1 are the
// subnormals 2^-128 and 2^-127. Internal linkage (static), since SIMD kernel files include it and
// an inline function compiled with their flags must not be the copy the linker keeps elsewhere.
static inline float Mxfp4Scale(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return scale;
}

}  // namespace grove
