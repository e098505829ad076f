#include "quant/mxfp4_quants.h"

#include <cmath>

#include "quant/mxfp4_levels.h"

namespace grove {
namespace {

// The level nearest x / scale, by the absolute error of level * scale against x, the first of
// equals winning (so 0 is index 0, never the negative zero at 8), as ggml's best_index_mxfp4.
uint8_t NearestLevel(float x, float scale) {
  int best = 0;
  float best_error = std::fabs(static_cast<float>(kMxfp4Levels[0]) * scale - x);
  for (int i = 1; i < 16; ++i) {
    const float error = std::fabs(static_cast<float>(kMxfp4Levels[i]) * scale - x);
    if (error < best_error) {
      best = i;
      best_error = error;
    }
  }
  return static_cast<uint8_t>(best);
}

// The block's exponent: the largest magnitude's binary exponent less 2 (the largest level, 6 =
// 1.5 * 2^2), biased by 127; 0 for a block of zeros. ggml converts the float straight to uint8_t;
// below 2^-125 that value is negative (undefined in C), and x86 keeps the low byte of the
// truncated int32, which is what grove computes, defined, for every input.
uint8_t BlockExponent(float amax) {
  if (!(amax > 0.0f)) return 0;
  const float biased = std::floor(std::log2(amax)) - 2.0f + 127.0f;
  return static_cast<uint8_t>(static_cast<uint32_t>(static_cast<int32_t>(biased)));
}

}  // namespace

void QuantizeRowMXFP4(const float* src, BlockMXFP4* dst, int64_t n_blocks) {
  constexpr int kHalf = kQBlock / 2;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float* x = src + b * kQBlock;
    float amax = 0.0f;
    for (int j = 0; j < kQBlock; ++j) {
      if (amax < std::fabs(x[j])) amax = std::fabs(x[j]);
    }
    const uint8_t e = BlockExponent(amax);
    const float scale = kMxfp4Scales[e];
    dst[b].e = e;
    for (int j = 0; j < kHalf; ++j) {
      dst[b].qs[j] = static_cast<uint8_t>(NearestLevel(x[j], scale) |
                                          (NearestLevel(x[j + kHalf], scale) << 4));
    }
  }
}

void DequantizeRowMXFP4(const BlockMXFP4* src, float* dst, int64_t n_blocks) {
  constexpr int kHalf = kQBlock / 2;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float scale = kMxfp4Scales[src[b].e];
    float* y = dst + b * kQBlock;
    for (int j = 0; j < kHalf; ++j) {
      y[j] = static_cast<float>(kMxfp4Levels[src[b].qs[j] & 0x0f]) * scale;
      y[j + kHalf] = static_cast<float>(kMxfp4Levels[src[b].qs[j] >> 4]) * scale;
    }
  }
}

}  // namespace grove
