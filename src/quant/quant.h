// Weight types grove computes with: conversion of rows between float and each block format.
// Layouts are GGUF/ggml-compatible bit for bit (see quant/blocks.h).
#pragma once

#include <cstdint>

#include "io/ggml_type.h"

namespace grove {

// True for the types that grove can dequantize, quantize and multiply: F32, F16, BF16, Q8_0, Q4_0,
// Q4_K, Q6_K (k-quant rows must be multiples of 256 elements).
bool IsSupportedWeightType(GgmlType type);

// n must be a multiple of the type's block size. Types that are not supported throw grove::Error.
void DequantizeRow(GgmlType type, const void* src, float* dst, int64_t n);
void QuantizeRow(GgmlType type, const float* src, void* dst, int64_t n);

}  // namespace grove
