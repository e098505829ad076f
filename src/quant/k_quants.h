// The k-quant formats (super-blocks of 256): row quantizers for Q2_K, Q3_K, Q4_K, Q5_K and Q6_K
// that reproduce ggml's reference quantizers (quantize_row_q2_K_ref ... quantize_row_q6_K_ref) bit
// for bit, so a file grove writes equals what llama-quantize writes without an importance matrix,
// and dequantizers for Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS (a 256-element super-block of IQ4_NL
// levels) that give ggml's dequantize_row_* bit for bit. Internal to quant/: callers use
// QuantizeRow / DequantizeRow (quant.h).
#pragma once

#include <cstdint>

#include "quant/blocks.h"

namespace grove {

void QuantizeRowQ2_K(const float* src, BlockQ2_K* dst, int64_t n_blocks);
void DequantizeRowQ2_K(const BlockQ2_K* src, float* dst, int64_t n_blocks);
void QuantizeRowQ3_K(const float* src, BlockQ3_K* dst, int64_t n_blocks);
void DequantizeRowQ3_K(const BlockQ3_K* src, float* dst, int64_t n_blocks);
void QuantizeRowQ4_K(const float* src, BlockQ4_K* dst, int64_t n_blocks);
void DequantizeRowQ4_K(const BlockQ4_K* src, float* dst, int64_t n_blocks);
void QuantizeRowQ5_K(const float* src, BlockQ5_K* dst, int64_t n_blocks);
void DequantizeRowQ5_K(const BlockQ5_K* src, float* dst, int64_t n_blocks);
void QuantizeRowQ6_K(const float* src, BlockQ6_K* dst, int64_t n_blocks);
void DequantizeRowQ6_K(const BlockQ6_K* src, float* dst, int64_t n_blocks);
void DequantizeRowIQ4_XS(const BlockIQ4_XS* src, float* dst, int64_t n_blocks);

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K or Q5_K block (see BlockQ4_K).
void UnpackQ4_KScaleMin(const uint8_t* scales, int j, int* sc, int* m);

}  // namespace grove
