// AVX-512 kernels: F, BW, VL and VNNI (Ice Lake, Sapphire Rapids, Zen 4, Zen 5).
//
// Compiled with -mavx512f -mavx512bw -mavx512vl -mavx512vnni (plus AVX2/FMA/F16C) and
// -ffp-contract=off (CMakeLists.txt). Everything here lives in an anonymous namespace and uses
// intrinsics only, so no inline function of a shared header is compiled with these flags.
//
// Batch invariance: a tile of R activation rows runs, for every row, exactly the instruction
// sequence a tile of one row runs; accumulators are per row, the lane assignment and the final
// horizontal sum depend only on n_in. Hence any split of a batch into tiles gives bit-identical
// outputs.

// GCC 12 warns that the _mm*_undefined_*() values inside its own intrinsics may be used
// uninitialized (GCC bug 105593, fixed in 13); the warning is about the header, not this code.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cfloat>
#include <cstdint>
#include <cstring>

#include "kernels/act_block_sums.h"
#include "kernels/block_scales.h"
#include "kernels/grouped_rows.h"
#include "kernels/kernel_tables.h"
#include "quant/blocks.h"
#include "quant/iq4_levels.h"
#include "quant/mxfp4_levels.h"

namespace grove {
namespace {

// 32 registers: 8 rows x 2 accumulators plus decoded weights and temporaries.
constexpr int kTile = kMaxTileRows;

// Fixed reduction tree (16 -> 8 -> 4 -> 2 -> 1); every output goes through exactly this sequence.
float Hsum(__m512 v) {
  v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(1, 0, 3, 2)));
  v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(2, 3, 0, 1)));
  __m128 s = _mm512_castps512_ps128(v);
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

const uint8_t* RowPtr(const void* x, int64_t stride, int i) {
  return static_cast<const uint8_t*>(x) + i * stride;
}

template <int R>
struct Rows {
  static constexpr int kR = R;
};

// Splits n_x (<= kMaxTileRows) rows into one tile: tile(Rows<n_x>{}, 0).
template <typename TileFn>
void ForEachTile(int n_x, TileFn&& tile) {
  int i = 0;
  for (; i + kTile <= n_x; i += kTile) tile(Rows<kTile>{}, i);
  switch (n_x - i) {
    case 7:
      tile(Rows<7>{}, i);
      break;
    case 6:
      tile(Rows<6>{}, i);
      break;
    case 5:
      tile(Rows<5>{}, i);
      break;
    case 4:
      tile(Rows<4>{}, i);
      break;
    case 3:
      tile(Rows<3>{}, i);
      break;
    case 2:
      tile(Rows<2>{}, i);
      break;
    case 1:
      tile(Rows<1>{}, i);
      break;
    default:
      break;
  }
}

// ---- Float weights (f32, f16, bf16) times float activations
//
// Weights are widened to f32 in registers and multiplied with FMA: exact products of the stored
// weights, no bf16 rounding of activations (vdpbf16ps would round them to 8 bits of mantissa).

struct F32Weights {
  using T = float;
  static __m512 Load(const float* p) { return _mm512_loadu_ps(p); }
  static __m512 LoadPartial(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
};
struct F16Weights {
  using T = uint16_t;
  static __m512 Load(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static __m512 LoadPartial(const uint16_t* p, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
  }
};
struct Bf16Weights {
  using T = uint16_t;
  static __m512 Widen(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static __m512 Load(const uint16_t* p) {
    return Widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static __m512 LoadPartial(const uint16_t* p, __mmask16 m) {
    return Widen(_mm256_maskz_loadu_epi16(m, p));
  }
};

// Two accumulators per row (even and odd groups of 16 elements) hide the FMA latency when a tile
// has a single row (decode); the < 16 element tail uses masked loads.
template <typename W, int R>
void FloatTile(const typename W::T* w, int64_t n, const void* x, int64_t x_stride, float* y,
               int64_t y_stride) {
  const float* xr[R];
  for (int i = 0; i < R; ++i) xr[i] = reinterpret_cast<const float*>(RowPtr(x, x_stride, i));
  __m512 acc0[R], acc1[R];
  for (int i = 0; i < R; ++i) acc0[i] = acc1[i] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 32 <= n; k += 32) {
    const __m512 w0 = W::Load(w + k);
    const __m512 w1 = W::Load(w + k + 16);
    for (int i = 0; i < R; ++i) {
      acc0[i] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(xr[i] + k), acc0[i]);
      acc1[i] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(xr[i] + k + 16), acc1[i]);
    }
  }
  if (k + 16 <= n) {
    const __m512 w0 = W::Load(w + k);
    for (int i = 0; i < R; ++i) acc0[i] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(xr[i] + k), acc0[i]);
    k += 16;
  }
  if (k < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - k)) - 1);
    const __m512 w0 = W::LoadPartial(w + k, m);
    for (int i = 0; i < R; ++i) {
      acc1[i] = _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(m, xr[i] + k), acc1[i]);
    }
  }
  for (int i = 0; i < R; ++i) y[i * y_stride] = Hsum(_mm512_add_ps(acc0[i], acc1[i]));
}

template <typename W>
void DotFloat(const void* w_row, int64_t n_in, const void* x, int64_t x_stride, int n_x, float* y,
              int64_t y_stride) {
  const auto* w = static_cast<const typename W::T*>(w_row);
  ForEachTile(n_x, [&](auto rows, int i) {
    FloatTile<W, decltype(rows)::kR>(w, n_in, RowPtr(x, x_stride, i), x_stride, y + i * y_stride,
                                     y_stride);
  });
}

// ---- Q8_0 / Q4_0 / Q5_0 / IQ4_NL / MXFP4 weights times ActQ8 activations
//
// One 512-bit step covers a pair of blocks (64 weights). vpdpbusd sums groups of 4 byte products
// into 16 int32 lanes; the two blocks' 4-byte groups are interleaved (lane l belongs to block
// b + l % 2), so the per-block scales of a pair form the repeating pattern [d_b, d_b+1, d_b, ...],
// which one 64-bit broadcast load produces. The activation quantizer stores its quants already
// interleaved; the weights are interleaved in registers (one permute per pair, shared by all rows).
//
// This level's ActQ8 quants are unsigned bytes u = q + 128, because vpdpbusd multiplies unsigned by
// signed bytes. sum(u * w) = sum(q * w) + 128 * sum(w); the correction -128 * sum(w) depends on the
// weights only, so it is computed once per pair (one vpdpbusd with a vector of 128s) and is the
// starting value of each row's vpdpbusd.
//
// Per pair each row costs one 64-byte load, one 8-byte broadcast load, vpdpbusd, convert, multiply
// and FMA; the scales stay one float per block, so 8 rows of 2048 activations take 18 KB and stay
// in L1 while the weights stream past (with 16 floats per pair they took 33 KB and 8-row tiles ran
// at half speed).

// The permutation of int32 lanes that takes [a (32 bytes), b (32 bytes)] in one register to
// 4-byte groups a0 b0 a1 b1 ... a7 b7. (A function, not a namespace-scope constant: its
// initializer would run AVX-512 code at start-up on every CPU.)
__m512i PairOrder() {
  return _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
}

__m512i InterleavePair(__m256i a, __m256i b) {
  return _mm512_permutexvar_epi32(PairOrder(), _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1));
}

// Each weight type yields a pair of blocks as 64 signed bytes in the interleaved order, or a last
// unpaired block interleaved with zeros.
struct Q8_0Weights {
  using Block = BlockQ8_0;
  static __m256i Load(const BlockQ8_0& b) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
  }
  static __m512i LoadPair(const BlockQ8_0* w) { return InterleavePair(Load(w[0]), Load(w[1])); }
  static __m512i LoadSingle(const BlockQ8_0* w) {
    return InterleavePair(Load(w[0]), _mm256_setzero_si256());
  }
};
struct Q4_0Weights {
  using Block = BlockQ4_0;
  static __m128i Load(const BlockQ4_0& b) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
  }
  // Both blocks' nibbles are decoded at once into 128-bit lanes [lo(b0), lo(b1), hi(b0), hi(b1)]:
  // elements 0-15 of b0, 0-15 of b1, 16-31 of b0, 16-31 of b1; one permute interleaves them.
  static __m512i Decode(__m256i q) {
    const __m512i nibbles =
        _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(q), _mm256_srli_epi16(q, 4), 1),
                         _mm512_set1_epi8(0x0f));
    const __m512i order = _mm512_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15);
    return _mm512_permutexvar_epi32(order, _mm512_sub_epi8(nibbles, _mm512_set1_epi8(8)));
  }
  static __m512i LoadPair(const BlockQ4_0* w) {
    return Decode(_mm256_inserti128_si256(_mm256_castsi128_si256(Load(w[0])), Load(w[1]), 1));
  }
  static __m512i LoadSingle(const BlockQ4_0* w) {
    // The missing block decodes to -8s in the odd groups; clear them.
    return _mm512_maskz_mov_epi32(0x5555, Decode(_mm256_castsi128_si256(Load(w[0]))));
  }
};

__m256i Nibbles(const uint8_t* qs) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_and_si256(
      _mm256_inserti128_si256(_mm256_castsi128_si256(q), _mm_srli_epi16(q, 4), 1),
      _mm256_set1_epi8(0x0f));
}

