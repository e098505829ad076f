// Quantizers for the two formats built on the 16 non-linear IQ4_NL levels: IQ4_NL (one fp16 scale
// per 32 elements) and IQ4_XS (a 256-element super-block: one fp16 scale, eight 6-bit sub-block
// scales). Both reproduce what ggml_quantize_chunk writes without an importance matrix (its
// quantize_iq4_nl / quantize_iq4_xs: a search over 15 candidate scales per 32 elements, squared
// error weighted by x^2), so a file grove writes equals llama-quantize's bit for bit. Internal to
// quant/: callers use QuantizeRow (quant.h). Dequantizers live with their block families
// (block32_quants.h, k_quants.h).
#pragma once

#include <cstdint>

#include "quant/blocks.h"

namespace grove {

void QuantizeRowIQ4_NL(const float* src, BlockIQ4_NL* dst, int64_t n_blocks);
void QuantizeRowIQ4_XS(const float* src, BlockIQ4_XS* dst, int64_t n_blocks);

}  // namespace grove
