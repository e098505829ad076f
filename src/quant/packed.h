// The row-group layout: weight rows of a Q8_0, Q4_0, IQ4_NL, Q4_K or F16 matrix regrouped at load
// so that one SIMD register holds the same 4 elements of 16 rows (kernels/kernel_set.h,
// GroupKernelFn).
//
// A row-wise kernel computes one output per weight row and reduces 16 lanes horizontally for each
// of them; with the rows regrouped, lane j of every vpdpbusd accumulates row j of the group, so a
// block costs 8 vpdpbusd and one float multiply-add for 16 rows and no horizontal sum remains.
//
// Group g of a matrix holds rows [16 g, 16 g + 16) in exactly the bytes of those 16 GGUF rows
// (it starts at 16 g * row_bytes); a last partial group is padded with zero rows (scale 0).
// The rows are cut into units, a block of 32 (Q8_0, Q4_0, IQ4_NL) or a super-block of 256 (Q4_K),
// and unit u of the group holds unit u of its 16 rows. A chunk is 4 bytes of each row, row after
// row (64 bytes, one register).
//   Q8_0  8 chunks: quant bytes 4c .. 4c + 3 stored as q + 128 (unsigned); then 16 fp16 scales
//   Q4_0  4 chunks: the GGUF bytes unchanged (low nibbles are elements 4c .. 4c + 3, high nibbles
//         elements 16 + 4c ..); then 16 fp16 scales
//   IQ4_NL as Q4_0 (its block has Q4_0's shape; the nibbles index the 16 levels)
//   Q4_K  4 pairs of sub-blocks x 8 chunks of qs (pair p, chunk c: bytes 32p + 4c .. + 3, low
//         nibbles sub-block 2p, high nibbles 2p + 1); then 16 d, 16 dmin (fp16); then the 12
//         packed 6-bit scale bytes as 3 chunks (word w of every row)
//   F16   element by element: element k of the 16 rows side by side (32 bytes)
// Packing is lossless: UnpackRowGroup restores the GGUF bytes exactly.
#pragma once

#include <cstdint>

#include "io/ggml_type.h"

namespace grove {

inline constexpr int kGroupRows = 16;
// The layout's version: raise it with any change to what PackRowGroup writes, so that packed
// weights an earlier grove kept (model/packed_weight_cache.h) are packed again.
inline constexpr int kPackedLayoutVersion = 1;

// Byte offsets within one Q4_K super-block of a group (2304 bytes): the quants, 16 rows x 128
// bytes as 32 chunks; then 16 d; 16 dmin; and the 12 scale bytes of each row as 3 chunks.
inline constexpr int kQ4_KGroupD = 2048;
inline constexpr int kQ4_KGroupDmin = kQ4_KGroupD + 2 * kGroupRows;
inline constexpr int kQ4_KGroupScales = kQ4_KGroupDmin + 2 * kGroupRows;
inline constexpr int kQ4_KGroupScaleChunk = 4 * kGroupRows;  // bytes of one of the 3 chunks

// True for the types with a row-group layout (Q8_0, Q4_0, IQ4_NL, Q4_K, F16).
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