// The 32 bits of a Q5_1 block's qh as 32 bytes, 0x10 where the bit is set (bit 4 of the quant).
__m256i HighBits(const uint8_t* qh) {
  uint32_t bits;
  std::memcpy(&bits, qh, sizeof(bits));
  const __m256i set = _mm256_movm_epi8(static_cast<__mmask32>(bits));
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

// Q5_0, IQ4_NL and MXFP4 decode one block at a time (32 signed bytes), paired like Q8_0's.
template <typename Derived, typename BlockT>
struct Block32Weights {
  using Block = BlockT;
  static __m512i LoadPair(const BlockT* w) {
    return InterleavePair(Derived::Load(w[0]), Derived::Load(w[1]));
  }
  static __m512i LoadSingle(const BlockT* w) {
    return InterleavePair(Derived::Load(w[0]), _mm256_setzero_si256());
  }
};
struct Q5_0Weights : Block32Weights<Q5_0Weights, BlockQ5_0> {
  static __m256i Load(const BlockQ5_0& b) {
    return _mm256_sub_epi8(_mm256_or_si256(Nibbles(b.qs), HighBits(b.qh)), _mm256_set1_epi8(16));
  }
};
// IQ4_NL and MXFP4: each nibble replaced by its level with a byte shuffle.
template <typename BlockT, const int8_t* kLevels>
struct LevelWeights : Block32Weights<LevelWeights<BlockT, kLevels>, BlockT> {
  static __m256i Load(const BlockT& b) {
    const __m256i levels =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kLevels)));
    return _mm256_shuffle_epi8(levels, Nibbles(b.qs));
  }
};
using IQ4_NLWeights = LevelWeights<BlockIQ4_NL, kIq4NlLevels>;
using MXFP4Weights = LevelWeights<BlockMXFP4, kMxfp4Levels>;

// fp16 scales of two blocks as [d0, d1, d0, d1, ...].
__m512 PairScales(uint16_t d0, uint16_t d1) {
  const uint32_t both = d0 | (static_cast<uint32_t>(d1) << 16);
  const __m128 f = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(both)));
  return _mm512_castpd_ps(_mm512_broadcastsd_pd(_mm_castps_pd(f)));
}

// The steps of block b and, unless kSingle, b + 1 (else 0) as [s0, s1, s0, s1, ...]: fp16 d, or
// MXFP4's 2^(e - 128).
template <bool kSingle, typename Block>
__m512 BlockPairSteps(const Block* w) {
  if constexpr (requires { w->e; }) {
    const float steps[2] = {kMxfp4Scales[w[0].e], kSingle ? 0.0f : kMxfp4Scales[w[1].e]};
    uint64_t bits;
    std::memcpy(&bits, steps, sizeof(bits));
    return _mm512_castsi512_ps(_mm512_set1_epi64(static_cast<long long>(bits)));
  } else {
    return PairScales(w[0].d, kSingle ? uint16_t{0} : w[1].d);
  }
}

// Two consecutive float scales of one activation row as [s0, s1, s0, s1, ...] (s1 = 0 for a last
// unpaired block, whose scale slot b + 1 does not exist).
template <bool kSingle>
__m512 ActPairScales(const float* scales) {
  uint64_t bits = 0;
  std::memcpy(&bits, scales, kSingle ? 4 : 8);
  return _mm512_castsi512_ps(_mm512_set1_epi64(static_cast<long long>(bits)));
}

__m512i NegatedOffsetSums(__m512i wq) {
  const __m512i zero = _mm512_setzero_si512();
  return _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, _mm512_set1_epi8(char{-128}), wq));
}

template <int R>
struct QuantRows {
  const uint8_t* q[R];
  const float* scales[R];
};

// One step over the pair of blocks starting at block b (for kSingle, one last block and zeros).
template <int R, bool kSingle>
inline void QuantStep(__m512i wq, __m512 wd, const QuantRows<R>& rows, int64_t b, __m512* acc) {
  const __m512i offset = NegatedOffsetSums(wq);
  for (int i = 0; i < R; ++i) {
    const __m512i xq = _mm512_loadu_si512(rows.q[i] + b * kQBlock);
    const __m512i sums = _mm512_dpbusd_epi32(offset, xq, wq);
    const __m512 scale = _mm512_mul_ps(wd, ActPairScales<kSingle>(rows.scales[i] + b));
    acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), scale, acc[i]);
  }
}

template <typename W, int R>
void QuantTile(const typename W::Block* w, int64_t n_blocks, int64_t scale_offset, const void* x,
               int64_t x_stride, float* y, int64_t y_stride) {
  QuantRows<R> rows;
  for (int i = 0; i < R; ++i) {
    rows.q[i] = RowPtr(x, x_stride, i);
    rows.scales[i] = reinterpret_cast<const float*>(rows.q[i] + scale_offset);
  }
  __m512 acc[R];
  for (int i = 0; i < R; ++i) acc[i] = _mm512_setzero_ps();
  int64_t b = 0;
  for (; b + 2 <= n_blocks; b += 2) {
    QuantStep<R, false>(W::LoadPair(w + b), BlockPairSteps<false>(w + b), rows, b, acc);
  }
  if (b < n_blocks) {
    QuantStep<R, true>(W::LoadSingle(w + b), BlockPairSteps<true>(w + b), rows, b, acc);
  }
  for (int i = 0; i < R; ++i) y[i * y_stride] = Hsum(acc[i]);
}

template <typename W>
void DotQuant(const void* w_row, int64_t n_in, const void* x, int64_t x_stride, int n_x, float* y,
              int64_t y_stride) {
  const auto* w = static_cast<const typename W::Block*>(w_row);
  const int64_t scale_offset = ActQ8ScaleOffset(n_in);
  ForEachTile(n_x, [&](auto rows, int i) {
    QuantTile<W, decltype(rows)::kR>(w, n_in / kQBlock, scale_offset, RowPtr(x, x_stride, i),
                                     x_stride, y + i * y_stride, y_stride);
  });
}

// ---- Q4_1 / Q5_1 weights (value = d q + m, q unsigned 0..31) times ActQ8 activations
//
// Pairs of blocks go through QuantStep as Q8_0's do; the min term m (d_b sum x_q) is one scalar
// multiply-add per block and row on the activation block sums, in its own accumulator added at the
// end.

struct Q4_1Weights {
  using Block = BlockQ4_1;
  static __m256i Load(const BlockQ4_1& b) { return Nibbles(b.qs); }
};
struct Q5_1Weights {
  using Block = BlockQ5_1;
  static __m256i Load(const BlockQ5_1& b) { return _mm256_or_si256(Nibbles(b.qs), HighBits(b.qh)); }
};

template <typename W, int R>
void OffsetTile(const typename W::Block* w, int64_t n_blocks, int64_t scale_offset,
                int64_t sum_offset, const void* x, int64_t x_stride, float* y, int64_t y_stride) {
  QuantRows<R> rows;
  const float* sums[R];
  for (int i = 0; i < R; ++i) {
    rows.q[i] = RowPtr(x, x_stride, i);
    rows.scales[i] = reinterpret_cast<const float*>(rows.q[i] + scale_offset);
    sums[i] = reinterpret_cast<const float*>(rows.q[i] + sum_offset);
  }
  __m512 acc[R];
  float min_acc[R];
  for (int i = 0; i < R; ++i) {
    acc[i] = _mm512_setzero_ps();
    min_acc[i] = 0.0f;
  }
  int64_t b = 0;
  for (; b + 2 <= n_blocks; b += 2) {
    QuantStep<R, false>(InterleavePair(W::Load(w[b]), W::Load(w[b + 1])),
                        PairScales(w[b].d, w[b + 1].d), rows, b, acc);
    const float m0 = _cvtsh_ss(w[b].m), m1 = _cvtsh_ss(w[b + 1].m);
    for (int i = 0; i < R; ++i) {
      min_acc[i] += m0 * sums[i][b];
      min_acc[i] += m1 * sums[i][b + 1];
    }
  }
  if (b < n_blocks) {
    QuantStep<R, true>(InterleavePair(W::Load(w[b]), _mm256_setzero_si256()), PairScales(w[b].d, 0),
                       rows, b, acc);
    const float m0 = _cvtsh_ss(w[b].m);
    for (int i = 0; i < R; ++i) min_acc[i] += m0 * sums[i][b];
  }
  for (int i = 0; i < R; ++i) y[i * y_stride] = Hsum(acc[i]) + min_acc[i];
}

template <typename W>
void DotOffset(const void* w_row, int64_t n_in, const void* x, int64_t x_stride, int n_x, float* y,
               int64_t y_stride) {
  const auto* w = static_cast<const typename W::Block*>(w_row);
  const int64_t scale_offset = ActQ8ScaleOffset(n_in);
  const int64_t sum_offset = ActQ8SumOffset(n_in);
  ForEachTile(n_x, [&](auto rows, int i) {
    OffsetTile<W, decltype(rows)::kR>(w, n_in / kQBlock, scale_offset, sum_offset,
                                      RowPtr(x, x_stride, i), x_stride, y + i * y_stride, y_stride);
  });
}

// ---- k-quant weights (Q2_K ... Q6_K, IQ4_XS) times ActQ8 activations
//
// A 256-element super-block is four pairs of activation blocks, and both formats decode a pair
// from contiguous bytes (Q4_K: the low and high nibbles of 32 bytes; Q6_K: 2 x 32 bytes of ql
// with the matching 2-bit fields of qh), so each pair goes through QuantStep exactly as Q8_0 does;
// only the weight scale vector differs. Q4_K's min term, sum_j dmin m_j d_b sum(x_bj), is one
// 8-lane FMA per super-block and row on the activation block sums (kernel_set.h), in a separate
// accumulator subtracted at the end; the decoded scales and all weight work are shared by the
// rows of a tile.

