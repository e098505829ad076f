// MXFP4 rows (quant/blocks.h): the dequantizer, and the quantizer of ggml's quantize_row_mxfp4_ref
// bit for bit, so that an expert tensor grove writes is the one llama-quantize's MXFP4_MOE writes.
// Internal to quant/: callers use QuantizeRow / DequantizeRow (quant.h).
#pragma once

#include <cstdint>

#include "quant/blocks.h"

namespace grove {

void QuantizeRowMXFP4(const float* src, BlockMXFP4* dst, int64_t n_blocks);
void DequantizeRowMXFP4(const BlockMXFP4* src, float* dst, int64_t n_blocks);

}  // namespace grove
