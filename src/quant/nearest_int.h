// ggml's rounding for the quantizers that must write its bytes: round to nearest, ties to even.
#pragma once

#include <bit>
#include <cstdint>

namespace grove {

// Adding 1.5 * 2^23 leaves the rounded integer in the low mantissa bits. Valid for
// |v| <= 2^22 - 1, as in ggml; outside that range it returns the same (meaningless) value ggml
// does, so even degenerate inputs quantize alike.
inline int NearestInt(float v) {
  const float shifted = v + 12582912.0f;
  const int32_t bits = std::bit_cast<int32_t>(shifted);
  return (bits & 0x007fffff) - 0x00400000;
}

}  // namespace grove