// 6-bit scales and mins of a Q4_K block (BlockQ4_K), as two vectors of 8 int32.
void UnpackScaleMin(const uint8_t* packed, __m256i* sc, __m256i* m) {
  uint32_t a[3];
  std::memcpy(a, packed, sizeof(a));
  const uint32_t sc_lo = a[0] & 0x3f3f3f3fu;
  const uint32_t m_lo = a[1] & 0x3f3f3f3fu;
  const uint32_t sc_hi = (a[2] & 0x0f0f0f0fu) | (((a[0] >> 6) & 0x03030303u) << 4);
  const uint32_t m_hi = ((a[2] >> 4) & 0x0f0f0f0fu) | (((a[1] >> 6) & 0x03030303u) << 4);
  *sc = _mm256_cvtepu8_epi32(
      _mm_cvtsi64_si128(static_cast<long long>(sc_lo | (static_cast<uint64_t>(sc_hi) << 32))));
  *m = _mm256_cvtepu8_epi32(
      _mm_cvtsi64_si128(static_cast<long long>(m_lo | (static_cast<uint64_t>(m_hi) << 32))));
}

float Hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Pair g (activation blocks 2g, 2g + 1) of a Q4_K or Q5_K block as 64 unsigned quants (0..31) in
// the interleaved order: Q4_K's low and high nibbles of 32 bytes, and for Q5_K bits 2g and
// 2g + 1 of each qh byte as their bit 4.
struct Q4_KQuants {
  using Block = BlockQ4_K;
  static __m512i LoadPair(const BlockQ4_K& w, int g) {
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qs + 32 * g));
    return InterleavePair(_mm256_and_si256(q, low4),
                          _mm256_and_si256(_mm256_srli_epi16(q, 4), low4));
  }
};
struct Q5_KQuants {
  using Block = BlockQ5_K;
  // Bit j (<= 7) of each byte of v moved to bit 4; a 16-bit shift keeps it in its own byte.
  static __m256i HighBit(__m256i v, int j) {
    const __m256i moved = j <= 4 ? _mm256_slli_epi16(v, 4 - j) : _mm256_srli_epi16(v, j - 4);
    return _mm256_and_si256(moved, _mm256_set1_epi8(0x10));
  }
  static __m512i LoadPair(const BlockQ5_K& w, int g) {
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qs + 32 * g));
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qh));
    return InterleavePair(
        _mm256_or_si256(_mm256_and_si256(q, low4), HighBit(qh, 2 * g)),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), low4), HighBit(qh, 2 * g + 1)));
  }
};

template <typename K, int R>
void ScaleMinTile(const typename K::Block* w, int64_t n_super, int64_t scale_offset,
                  int64_t sum_offset, const void* x, int64_t x_stride, float* y, int64_t y_stride) {
  QuantRows<R> rows;
  const float* sums[R];
  for (int i = 0; i < R; ++i) {
    rows.q[i] = RowPtr(x, x_stride, i);
    rows.scales[i] = reinterpret_cast<const float*>(rows.q[i] + scale_offset);
    sums[i] = reinterpret_cast<const float*>(rows.q[i] + sum_offset);
  }
  __m512 acc[R];
  __m256 min_acc[R];
  for (int i = 0; i < R; ++i) {
    acc[i] = _mm512_setzero_ps();
    min_acc[i] = _mm256_setzero_ps();
  }
  alignas(32) float sub_scales[8];
  for (int64_t s = 0; s < n_super; ++s) {
    __m256i sc, m;
    UnpackScaleMin(w[s].scales, &sc, &m);
    const __m128 dd = _mm_cvtph_ps(
        _mm_cvtsi32_si128(static_cast<int>(w[s].d | (static_cast<uint32_t>(w[s].dmin) << 16))));
    const __m256 d = _mm256_broadcastss_ps(dd);
    const __m256 dmin = _mm256_broadcastss_ps(_mm_movehdup_ps(dd));
    _mm256_store_ps(sub_scales, _mm256_mul_ps(d, _mm256_cvtepi32_ps(sc)));
    const __m256 mins = _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(m));
    const int64_t b0 = s * (kKBlock / kQBlock);
    for (int g = 0; g < 4; ++g) {
      QuantStep<R, false>(K::LoadPair(w[s], g), ActPairScales<false>(sub_scales + 2 * g), rows,
                          b0 + 2 * g, acc);
    }
    for (int i = 0; i < R; ++i) {
      min_acc[i] = _mm256_fmadd_ps(mins, _mm256_loadu_ps(sums[i] + b0), min_acc[i]);
    }
  }
  for (int i = 0; i < R; ++i) y[i * y_stride] = Hsum(acc[i]) - Hsum8(min_acc[i]);
}

template <typename K>
void DotScaleMin(const void* w_row, int64_t n_in, const void* x, int64_t x_stride, int n_x,
                 float* y, int64_t y_stride) {
  const auto* w = static_cast<const typename K::Block*>(w_row);
  const int64_t scale_offset = ActQ8ScaleOffset(n_in);
  const int64_t sum_offset = ActQ8SumOffset(n_in);
  ForEachTile(n_x, [&](auto rows, int i) {
    ScaleMinTile<K, decltype(rows)::kR>(w, n_in / kKBlock, scale_offset, sum_offset,
                                        RowPtr(x, x_stride, i), x_stride, y + i * y_stride,
                                        y_stride);
  });
}

// IQ4_XS: pair g of a super-block is sub-blocks 2g, 2g + 1 (activation blocks b0 + 2g, + 1), each
// decoded as IQ4_NL's block and stepped by d (ls - 32), paired as Q4_K's sub-scales.
template <int R>
void IQ4_XSTile(const BlockIQ4_XS* w, int64_t n_super, int64_t scale_offset, const void* x,
                int64_t x_stride, float* y, int64_t y_stride) {
  QuantRows<R> rows;
  for (int i = 0; i < R; ++i) {
    rows.q[i] = RowPtr(x, x_stride, i);
    rows.scales[i] = reinterpret_cast<const float*>(rows.q[i] + scale_offset);
  }
  __m512 acc[R];
  for (int i = 0; i < R; ++i) acc[i] = _mm512_setzero_ps();
  const __m256i levels =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4NlLevels)));
  alignas(32) float steps[8];
  for (int64_t s = 0; s < n_super; ++s) {
    const float d = _cvtsh_ss(w[s].d);
    for (int j = 0; j < 8; ++j) steps[j] = d * static_cast<float>(IQ4_XSScale(w[s], j));
    const int64_t b0 = s * (kKBlock / kQBlock);
    for (int g = 0; g < 4; ++g) {
      const __m512i wq =
          InterleavePair(_mm256_shuffle_epi8(levels, Nibbles(w[s].qs + 32 * g)),
                         _mm256_shuffle_epi8(levels, Nibbles(w[s].qs + 32 * g + 16)));
      QuantStep<R, false>(wq, ActPairScales<false>(steps + 2 * g), rows, b0 + 2 * g, acc);
    }
  }
  for (int i = 0; i < R; ++i) y[i * y_stride] = Hsum(acc[i]);
}

void DotIQ4_XS(const void* w_row, int64_t n_in, const void* x, int64_t x_stride, int n_x, float* y,
               int64_t y_stride) {
  const auto* w = static_cast<const BlockIQ4_XS*>(w_row);
  const int64_t scale_offset = ActQ8ScaleOffset(n_in);
  ForEachTile(n_x, [&](auto rows, int i) {
    IQ4_XSTile<decltype(rows)::kR>(w, n_in / kKBlock, scale_offset, RowPtr(x, x_stride, i),
                                   x_stride, y + i * y_stride, y_stride);
  });
}

// Q3_K and Q2_K: pair p of a super-block is activation blocks 2p, 2p + 1 and sub-blocks of 16
// 4p .. 4p + 3; in the interleaved order lanes 0-7 take the first 16-element sub-block of their
// block and lanes 8-15 the second (as Q6_K below).
__m512i PairSubBlockLanes(int p) {
  return _mm512_add_epi32(_mm512_setr_epi32(0, 2, 0, 2, 0, 2, 0, 2, 1, 3, 1, 3, 1, 3, 1, 3),
                          _mm512_set1_epi32(4 * p));
}

// The low 2 bits of activation blocks 2p and 2p + 1 (of 8) of a Q2_K or Q3_K super-block, block
// 2p in the low 256 bits: both come from the same 32 bytes of qs (bits 2 (2p % 4) and the next
// two), loaded once into both halves and shifted by each half's amount.
__m512i PairLow2Bits(const uint8_t* qs, int p) {
  const __m512i q = _mm512_broadcast_i64x4(
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * (p / 2))));
  const int shift = 2 * (2 * p % 4);
  const __m512i counts = _mm512_inserti64x4(_mm512_set1_epi16(static_cast<int16_t>(shift)),
                                            _mm256_set1_epi16(static_cast<int16_t>(shift + 2)), 1);
  return _mm512_and_si512(_mm512_srlv_epi16(q, counts), _mm512_set1_epi8(0x03));
}

