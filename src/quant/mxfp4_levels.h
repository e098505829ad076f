// The two facts of the MXFP4 format (OCP Microscaling Formats v1.0, as ggml stores it): the 16 FP4
// E2M1 values a nibble selects, doubled so that they are integers (0, 0.5, 1, 1.5, 2, 3, 4, 6 and
// their negatives, as ggml's kvalues_mxfp4), and the block's E8M0 exponent e, whose scale 2^(e-127)
// is halved to match the doubled levels. Shared by the quantizer and the kernels.
#pragma once

#include <array>
#include <bit>
#include <cstdint>

namespace grove {

inline constexpr int8_t kMxfp4Levels[16] = {0, 1,  2,  3,  4,  6,  8,  12,
                                            0, -1, -2, -3, -4, -6, -8, -12};

// The exponent byte E8M0 uses for NaN; a block holding it is refused (ggml_validate_row_data).
inline constexpr uint8_t kMxfp4BadExponent = 0xFF;

// 2^(e - 128) as a float, bit for bit as ggml's ggml_e8m0_to_fp32_half: e = 0 and 1 are the
// subnormals 2^-128 and 2^-127. A table, so that the kernels read a block's step with one load
// and no branch.
inline constexpr std::array<float, 256> kMxfp4Scales = [] {
  std::array<float, 256> scales{};
  for (uint32_t e = 0; e < 256; ++e) {
    const uint32_t bits = e < 2 ? 0x00200000u << e : (e - 1) << 23;
    scales[e] = std::bit_cast<float>(bits);
  }
  return scales;
}();

}  // namespace grove
