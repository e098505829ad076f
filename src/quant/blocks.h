// Block formats of the quantized weight types, laid out exactly as ggml/GGUF stores them, so a
// tensor memory-mapped from a GGUF file is used in place.
//
// This header holds plain structs only (no inline functions): it is included by the SIMD kernel
// files, which are compiled with -mavx2/-mavx512*, and an inline function emitted there could be
// the copy the linker keeps for the whole program (see kernels/CMakeLists.txt).
#pragma once

#include <cstdint>

namespace grove {

// Elements per block of Q8_0 and Q4_0 (ggml's QK8_0 and QK4_0).
inline constexpr int kQBlock = 32;

// Q8_0: value = qs[j] * d, d stored as IEEE fp16 bits.
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQBlock];
};
static_assert(sizeof(BlockQ8_0) == 34, "BlockQ8_0 must match ggml's block_q8_0");

// Q4_0: element j (j < 16) is the low nibble of qs[j], element j + 16 the high nibble of qs[j];
// value = (nibble - 8) * d, d stored as IEEE fp16 bits.
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQBlock / 2];
};
static_assert(sizeof(BlockQ4_0) == 18, "BlockQ4_0 must match ggml's block_q4_0");

// Q4_1: nibbles as Q4_0; value = nibble * d + m (d, m fp16).
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQBlock / 2];
};
static_assert(sizeof(BlockQ4_1) == 20, "BlockQ4_1 must match ggml's block_q4_1");

// Q5_0: 5-bit quants q in [0, 31]; the low 4 bits are nibbles as in Q4_0 and bit 4 of element j is
// bit j of qh (read as a little-endian uint32); value = (q - 16) * d.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQBlock / 2];
};
static_assert(sizeof(BlockQ5_0) == 22, "BlockQ5_0 must match ggml's block_q5_0");

// Q5_1: quants as Q5_0; value = q * d + m.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQBlock / 2];
};
static_assert(sizeof(BlockQ5_1) == 24, "BlockQ5_1 must match ggml's block_q5_1");

// IQ4_NL: nibbles as Q4_0, each an index into a fixed non-linear table of 16 int8 levels
// (kIq4NlLevels, quant/iq4_levels.h); value = level * d.
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[kQBlock / 2];
};
static_assert(sizeof(BlockIQ4_NL) == 18, "BlockIQ4_NL must match ggml's block_iq4_nl");

// MXFP4 (the OCP microscaling format, ggml's block_mxfp4): nibbles as Q4_0, each an FP4 E2M1 value
// (kMxfp4Levels, quant/mxfp4_levels.h, doubled so they are integers); value = level * 2^(e - 128),
// e an E8M0 exponent byte (0xFF, E8M0's NaN, is invalid). No fp16 scale: the block is 17 bytes
// with byte alignment.
struct BlockMXFP4 {
  uint8_t e;
  uint8_t qs[kQBlock / 2];
};
static_assert(sizeof(BlockMXFP4) == 17, "BlockMXFP4 must match ggml's block_mxfp4");

// Elements per super-block of the k-quants (ggml's QK_K).
inline constexpr int kKBlock = 256;

// Q2_K: sixteen sub-blocks of 16 elements; scales[i] holds sub-block i's 4-bit scale (low nibble)
// and 4-bit min (high nibble); value = fp16(d) * scale * q - fp16(dmin) * min, q a 2-bit quant in
// [0, 3]. qs: 128 elements per 32 bytes; element 128h + 32c + r (h < 2, c < 4, r < 32) is bits
// 2c, 2c + 1 of qs[32h + r].
struct BlockQ2_K {
  uint8_t scales[kKBlock / 16];
  uint8_t qs[kKBlock / 4];
  uint16_t d;
  uint16_t dmin;
};
static_assert(sizeof(BlockQ2_K) == 84, "BlockQ2_K must match ggml's block_q2_K");