// Blocks 2p, 2p + 1 of a Q3_K super-block as signed quants (low 2 bits | bit c8 of hmask << 2) - 4,
// c8 the block, in the interleaved order. hmask: its 32 bytes in both halves. A 16-bit shift moves
// bit c8 of each byte to bit 2 of the same byte (left for c8 < 2, right after).
__m512i Q3_KPair(const BlockQ3_K& w, __m512i hmask, int p) {
  const int c8 = 2 * p;
  __m512i moved;
  if (c8 < 2) {
    moved =
        _mm512_sllv_epi16(hmask, _mm512_inserti64x4(_mm512_set1_epi16(2), _mm256_set1_epi16(1), 1));
  } else {
    moved = _mm512_srlv_epi16(
        hmask, _mm512_inserti64x4(_mm512_set1_epi16(static_cast<int16_t>(c8 - 2)),
                                  _mm256_set1_epi16(static_cast<int16_t>(c8 - 1)), 1));
  }
  const __m512i high = _mm512_and_si512(moved, _mm512_set1_epi8(0x04));
  const __m512i q =
      _mm512_sub_epi8(_mm512_or_si512(PairLow2Bits(w.qs, p), high), _mm512_set1_epi8(4));
  return _mm512_permutexvar_epi32(PairOrder(), q);
}

template <int R>
void Q3_KTile(const BlockQ3_K* w, int64_t n_super, int64_t scale_offset, const void* x,
              int64_t x_stride, float* y, int64_t y_stride) {
  QuantRows<R> rows;
  for (int i = 0; i < R; ++i) {
    rows.q[i] = RowPtr(x, x_stride, i);
    rows.scales[i] = reinterpret_cast<const float*>(rows.q[i] + scale_offset);
  }
  __m512 acc[R];
  for (int i = 0; i < R; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t s = 0; s < n_super; ++s) {
    uint32_t words[4];
    Q3_KScaleWords(w[s].scales, words);
    const __m128i scales =
        _mm_sub_epi8(_mm_setr_epi32(static_cast<int>(words[0]), static_cast<int>(words[1]),
                                    static_cast<int>(words[2]), static_cast<int>(words[3])),
                     _mm_set1_epi8(32));
    const __m512 sub_scales = _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(w[s].d)),
                                            _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(scales)));
    const __m512i hmask =
        _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[s].hmask)));
    const int64_t b0 = s * (kKBlock / kQBlock);
    for (int p = 0; p < 4; ++p) {
      const __m512 wd = _mm512_permutexvar_ps(PairSubBlockLanes(p), sub_scales);
      QuantStep<R, false>(Q3_KPair(w[s], hmask, p), wd, rows, b0 + 2 * p, acc);
    }
  }
  for (int i = 0; i < R; ++i) y[i * y_stride] = Hsum(acc[i]);
}

void DotQ3_K(const void* w_row, int64_t n_in, const void* x, int64_t x_stride, int n_x, float* y,
             int64_t y_stride) {
  const auto* w = static_cast<const BlockQ3_K*>(w_row);
  const int64_t scale_offset = ActQ8ScaleOffset(n_in);
  ForEachTile(n_x, [&](auto rows, int i) {
    Q3_KTile<decltype(rows)::kR>(w, n_in / kKBlock, scale_offset, RowPtr(x, x_stride, i), x_stride,
                                 y + i * y_stride, y_stride);
  });
}

// Q2_K: value = d sc_j q - dmin m_j, j the 16-element sub-block. The scale part goes through
// QuantStep with the 2-bit quants as weights and d sc_j in the weight scale vector (as Q3_K's);
// the min part, sum_j dmin m_j (d_b times the sum of the half block's quants), is one 16-lane FMA
// per super-block and row on the activation half-block sums (kernel_set.h), in its own accumulator
// subtracted at the end.
template <int R>
void Q2_KTile(const BlockQ2_K* w, int64_t n_super, int64_t scale_offset, int64_t half_sum_offset,
              const void* x, int64_t x_stride, float* y, int64_t y_stride) {
  QuantRows<R> rows;
  const float* half_sums[R];
  for (int i = 0; i < R; ++i) {
    rows.q[i] = RowPtr(x, x_stride, i);
    rows.scales[i] = reinterpret_cast<const float*>(rows.q[i] + scale_offset);
    half_sums[i] = reinterpret_cast<const float*>(rows.q[i] + half_sum_offset);
  }
  __m512 acc[R], min_acc[R];
  for (int i = 0; i < R; ++i) acc[i] = min_acc[i] = _mm512_setzero_ps();
  for (int64_t s = 0; s < n_super; ++s) {
    const __m512i packed =
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w[s].scales)));
    const __m512 sub_scales =
        _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(w[s].d)),
                      _mm512_cvtepi32_ps(_mm512_and_si512(packed, _mm512_set1_epi32(0x0f))));
    const __m512 mins = _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(w[s].dmin)),
                                      _mm512_cvtepi32_ps(_mm512_srli_epi32(packed, 4)));
    const int64_t b0 = s * (kKBlock / kQBlock);
    for (int p = 0; p < 4; ++p) {
      const __m512i wq = _mm512_permutexvar_epi32(PairOrder(), PairLow2Bits(w[s].qs, p));
      const __m512 wd = _mm512_permutexvar_ps(PairSubBlockLanes(p), sub_scales);
      QuantStep<R, false>(wq, wd, rows, b0 + 2 * p, acc);
    }
    for (int i = 0; i < R; ++i) {
      min_acc[i] = _mm512_fmadd_ps(mins, _mm512_loadu_ps(half_sums[i] + 2 * b0), min_acc[i]);
    }
  }
  for (int i = 0; i < R; ++i) y[i * y_stride] = Hsum(acc[i]) - Hsum(min_acc[i]);
}

void DotQ2_K(const void* w_row, int64_t n_in, const void* x, int64_t x_stride, int n_x, float* y,
             int64_t y_stride) {
  const auto* w = static_cast<const BlockQ2_K*>(w_row);
  const int64_t scale_offset = ActQ8ScaleOffset(n_in);
  const int64_t half_sum_offset = ActQ8HalfSumOffset(n_in);
  ForEachTile(n_x, [&](auto rows, int i) {
    Q2_KTile<decltype(rows)::kR>(w, n_in / kKBlock, scale_offset, half_sum_offset,
                                 RowPtr(x, x_stride, i), x_stride, y + i * y_stride, y_stride);
  });
}

// Q6_K: pair p of a super-block is activation blocks 2p, 2p + 1 with sub-block scales 4p .. 4p + 3.
// In the interleaved order lane l holds elements 4 (l / 2) .. + 3 of block 2p + l % 2, so lanes
// 0-7 take the first 16-element scale of their block and lanes 8-15 the second.
template <int R>
void Q6_KTile(const BlockQ6_K* w, int64_t n_super, int64_t scale_offset, const void* x,
              int64_t x_stride, float* y, int64_t y_stride) {
  QuantRows<R> rows;
  for (int i = 0; i < R; ++i) {
    rows.q[i] = RowPtr(x, x_stride, i);
    rows.scales[i] = reinterpret_cast<const float*>(rows.q[i] + scale_offset);
  }
  __m512 acc[R];
  for (int i = 0; i < R; ++i) acc[i] = _mm512_setzero_ps();
  const __m512i scale_lanes = _mm512_setr_epi32(0, 2, 0, 2, 0, 2, 0, 2, 1, 3, 1, 3, 1, 3, 1, 3);
  const __m512i order = _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const __m512i low2 = _mm512_set1_epi8(0x03);
  for (int64_t s = 0; s < n_super; ++s) {
    const __m512 d = _mm512_set1_ps(_cvtsh_ss(w[s].d));
    const __m512 sub_scales =
        _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                             _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[s].scales)))));
    const int64_t b0 = s * (kKBlock / kQBlock);
    for (int h = 0; h < 2; ++h) {
      const __m512i ql = _mm512_loadu_si512(w[s].ql + 64 * h);  // [c = 0/2 bytes, c = 1/3 bytes]
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[s].qh + 32 * h));
      for (int half_pair = 0; half_pair < 2; ++half_pair) {
        // Blocks c = 2 half_pair and 2 half_pair + 1 of this half: nibbles at 4 half_pair, top
        // bits of qh at 4 half_pair and 4 half_pair + 2.
        const int p = 2 * h + half_pair;
        const __m512i nibbles = _mm512_and_si512(_mm512_srli_epi16(ql, 4 * half_pair), low4);
        const __m256i qh_a = _mm256_srli_epi16(qh, 4 * half_pair);
        const __m512i top = _mm512_and_si512(
            _mm512_inserti64x4(_mm512_castsi256_si512(qh_a), _mm256_srli_epi16(qh_a, 2), 1), low2);
        const __m512i q = _mm512_sub_epi8(_mm512_or_si512(nibbles, _mm512_slli_epi16(top, 4)),
                                          _mm512_set1_epi8(32));
        const __m512i wq = _mm512_permutexvar_epi32(order, q);
        const __m512 wd = _mm512_permutexvar_ps(
            _mm512_add_epi32(scale_lanes, _mm512_set1_epi32(4 * p)), sub_scales);
        QuantStep<R, false>(wq, wd, rows, b0 + 2 * p, acc);
      }
    }
  }
  for (int i = 0; i < R; ++i) y[i * y_stride] = Hsum(acc[i]);
}

