// The k-quant formats Q4_K and Q6_K (super-blocks of 256): row quantizers that reproduce ggml's
// reference quantizers (quantize_row_q4_K_ref, quantize_row_q6_K_ref) bit for bit, so a file grove
// writes equals what llama-quantize writes without an importance matrix, and the dequantizers.
// Internal to quant/: callers use QuantizeRow / DequantizeRow (quant.h).
#pragma once

#include <cstdint>

#include "quant/blocks.h"

namespace grove {

void QuantizeRowQ4_K(const float* src, BlockQ4_K* dst, int64_t n_blocks);
void DequantizeRowQ4_K(const BlockQ4_K* src, float* dst, int64_t n_blocks);
void QuantizeRowQ6_K(const float* src, BlockQ6_K* dst, int64_t n_blocks);
void DequantizeRowQ6_K(const BlockQ6_K* src, float* dst, int64_t n_blocks);

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K block (see BlockQ4_K).
void UnpackQ4_KScaleMin(const uint8_t* scales, int j, int* sc, int* m);

}  // namespace grove