// Q3_K: sixteen sub-blocks of 16 elements with 6-bit scales sc[i];
// value = fp16(d) * (sc[e / 16] - 32) * q, q a signed 3-bit quant in [-4, 3].
// The low 2 bits of q are stored as Q2_K's qs; its high bit is bit e / 32 of hmask[e % 32], and
// q = low - 4 where that bit is clear, low where it is set.
// scales packs the 16 six-bit numbers into 12 bytes: the low 4 bits of sc[i] are the low (i < 8)
// or high (i >= 8) nibble of scales[i % 8], its top 2 bits are bits 2(i / 4), 2(i / 4) + 1 of
// scales[8 + i % 4].
struct BlockQ3_K {
  uint8_t hmask[kKBlock / 8];
  uint8_t qs[kKBlock / 4];
  uint8_t scales[12];
  uint16_t d;
};
static_assert(sizeof(BlockQ3_K) == 110, "BlockQ3_K must match ggml's block_q3_K");

// Q4_K: eight sub-blocks of 32 elements, each with a 6-bit scale sc[j] and a 6-bit min m[j];
// value = fp16(d) * sc[j] * q - fp16(dmin) * m[j], q a 4-bit quant in [0, 15].
// scales packs the 16 six-bit numbers into 12 bytes: for j < 4, sc[j] and m[j] are the low 6 bits
// of scales[j] and scales[j + 4]; for j >= 4, the low nibble of scales[j + 4] holds the low 4 bits
// of sc[j] and its high nibble those of m[j], and their top 2 bits sit in bits 6-7 of scales[j - 4]
// (sc) and scales[j] (m).
// qs: 64 elements per 32 bytes; element 64g + l (l < 32) is the low nibble of qs[32g + l] and
// element 64g + 32 + l its high nibble.
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[kKBlock / 2];
};
static_assert(sizeof(BlockQ4_K) == 144, "BlockQ4_K must match ggml's block_q4_K");

// Q5_K: eight sub-blocks of 32 elements with scales and mins packed exactly as Q4_K's;
// value = fp16(d) * sc[j] * q - fp16(dmin) * m[j], q a 5-bit quant in [0, 31]. The low 4 bits of
// q are stored as Q4_K's qs; bit 4 of element e is bit e / 32 of qh[e % 32].
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[kKBlock / 8];
  uint8_t qs[kKBlock / 2];
};
static_assert(sizeof(BlockQ5_K) == 176, "BlockQ5_K must match ggml's block_q5_K");

// Q6_K: sixteen sub-blocks of 16 elements with signed 8-bit scales;
// value = fp16(d) * scales[e / 16] * (q - 32), q a 6-bit quant in [0, 63].
// Each half h (128 elements) uses ql[64h .. 64h + 64) and qh[32h .. 32h + 32). For l < 32, element
// 128h + 32c + l (c = 0..3) takes its low 4 bits from ql[64h + 32(c % 2) + l] (the low nibble for
// c < 2, the high nibble otherwise) and its top 2 bits from bits 2c, 2c + 1 of qh[32h + l].
struct BlockQ6_K {
  uint8_t ql[kKBlock / 2];
  uint8_t qh[kKBlock / 4];
  int8_t scales[kKBlock / 16];
  uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210, "BlockQ6_K must match ggml's block_q6_K");

// IQ4_XS: eight sub-blocks of 32 elements, each a 6-bit scale ls[j] and 32 nibbles indexing the
// IQ4_NL levels; value = fp16(d) * (ls[j] - 32) * level. The low 4 bits of ls[j] are the low
// (j even) or high (j odd) nibble of scales_l[j / 2], its top 2 bits bits 2j, 2j + 1 of scales_h
// (a little-endian uint16). qs: 16 bytes per sub-block, nibbles as IQ4_NL's (element 32j + r,
// r < 16, is the low nibble of qs[16j + r], element 32j + 16 + r its high nibble).
struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[kKBlock / 64];
  uint8_t qs[kKBlock / 2];
};
static_assert(sizeof(BlockIQ4_XS) == 136, "BlockIQ4_XS must match ggml's block_iq4_xs");

static_assert(alignof(BlockQ8_0) == 2 && alignof(BlockQ4_0) == 2 && alignof(BlockQ4_1) == 2 &&
                  alignof(BlockQ5_0) == 2 && alignof(BlockQ5_1) == 2 && alignof(BlockIQ4_NL) == 2 &&
                  alignof(BlockQ2_K) == 2 && alignof(BlockQ3_K) == 2 && alignof(BlockQ4_K) == 2 &&
                  alignof(BlockQ5_K) == 2 && alignof(BlockQ6_K) == 2 && alignof(BlockIQ4_XS) == 2,
              "blocks are packed back to back in GGUF rows");

}  // namespace grove