void DotQ6_K(const void* w_row, int64_t n_in, const void* x, int64_t x_stride, int n_x, float* y,
             int64_t y_stride) {
  const auto* w = static_cast<const BlockQ6_K*>(w_row);
  const int64_t scale_offset = ActQ8ScaleOffset(n_in);
  ForEachTile(n_x, [&](auto rows, int i) {
    Q6_KTile<decltype(rows)::kR>(w, n_in / kKBlock, scale_offset, RowPtr(x, x_stride, i), x_stride,
                                 y + i * y_stride, y_stride);
  });
}

// round() (half away from zero) for |v| < 2^23, exactly as std::round, so this quantizer matches
// the scalar one bit for bit: truncate, then step away from zero if the dropped part is >= 0.5.
__m512 RoundHalfAway(__m512 v) {
  const __m512 truncated = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m512 dropped = _mm512_abs_ps(_mm512_sub_ps(v, truncated));  // exact
  const __m512 step = _mm512_castsi512_ps(
      _mm512_or_si512(_mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(INT32_MIN)),
                      _mm512_castps_si512(_mm512_set1_ps(1.0f))));
  const __mmask16 away = _mm512_cmp_ps_mask(dropped, _mm512_set1_ps(0.5f), _CMP_GE_OQ);
  return _mm512_mask_add_ps(truncated, away, truncated, step);
}

// Quantizes one block of 32 to signed bytes (the arithmetic of the scalar level) and returns d.
__m256i QuantizeBlock(const float* x, float* d_out) {
  const __m512 v0 = _mm512_loadu_ps(x);
  const __m512 v1 = _mm512_loadu_ps(x + 16);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
  const float d = amax / 127.0f;
  // 0 where 1 / d overflows (a block of amax below about 4e-37): its quants are 0 then.
  const float id = d != 0.0f && 1.0f / d <= FLT_MAX ? 1.0f / d : 0.0f;
  *d_out = d;
  const __m512 vid = _mm512_set1_ps(id);
  const __m128i q0 =
      _mm512_cvtsepi32_epi8(_mm512_cvttps_epi32(RoundHalfAway(_mm512_mul_ps(v0, vid))));
  const __m128i q1 =
      _mm512_cvtsepi32_epi8(_mm512_cvttps_epi32(RoundHalfAway(_mm512_mul_ps(v1, vid))));
  return _mm256_inserti128_si256(_mm256_castsi128_si256(q0), q1, 1);
}

// Quants of each pair of blocks interleaved by 4-byte groups (see above), stored as q + 128; a last
// unpaired block is interleaved with zeros. Scales: one float per block.
void QuantizeAct(const float* x, int64_t n_in, void* act_row) {
  auto* qs = static_cast<uint8_t*>(act_row);
  auto* scales = reinterpret_cast<float*>(qs + ActQ8ScaleOffset(n_in));
  auto* sums = reinterpret_cast<float*>(qs + ActQ8SumOffset(n_in));
  auto* half_sums = reinterpret_cast<float*>(qs + ActQ8HalfSumOffset(n_in));
  const int64_t n_blocks = n_in / kQBlock;
  for (int64_t b = 0; b < n_blocks; b += 2) {
    const __m256i q0 = QuantizeBlock(x + b * kQBlock, &scales[b]);
    StoreBlockSums(q0, scales[b], b, sums, half_sums);
    __m256i q1 = _mm256_setzero_si256();
    if (b + 1 < n_blocks) {
      q1 = QuantizeBlock(x + (b + 1) * kQBlock, &scales[b + 1]);
      StoreBlockSums(q1, scales[b + 1], b + 1, sums, half_sums);
    }
    const __m512i pair = _mm512_xor_si512(InterleavePair(q0, q1), _mm512_set1_epi8(char{-128}));
    _mm512_storeu_si512(qs + b * kQBlock, pair);
  }
}

// ---- Row groups (quant/packed.h) times grouped ActQ8 activations
//
// Lane j of every register belongs to row j of the group: one vpdpbusd multiplies 4 weights of
// each of the 16 rows by the same 4 activation bytes (broadcast from memory) and adds them to the
// row's lane. A block is 8 such steps per activation row into an int32 vector, then one convert,
// multiply and FMA give all 16 rows' block sums at once, and the outputs need no horizontal sum.
// The unsigned operand is the weight (Q8_0 stored as q + 128, Q4_0 nibbles 0..15), so each row's
// correction, -128 (resp. -8) times the activation block sum, depends on the activations only: it
// is the starting value of the block's integer sum (quantize_act_grouped stores -sum q).
//
// The integer sums are exact, so splitting them into two chains (for one or two activation rows,
// which have no other independent work to hide vpdpbusd's latency) changes no bit; the float
// accumulation is the same sequence for every tile size.

struct Q8_0Group {
  static constexpr int64_t kQuantBytes = kGroupRows * kQBlock;
  static constexpr int kOffsetShift = 7;  // 128
  // step(weights, index, activation byte offset) for the 8 chunks of a block.
  template <typename Step>
  static void ForEachChunk(const uint8_t* quants, Step&& step) {
    for (int c = 0; c < 8; ++c) step(_mm512_loadu_si512(quants + 64 * c), c, 4 * c);
  }
};
struct Q4_0Group {
  static constexpr int64_t kQuantBytes = kGroupRows * kQBlock / 2;
  static constexpr int kOffsetShift = 3;  // 8
  template <typename Step>
  static void ForEachChunk(const uint8_t* quants, Step&& step) {
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    for (int c = 0; c < 4; ++c) {
      const __m512i v = _mm512_loadu_si512(quants + 64 * c);
      step(_mm512_and_si512(v, low4), 2 * c, 4 * c);
      step(_mm512_and_si512(_mm512_srli_epi16(v, 4), low4), 2 * c + 1, 16 + 4 * c);
    }
  }
};

// IQ4_NL: Q4_0's nibbles, each replaced by its level + 128 (1..241, unsigned) with a byte shuffle,
// so the correction is Q8_0's, -128 times the activation block sum.
struct IQ4_NLGroup {
  static constexpr int64_t kQuantBytes = Q4_0Group::kQuantBytes;
  static constexpr int kOffsetShift = 7;  // 128
  template <typename Step>
  static void ForEachChunk(const uint8_t* quants, Step&& step) {
    const __m512i biased_levels = _mm512_xor_si512(
        _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4NlLevels))),
        _mm512_set1_epi8(char{-128}));
    Q4_0Group::ForEachChunk(quants, [&](__m512i nibbles, int index, int offset) {
      step(_mm512_shuffle_epi8(biased_levels, nibbles), index, offset);
    });
  }
};

// Weight bytes the group kernels request ahead of use. The hardware prefetcher alone falls behind
// when an 8-row tile spends many cycles on each block (8-row tiles ran 1.55x slower without), and
// so did a 4 KB lead: the weights' memory time then added to the tile's compute instead of hiding
// under it. Measured on a 2-core Zen 5 (random TinyLlama 1.1B and the base target, 8 tokens,
// binaries alternating): 16 KB ahead cut t(8) by 10-20% for Q8_0, Q4_0 and F16 and left t(1) and
// pp512 as they were; 32 KB was within a few percent of it either way, and Q4_K, whose super-blocks
// carry more work per byte, is fastest at its 8 KB (further ahead it slowed by 5%).
constexpr int64_t kPrefetchBytes = 16 * 1024;
constexpr int64_t kPrefetchQ4_KBytes = 8 * 1024;

void PrefetchLines(const uint8_t* p, int64_t bytes) {
  for (int64_t line = 0; line < bytes; line += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(p + line), _MM_HINT_T0);
  }
}

// The integer sums of one block for every row of a tile: vpdpbusd into one chain per row, or two
// for one or two rows (exact, so the split changes no bit).
template <int R>
struct BlockSums {
  static constexpr int kChains = R <= 2 ? 2 : 1;
  __m512i chain[kChains][R];

  explicit BlockSums(const __m512i* start) {
    for (int i = 0; i < R; ++i) {
      chain[0][i] = start ? start[i] : _mm512_setzero_si512();
      if constexpr (kChains == 2) chain[1][i] = _mm512_setzero_si512();
    }
  }
  // Step `index` of the block: weights w times activation bytes at q + offset of every row.
  void Add(const GroupedRows<R>& rows, int64_t b, int index, int offset, __m512i w) {
    for (int i = 0; i < R; ++i) {
      int32_t four;
      std::memcpy(&four, rows.q[i] + b * kQBlock + offset, sizeof(four));
      __m512i& sum = chain[index % kChains][i];
      sum = _mm512_dpbusd_epi32(sum, w, _mm512_set1_epi32(four));
    }
  }
  // Row i's block sums times the row's activation scale d_b.
  __m512 Scaled(const GroupedRows<R>& rows, int64_t b, int i) const {
    __m512i sum = chain[0][i];
    if constexpr (kChains == 2) sum = _mm512_add_epi32(sum, chain[1][i]);
    return _mm512_mul_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(rows.d[i][b]));
  }
};

