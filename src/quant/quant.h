// Weight types grove reads, writes and computes with: conversion of rows between float and each
// block format. Layouts are GGUF/ggml-compatible bit
// for bit (see quant/blocks.h). One table (quant.cc) says, per type, what grove can do with it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "io/ggml_type.h"

namespace grove {

// Rows of the type can be dequantized: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL,
// MXFP4, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS.
bool CanDequantize(GgmlType type);
// The first block of n elements at `data` whose scale is NaN or infinite (a damaged file: every
// value of that block would be; for MXFP4, an exponent byte of 0xFF), or -1. Reads the scales
// only; -1 for the float types.
int64_t FirstNonFiniteScale(GgmlType type, const void* data, int64_t n);
// What such a block holds, for messages: "a NaN or infinite scale", or MXFP4's "an exponent of
// 0xFF (E8M0's NaN)".
std::string_view BadScaleDescription(GgmlType type);
// grove writes the type, byte for byte as ggml's quantizer without an importance matrix: every
// type it reads (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4, Q2_K, Q3_K, Q4_K,
// Q5_K, Q6_K, IQ4_XS).
bool CanQuantize(GgmlType type);

// True when a model's matrix may have this type: every type grove reads has its own kernels
// (kernels/kernel_set.h), so this is CanDequantize; a separate name for what a model needs.
bool IsSupportedWeightType(GgmlType type);
// "f32, f16, ..." — the types IsSupportedWeightType accepts, for messages.
std::string SupportedWeightTypeNames();

// n must be a multiple of the type's block size. Types that cannot be converted throw grove::Error.
void DequantizeRow(GgmlType type, const void* src, float* dst, int64_t n);
void QuantizeRow(GgmlType type, const float* src, void* dst, int64_t n);

}  // namespace grove
