// The formats with one scale per block of 32 (ggml's "legacy" quants Q8_0, Q4_0, Q4_1, Q5_0,
// Q5_1, and IQ4_NL, whose 16 levels are non-linear): row dequantizers, and quantizers that
// reproduce ggml's reference ones (quantize_row_*_ref) bit for bit, so a file grove writes equals
// what llama-quantize writes without an importance matrix. IQ4_NL's quantizer searches its scale
// and lives with IQ4_XS's (iq4_quants.h). Internal to quant/: callers use QuantizeRow /
// DequantizeRow (quant.h).
#pragma once

#include <cstdint>

#include "quant/blocks.h"

namespace grove {

void QuantizeRowQ8_0(const float* src, BlockQ8_0* dst, int64_t n_blocks);
void DequantizeRowQ8_0(const BlockQ8_0* src, float* dst, int64_t n_blocks);
void QuantizeRowQ4_0(const float* src, BlockQ4_0* dst, int64_t n_blocks);
void DequantizeRowQ4_0(const BlockQ4_0* src, float* dst, int64_t n_blocks);
void QuantizeRowQ4_1(const float* src, BlockQ4_1* dst, int64_t n_blocks);
void DequantizeRowQ4_1(const BlockQ4_1* src, float* dst, int64_t n_blocks);
void QuantizeRowQ5_0(const float* src, BlockQ5_0* dst, int64_t n_blocks);
void DequantizeRowQ5_0(const BlockQ5_0* src, float* dst, int64_t n_blocks);
void QuantizeRowQ5_1(const float* src, BlockQ5_1* dst, int64_t n_blocks);
void DequantizeRowQ5_1(const BlockQ5_1* src, float* dst, int64_t n_blocks);
void DequantizeRowIQ4_NL(const BlockIQ4_NL* src, float* dst, int64_t n_blocks);

}  // namespace grove