template <typename G, int R>
void GroupTile(const uint8_t* group, int64_t n_in, const void* x, int64_t x_stride, float* y,
               int64_t y_stride) {
  const GroupedRows<R> rows(x, x_stride, n_in);
  const int64_t n_blocks = n_in / kQBlock;
  const auto* scales = reinterpret_cast<const __m256i*>(group + n_blocks * G::kQuantBytes);
  __m512 acc[R];
  for (int i = 0; i < R; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    __m512i offsets[R];
    for (int i = 0; i < R; ++i) {
      offsets[i] = _mm512_slli_epi32(_mm512_set1_epi32(rows.neg_sums[i][b]), G::kOffsetShift);
    }
    BlockSums<R> sums(offsets);
    PrefetchLines(group + b * G::kQuantBytes + kPrefetchBytes, G::kQuantBytes);
    G::ForEachChunk(group + b * G::kQuantBytes,
                    [&](__m512i w, int index, int offset) { sums.Add(rows, b, index, offset, w); });
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(scales + b));
    for (int i = 0; i < R; ++i) acc[i] = _mm512_fmadd_ps(sums.Scaled(rows, b, i), d, acc[i]);
  }
  for (int i = 0; i < R; ++i) _mm512_storeu_ps(y + i * y_stride, acc[i]);
}

// Q4_K groups, super-block by super-block (quant/packed.h): the unsigned nibbles need no offset
// correction; each sub-block adds d sc times its integer sums (as Q4_0 adds d) and then the min
// term dmin m d_x sum(q_x), both into the same accumulator in a fixed order. The 6-bit scales
// and mins of all 16 rows are unpacked at once, lane j for row j, as UnpackScaleMin does for one.
template <int R>
void GroupQ4_KTile(const uint8_t* group, int64_t n_in, const void* x, int64_t x_stride, float* y,
                   int64_t y_stride) {
  constexpr int64_t kSuperBytes = kGroupRows * sizeof(BlockQ4_K);
  const GroupedRows<R> rows(x, x_stride, n_in);
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const __m512i low6 = _mm512_set1_epi8(0x3f);
  const __m512i low2 = _mm512_set1_epi8(0x03);
  const __m512i byte = _mm512_set1_epi32(0xff);
  __m512 acc[R];
  for (int i = 0; i < R; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t s = 0; s < n_in / kKBlock; ++s) {
    const uint8_t* base = group + s * kSuperBytes;
    PrefetchLines(base + kPrefetchQ4_KBytes, kSuperBytes);
    // d_x (-sum q_x) of each row's 8 blocks here, the min term's factor, 8 at a time: the same
    // single rounding as one scalar multiply per block and row, which with its int-to-float
    // conversion and broadcast took a fifth of an 8-row tile's samples (perf); now the FMA reads
    // it as a broadcast operand. TinyLlama shape: pp512 5-8% faster, t(8) 5-7% lower.
    alignas(32) float x_sums[R][kKBlock / kQBlock];
    const int64_t b0 = s * (kKBlock / kQBlock);
    for (int i = 0; i < R; ++i) {
      const __m256i neg =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows.neg_sums[i] + b0));
      _mm256_store_ps(x_sums[i],
                      _mm256_mul_ps(_mm256_loadu_ps(rows.d[i] + b0), _mm256_cvtepi32_ps(neg)));
    }
    const __m512 d =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(base + kQ4_KGroupD)));
    const __m512 dmin = _mm512_cvtph_ps(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(base + kQ4_KGroupDmin)));
    const __m512i a0 = _mm512_loadu_si512(base + kQ4_KGroupScales);
    const __m512i a1 = _mm512_loadu_si512(base + kQ4_KGroupScales + kQ4_KGroupScaleChunk);
    const __m512i a2 = _mm512_loadu_si512(base + kQ4_KGroupScales + 2 * kQ4_KGroupScaleChunk);
    // Byte t of lane j: scale (min) of sub-block t (lo) or 4 + t (hi) of row j.
    const __m512i sc_lo = _mm512_and_si512(a0, low6);
    const __m512i m_lo = _mm512_and_si512(a1, low6);
    const __m512i sc_hi =
        _mm512_or_si512(_mm512_and_si512(a2, low4),
                        _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(a0, 6), low2), 4));
    const __m512i m_hi =
        _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(a2, 4), low4),
                        _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(a1, 6), low2), 4));
    for (int sub = 0; sub < 8; ++sub) {
      const int shift = 8 * (sub % 4);
      const __m512 scale =
          _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_and_si512(
                               _mm512_srli_epi32(sub < 4 ? sc_lo : sc_hi, shift), byte)));
      const __m512 min =
          _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(_mm512_and_si512(
                                  _mm512_srli_epi32(sub < 4 ? m_lo : m_hi, shift), byte)));
      const int64_t b = s * (kKBlock / kQBlock) + sub;
      const uint8_t* quants = base + (sub / 2) * 8 * 64;
      BlockSums<R> sums(nullptr);
      for (int c = 0; c < 8; ++c) {
        const __m512i v = _mm512_loadu_si512(quants + 64 * c);
        const __m512i w = sub % 2 == 0 ? _mm512_and_si512(v, low4)
                                       : _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
        sums.Add(rows, b, c, 4 * c, w);
      }
      for (int i = 0; i < R; ++i) {
        acc[i] = _mm512_fmadd_ps(sums.Scaled(rows, b, i), scale, acc[i]);
        // - dmin m d_x sum(q_x) = dmin m (d_x * -sum(q_x))
        acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(x_sums[i][sub]), min, acc[i]);
      }
    }
  }
  for (int i = 0; i < R; ++i) _mm512_storeu_ps(y + i * y_stride, acc[i]);
}

void DotGroupQ4_K(const void* group, int64_t n_in, const void* x, int64_t x_stride, int n_x,
                  float* y, int64_t y_stride) {
  ForEachTile(n_x, [&](auto rows, int i) {
    GroupQ4_KTile<decltype(rows)::kR>(static_cast<const uint8_t*>(group), n_in,
                                      RowPtr(x, x_stride, i), x_stride, y + i * y_stride, y_stride);
  });
}

// F16 groups: element k of the 16 rows is one 32-byte load, widened once and multiplied with
// activation k of every row (broadcast from memory). Two accumulators per row, even and odd k,
// added at the end, for every tile size (decode needs the second chain to hide FMA latency).
constexpr int64_t kPrefetchF16 = kPrefetchBytes / (kGroupRows * sizeof(uint16_t));  // elements

template <int R>
void GroupF16Tile(const uint16_t* group, int64_t n, const void* x, int64_t x_stride, float* y,
                  int64_t y_stride) {
  const float* xr[R];
  for (int i = 0; i < R; ++i) xr[i] = reinterpret_cast<const float*>(RowPtr(x, x_stride, i));
  __m512 even[R], odd[R];
  for (int i = 0; i < R; ++i) even[i] = odd[i] = _mm512_setzero_ps();
  auto load = [&](int64_t k) {
    return _mm512_cvtph_ps(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(group + k * kGroupRows)));
  };
  int64_t k = 0;
  for (; k + 2 <= n; k += 2) {
    // Two elements of 16 rows are one cache line; fetch the line kPrefetchF16 elements ahead.
    _mm_prefetch(reinterpret_cast<const char*>(group + (k + kPrefetchF16) * kGroupRows),
                 _MM_HINT_T0);
    const __m512 w0 = load(k);
    const __m512 w1 = load(k + 1);
    for (int i = 0; i < R; ++i) {
      even[i] = _mm512_fmadd_ps(w0, _mm512_set1_ps(xr[i][k]), even[i]);
      odd[i] = _mm512_fmadd_ps(w1, _mm512_set1_ps(xr[i][k + 1]), odd[i]);
    }
  }
  if (k < n) {
    const __m512 w0 = load(k);
    for (int i = 0; i < R; ++i) even[i] = _mm512_fmadd_ps(w0, _mm512_set1_ps(xr[i][k]), even[i]);
  }
  for (int i = 0; i < R; ++i) _mm512_storeu_ps(y + i * y_stride, _mm512_add_ps(even[i], odd[i]));
}

void DotGroupF16(const void* group, int64_t n_in, const void* x, int64_t x_stride, int n_x,
                 float* y, int64_t y_stride) {
  ForEachTile(n_x, [&](auto rows, int i) {
    GroupF16Tile<decltype(rows)::kR>(static_cast<const uint16_t*>(group), n_in,
                                     RowPtr(x, x_stride, i), x_stride, y + i * y_stride, y_stride);
  });
}

template <typename G>
void DotGroup(const void* group, int64_t n_in, const void* x, int64_t x_stride, int n_x, float* y,
              int64_t y_stride) {
  ForEachTile(n_x, [&](auto rows, int i) {
    GroupTile<G, decltype(rows)::kR>(static_cast<const uint8_t*>(group), n_in,
                                     RowPtr(x, x_stride, i), x_stride, y + i * y_stride, y_stride);
  });
}

// Signed quants in natural order, float scales, negated int32 block sums (kernel_set.h).
void QuantizeActGrouped(const float* x, int64_t n_in, void* act_row) {
  auto* qs = static_cast<uint8_t*>(act_row);
  auto* scales = reinterpret_cast<float*>(qs + ActQ8ScaleOffset(n_in));
  auto* neg_sums = reinterpret_cast<int32_t*>(qs + ActQ8SumOffset(n_in));
  for (int64_t b = 0; b < n_in / kQBlock; ++b) {
    const __m256i q = QuantizeBlock(x + b * kQBlock, &scales[b]);
    const HalfSums h = BlockHalfSums(q);
    neg_sums[b] = -(h.lo + h.hi);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs + b * kQBlock), q);
  }
}

// ---- Attention: 16 lanes, tails masked.

__mmask16 TailMask(int32_t n) { return static_cast<__mmask16>((1u << n) - 1); }

