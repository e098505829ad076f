// The row-group layout: weight rows of a Q8_0 or Q4_0 matrix regrouped at load so that one SIMD
// register holds the same 4 elements of 16 rows (kernels/kernel_set.h, GroupKernelFn).
//
// A row-wise kernel computes one output per weight row and reduces 16 lanes horizontally for each
// of them; with the rows regrouped, lane j of every vpdpbusd accumulates row j of the group, so a
// block costs 8 vpdpbusd and one float multiply-add for 16 rows and no horizontal sum remains.
//
// Group g of a matrix holds rows [16 g, 16 g + 16) in exactly the bytes of those 16 GGUF rows
// (it starts at 16 g * row_bytes); a last partial group is padded with zero rows (scale 0). For
// n_blocks blocks of 32 per row:
//   quants  n_blocks x kGroupRows x block quant bytes, block by block; within block b, chunk c
//           holds 4 bytes of each row, row after row: bytes 4c .. 4c + 3 of that row's block b
//             Q8_0: 8 chunks of 64 bytes, elements 4c .. 4c + 3 stored as q + 128 (unsigned)
//             Q4_0: 4 chunks of 64 bytes, the GGUF bytes unchanged: low nibbles are elements
//                   4c .. 4c + 3, high nibbles elements 16 + 4c .. 16 + 4c + 3
//   scales  n_blocks x kGroupRows fp16 scales, block by block
// Packing is lossless: UnpackRowGroup restores the GGUF bytes exactly.
#pragma once

#include <cstdint>

#include "io/ggml_type.h"

namespace grove {

inline constexpr int kGroupRows = 16;

// True for the types with a row-group layout (Q8_0, Q4_0).
bool HasGroupLayout(GgmlType type);

// Bytes of one group of n_in elements: kGroupRows GGUF rows.
int64_t GroupBytes(GgmlType type, int64_t n_in);

// Packs n_rows (1..kGroupRows) GGUF rows, row i at rows + i * row_bytes, into one group.
void PackRowGroup(GgmlType type, const void* rows, int64_t row_bytes, int n_rows, int64_t n_in,
                  void* group);

// The inverse: writes the first n_rows rows of a group back in GGUF layout.
void UnpackRowGroup(GgmlType type, const void* group, int n_rows, int64_t n_in, void* rows,
                    int64_t row_bytes);

}  // namespace grove