// Sixteen elements of a float or half-float (f16 KV cache) row as floats, whole or masked (lanes
// off the mask 0 either way); the f16 kernels widen each key and value and then compute exactly as
// the float ones (kernel_set.h).
inline __m512 Load16(const float* x) { return _mm512_loadu_ps(x); }
inline __m512 Load16(const uint16_t* x) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)));
}
inline __m512 Load16(__mmask16 mask, const float* x) { return _mm512_maskz_loadu_ps(mask, x); }
inline __m512 Load16(__mmask16 mask, const uint16_t* x) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, x));
}

// One key's dot product: one accumulator over the head in order, masked tail last.
template <typename T>
inline __m512 KeyDot(const float* q, const T* k, int32_t whole, __mmask16 tail) {
  __m512 acc = _mm512_setzero_ps();
  for (int32_t d = 0; d < whole; d += 16) {
    acc = _mm512_fmadd_ps(_mm512_loadu_ps(q + d), Load16(k + d), acc);
  }
  if (tail) {
    acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, q + whole), Load16(tail, k + whole), acc);
  }
  return acc;
}

// The horizontal sums of four vectors at once, each by exactly Hsum's tree (lane i + lane i ^ 8,
// then i ^ 4, i ^ 2, i ^ 1: the same pairs of operands, so the same bits), in lanes 0, 4, 8 and 12.
inline __m512 Hsum4(__m512 a, __m512 b, __m512 c, __m512 d) {
  const __m512 ab = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                                  _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 cd = _mm512_add_ps(_mm512_shuffle_f32x4(c, d, _MM_SHUFFLE(1, 0, 1, 0)),
                                  _mm512_shuffle_f32x4(c, d, _MM_SHUFFLE(3, 2, 3, 2)));
  __m512 v = _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, _MM_SHUFFLE(2, 0, 2, 0)),
                           _mm512_shuffle_f32x4(ab, cd, _MM_SHUFFLE(3, 1, 3, 1)));
  v = _mm512_add_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(1, 0, 3, 2)));
  return _mm512_add_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(2, 3, 0, 1)));
}

// Four keys at a time, their dot products interleaved in one loop over the head: four independent
// accumulator chains hide the FMA latency that one key's chain is bound by, and one reduction
// serves all four. Every key's sum is computed by the same operations as alone (KeyDot's, in the
// same order, then Hsum's tree), so a key's score does not depend on its neighbours (contract 2:
// a tree node's extra slots are scored one at a time).
template <typename T>
void AttnScores(const float* q, const T* keys, int64_t stride, int32_t n, int32_t head_dim,
                float scale, float* scores) {
  const int32_t whole = head_dim / 16 * 16;
  const __mmask16 tail = TailMask(head_dim - whole);
  const __m512i lanes = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 8, 4, 0);
  int32_t j = 0;
  for (; j + 4 <= n; j += 4) {
    const T* k = keys + j * stride;
    __m512 acc0 = _mm512_setzero_ps();
    __m512 acc1 = _mm512_setzero_ps();
    __m512 acc2 = _mm512_setzero_ps();
    __m512 acc3 = _mm512_setzero_ps();
    for (int32_t d = 0; d < whole; d += 16) {
      const __m512 qd = _mm512_loadu_ps(q + d);
      acc0 = _mm512_fmadd_ps(qd, Load16(k + d), acc0);
      acc1 = _mm512_fmadd_ps(qd, Load16(k + stride + d), acc1);
      acc2 = _mm512_fmadd_ps(qd, Load16(k + 2 * stride + d), acc2);
      acc3 = _mm512_fmadd_ps(qd, Load16(k + 3 * stride + d), acc3);
    }
    if (tail) {
      const __m512 qd = _mm512_maskz_loadu_ps(tail, q + whole);
      acc0 = _mm512_fmadd_ps(qd, Load16(tail, k + whole), acc0);
      acc1 = _mm512_fmadd_ps(qd, Load16(tail, k + stride + whole), acc1);
      acc2 = _mm512_fmadd_ps(qd, Load16(tail, k + 2 * stride + whole), acc2);
      acc3 = _mm512_fmadd_ps(qd, Load16(tail, k + 3 * stride + whole), acc3);
    }
    const __m512 sums = Hsum4(acc0, acc1, acc2, acc3);
    const __m128 four = _mm512_castps512_ps128(_mm512_permutexvar_ps(lanes, sums));
    _mm_storeu_ps(scores + j, _mm_mul_ps(four, _mm_set1_ps(scale)));
  }
  for (; j < n; ++j) scores[j] = Hsum(KeyDot(q, keys + j * stride, whole, tail)) * scale;
}

// exp(x) for x <= 0: x = n ln2 + r with |r| <= ln2 / 2, a degree-6 polynomial for exp(r) (relative
// error about 2e-7), scaled by 2^n with vscalefps. Below -87.3 the result is 0.
__m512 ExpNonPositive(__m512 x) {
  const __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.3f), _CMP_GE_OQ);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145752f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860677e-6f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_maskz_scalef_ps(keep, p, n);
}

float SoftmaxExp(float* x, int32_t n) {
  const int32_t whole = n / 16 * 16;
  const __mmask16 tail = TailMask(n - whole);
  __m512 vmax = _mm512_set1_ps(x[0]);
  for (int32_t j = 0; j < whole; j += 16) vmax = _mm512_max_ps(vmax, _mm512_loadu_ps(x + j));
  if (tail) vmax = _mm512_mask_max_ps(vmax, tail, vmax, _mm512_maskz_loadu_ps(tail, x + whole));
  const __m512 vm = _mm512_set1_ps(_mm512_reduce_max_ps(vmax));
  __m512 acc = _mm512_setzero_ps();
  for (int32_t j = 0; j < whole; j += 16) {
    const __m512 e = ExpNonPositive(_mm512_sub_ps(_mm512_loadu_ps(x + j), vm));
    _mm512_storeu_ps(x + j, e);
    acc = _mm512_add_ps(acc, e);
  }
  if (tail) {
    const __m512 e = ExpNonPositive(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, x + whole), vm));
    _mm512_mask_storeu_ps(x + whole, tail, e);
    acc = _mm512_mask_add_ps(acc, tail, acc, e);
  }
  return Hsum(acc);
}

// Up to 8 chunks of 16 values (128 elements) are accumulated at once, key after key: their FMA
// chains are independent, so one key costs a few cycles of throughput instead of a chain's latency.
// Each element still adds p[j] v[j] in key order, as one chunk alone would. The chunks are whole
// unless kTail (the last one then masked). The accumulators are eight named registers, not an
// array: GCC also stored an array's elements to the stack at every key (dead stores that made this
// loop 15% of a 512-token prompt's processing).
template <int C, bool kTail, typename T>
void WeightedSumChunks(const float* p, const T* values, int64_t stride, int32_t n, int32_t d0,
                       int32_t head_dim, float* out) {
  static_assert(C >= 1 && C <= 8);
  const __mmask16 last = kTail ? TailMask(head_dim - (d0 + 16 * (C - 1))) : __mmask16{0xffff};
  auto load = [last](const auto* at, int c) {
    return c == C - 1 ? Load16(last, at + 16 * c) : Load16(at + 16 * c);
  };
  float* o = out + d0;
  __m512 a0 = load(o, 0);
  __m512 a1 = C > 1 ? load(o, 1) : a0;
  __m512 a2 = C > 2 ? load(o, 2) : a0;
  __m512 a3 = C > 3 ? load(o, 3) : a0;
  __m512 a4 = C > 4 ? load(o, 4) : a0;
  __m512 a5 = C > 5 ? load(o, 5) : a0;
  __m512 a6 = C > 6 ? load(o, 6) : a0;
  __m512 a7 = C > 7 ? load(o, 7) : a0;
  for (int32_t j = 0; j < n; ++j) {
    const __m512 pj = _mm512_set1_ps(p[j]);
    const T* v = values + j * stride + d0;
    a0 = _mm512_fmadd_ps(pj, load(v, 0), a0);
    if constexpr (C > 1) a1 = _mm512_fmadd_ps(pj, load(v, 1), a1);
    if constexpr (C > 2) a2 = _mm512_fmadd_ps(pj, load(v, 2), a2);
    if constexpr (C > 3) a3 = _mm512_fmadd_ps(pj, load(v, 3), a3);
    if constexpr (C > 4) a4 = _mm512_fmadd_ps(pj, load(v, 4), a4);
    if constexpr (C > 5) a5 = _mm512_fmadd_ps(pj, load(v, 5), a5);
    if constexpr (C > 6) a6 = _mm512_fmadd_ps(pj, load(v, 6), a6);
    if constexpr (C > 7) a7 = _mm512_fmadd_ps(pj, load(v, 7), a7);
  }
  const __m512 acc[8] = {a0, a1, a2, a3, a4, a5, a6, a7};
  for (int c = 0; c < C - 1; ++c) _mm512_storeu_ps(o + 16 * c, acc[c]);
  _mm512_mask_storeu_ps(o + 16 * (C - 1), last, acc[C - 1]);
}

template <typename T>
void AttnWeightedSum(const float* p, const T* values, int64_t stride, int32_t n, int32_t head_dim,
                     float* out) {
  using ChunksFn = void (*)(const float*, const T*, int64_t, int32_t, int32_t, int32_t, float*);
  static constexpr ChunksFn kWhole[] = {
      &WeightedSumChunks<1, false, T>, &WeightedSumChunks<2, false, T>,
      &WeightedSumChunks<3, false, T>, &WeightedSumChunks<4, false, T>,
      &WeightedSumChunks<5, false, T>, &WeightedSumChunks<6, false, T>,
      &WeightedSumChunks<7, false, T>, &WeightedSumChunks<8, false, T>};
  static constexpr ChunksFn kWithTail[] = {
      &WeightedSumChunks<1, true, T>, &WeightedSumChunks<2, true, T>,
      &WeightedSumChunks<3, true, T>, &WeightedSumChunks<4, true, T>,
      &WeightedSumChunks<5, true, T>, &WeightedSumChunks<6, true, T>,
      &WeightedSumChunks<7, true, T>, &WeightedSumChunks<8, true, T>};
  for (int32_t d0 = 0; d0 < head_dim; d0 += 128) {
    const int32_t width = head_dim - d0 < 128 ? head_dim - d0 : 128;
    const auto& chunks = width % 16 == 0 ? kWhole : kWithTail;
    chunks[(width + 15) / 16 - 1](p, values, stride, n, d0, head_dim, out);
  }
}

// Sixteen at a time by F16C (round to nearest even, as Fp32ToFp16), the tail masked.
void ToF16(const float* x, uint16_t* out, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                        _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  }
  if (i < n) {
    const __mmask16 tail = TailMask(static_cast<int32_t>(n - i));
    _mm256_mask_storeu_epi16(
        out + i, tail,
        _mm512_cvtps_ph(_mm512_maskz_loadu_ps(tail, x + i), _MM_FROUND_TO_NEAREST_INT));
  }
}

// silu(g) = 1 / (1 + exp(-g)) for g >= 0 and exp(g) / (1 + exp(g)) otherwise: one exponential of
// -|g| (never overflows) serves both.
__m512 SiluMul16(__m512 g, __m512 u) {
  const __m512 e = ExpNonPositive(_mm512_castsi512_ps(_mm512_or_si512(
      _mm512_castps_si512(g), _mm512_set1_epi32(static_cast<int32_t>(0x80000000u)))));
  const __m512 one = _mm512_set1_ps(1.0f);
  const __mmask16 negative = _mm512_cmp_ps_mask(g, _mm512_setzero_ps(), _CMP_LT_OQ);
  const __m512 numerator = _mm512_mask_blend_ps(negative, one, e);
  return _mm512_mul_ps(_mm512_mul_ps(g, _mm512_div_ps(numerator, _mm512_add_ps(one, e))), u);
}

void SiluMul(const float* gate, const float* up, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(out + i, SiluMul16(_mm512_loadu_ps(gate + i), _mm512_loadu_ps(up + i)));
  }
  if (i < n) {
    const __mmask16 m = TailMask(static_cast<int32_t>(n - i));
    _mm512_mask_storeu_ps(
        out + i, m,
        SiluMul16(_mm512_maskz_loadu_ps(m, gate + i), _mm512_maskz_loadu_ps(m, up + i)));
  }
}

// gelu(g) = g sigmoid(y), y = 2 sqrt(2 / pi) (g + 0.044715 g^3), with the sigmoid as in SiluMul16.
__m512 GeluMul16(__m512 g, __m512 u) {
  const __m512 g2 = _mm512_mul_ps(g, g);
  const __m512 y = _mm512_mul_ps(_mm512_mul_ps(g, _mm512_set1_ps(1.5957691216f)),
                                 _mm512_fmadd_ps(g2, _mm512_set1_ps(0.044715f), _mm512_set1_ps(1)));
  const __m512 e = ExpNonPositive(_mm512_castsi512_ps(_mm512_or_si512(
      _mm512_castps_si512(y), _mm512_set1_epi32(static_cast<int32_t>(0x80000000u)))));
  const __m512 one = _mm512_set1_ps(1.0f);
  const __mmask16 negative = _mm512_cmp_ps_mask(y, _mm512_setzero_ps(), _CMP_LT_OQ);
  const __m512 numerator = _mm512_mask_blend_ps(negative, one, e);
  return _mm512_mul_ps(_mm512_mul_ps(g, _mm512_div_ps(numerator, _mm512_add_ps(one, e))), u);
}

void GeluMul(const float* gate, const float* up, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(out + i, GeluMul16(_mm512_loadu_ps(gate + i), _mm512_loadu_ps(up + i)));
  }
  if (i < n) {
    const __mmask16 m = TailMask(static_cast<int32_t>(n - i));
    _mm512_mask_storeu_ps(
        out + i, m,
        GeluMul16(_mm512_maskz_loadu_ps(m, gate + i), _mm512_maskz_loadu_ps(m, up + i)));
  }
}

// Two chains of eight doubles over sixteen floats at a time; the masked tail adds exact zeros.
double SumSquares(const float* x, int64_t n) {
  __m512d a = _mm512_setzero_pd(), b = _mm512_setzero_pd();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512d lo = _mm512_cvtps_pd(_mm256_loadu_ps(x + i));
    const __m512d hi = _mm512_cvtps_pd(_mm256_loadu_ps(x + i + 8));
    a = _mm512_fmadd_pd(lo, lo, a);
    b = _mm512_fmadd_pd(hi, hi, b);
  }
  if (i < n) {
    const __mmask16 m = TailMask(static_cast<int32_t>(n - i));
    const __m512 t = _mm512_maskz_loadu_ps(m, x + i);
    const __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(t));
    const __m512d hi =
        _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(t), 1)));
    a = _mm512_fmadd_pd(lo, lo, a);
    b = _mm512_fmadd_pd(hi, hi, b);
  }
  return _mm512_reduce_add_pd(_mm512_add_pd(a, b));
}

// Sixteen at a time: the passing lanes' indices are compressed into place (vpcompressd).
int32_t IndicesAbove(const float* x, int32_t n, float threshold, int32_t* indices) {
  const __m512 t = _mm512_set1_ps(threshold);
  const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  int32_t count = 0, i = 0;
  for (; i < n; i += 16) {
    const __mmask16 valid = n - i >= 16 ? __mmask16{0xffff} : TailMask(n - i);
    const __mmask16 above =
        _mm512_mask_cmp_ps_mask(valid, _mm512_maskz_loadu_ps(valid, x + i), t, _CMP_GT_OQ);
    if (above == 0) continue;
    _mm512_mask_compressstoreu_epi32(indices + count, above,
                                     _mm512_add_epi32(lane, _mm512_set1_epi32(i)));
    count += __builtin_popcount(above);
  }
  return count;
}

float SumExp(const float* x, int32_t n, float max) {
  const __m512 vm = _mm512_set1_ps(max);
  __m512 acc = _mm512_setzero_ps();
  int32_t j = 0;
  for (; j + 16 <= n; j += 16)
    acc = _mm512_add_ps(acc, ExpNonPositive(_mm512_sub_ps(_mm512_loadu_ps(x + j), vm)));
  if (j < n) {
    const __mmask16 tail = TailMask(n - j);
    acc = _mm512_mask_add_ps(acc, tail, acc,
                             ExpNonPositive(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, x + j), vm)));
  }
  return Hsum(acc);
}

}  // namespace

extern const KernelSet kAvx512Kernels = {
    .level = KernelLevel::kAvx512,
    .name = "avx512_vnni",
    .act_q8_unsigned = true,
    .quantize_act = &QuantizeAct,
    .dot_f32 = &DotFloat<F32Weights>,
    .dot_f16 = &DotFloat<F16Weights>,
    .dot_bf16 = &DotFloat<Bf16Weights>,
    .dot_q8_0 = &DotQuant<Q8_0Weights>,
    .dot_q4_0 = &DotQuant<Q4_0Weights>,
    .dot_q5_0 = &DotQuant<Q5_0Weights>,
    .dot_iq4_nl = &DotQuant<IQ4_NLWeights>,
    .dot_mxfp4 = &DotQuant<MXFP4Weights>,
    .dot_q4_1 = &DotOffset<Q4_1Weights>,
    .dot_q5_1 = &DotOffset<Q5_1Weights>,
    .dot_q4_k = &DotScaleMin<Q4_KQuants>,
    .dot_q5_k = &DotScaleMin<Q5_KQuants>,
    .dot_q6_k = &DotQ6_K,
    .dot_iq4_xs = &DotIQ4_XS,
    .dot_q2_k = &DotQ2_K,
    .dot_q3_k = &DotQ3_K,
    .quantize_act_grouped = &QuantizeActGrouped,
    .group_q8_0 = &DotGroup<Q8_0Group>,
    .group_q4_0 = &DotGroup<Q4_0Group>,
    .group_iq4_nl = &DotGroup<IQ4_NLGroup>,
    .group_q4_k = &DotGroupQ4_K,
    .group_f16 = &DotGroupF16,
    .attn_scores = &AttnScores<float>,
    .softmax_exp = &SoftmaxExp,
    .attn_weighted_sum = &AttnWeightedSum<float>,
    .attn_scores_f16 = &AttnScores<uint16_t>,
    .attn_weighted_sum_f16 = &AttnWeightedSum<uint16_t>,
    .to_f16 = &ToF16,
    .silu_mul = &SiluMul,
    .gelu_mul = &GeluMul,
    .sum_squares = &SumSquares,
    .indices_above = &IndicesAbove,
    .sum_exp = &SumExp,
};

}  // namespace grove
