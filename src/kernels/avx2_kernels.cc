// AVX2 + FMA + F16C kernels (Haswell and later, Zen 1 and later).
//
// Compiled with -mavx2 -mfma -mf16c -ffp-contract=off (CMakeLists.txt). Everything here lives in an
// anonymous namespace and uses intrinsics only, so no inline function of a shared header is
// compiled with these flags (the linker could otherwise keep that copy for callers on any CPU).
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

#include <algorithm>
#include <cfloat>
#include <cmath>
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

// 16 vector registers: 4 rows x 2 accumulators, the decoded weights and temporaries fit.
constexpr int kTile = 4;

// Fixed reduction tree (8 -> 4 -> 2 -> 1); every output goes through exactly this sequence.
float Hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

const uint8_t* RowPtr(const void* x, int64_t stride, int i) {
  return static_cast<const uint8_t*>(x) + i * stride;
}

// Splits n_x rows into tiles of kTile and a remainder: tile(R, first_row) with R a constant.
template <int R>
struct Rows {
  static constexpr int kR = R;
};

template <typename TileFn>
void ForEachTile(int n_x, TileFn&& tile) {
  int i = 0;
  for (; i + kTile <= n_x; i += kTile) tile(Rows<kTile>{}, i);
  switch (n_x - i) {
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

struct F32Weights {
  using T = float;
  static __m256 Load(const float* p) { return _mm256_loadu_ps(p); }
};
struct F16Weights {
  using T = uint16_t;
  static __m256 Load(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
};
struct Bf16Weights {
  using T = uint16_t;
  static __m256 Load(const uint16_t* p) {
    const __m256i wide =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));  // bf16 is the top half of an f32
  }
};

// Two accumulators per row (even and odd groups of 8 elements) hide the 4-cycle FMA latency when a
// tile has a single row (decode). The < 8 element tail is copied into zero-padded buffers.
template <typename W, int R>
void FloatTile(const typename W::T* w, int64_t n, const void* x, int64_t x_stride, float* y,
               int64_t y_stride) {
  const float* xr[R];
  for (int i = 0; i < R; ++i) xr[i] = reinterpret_cast<const float*>(RowPtr(x, x_stride, i));
  __m256 acc0[R], acc1[R];
  for (int i = 0; i < R; ++i) acc0[i] = acc1[i] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) {
    const __m256 w0 = W::Load(w + k);
    const __m256 w1 = W::Load(w + k + 8);
    for (int i = 0; i < R; ++i) {
      acc0[i] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xr[i] + k), acc0[i]);
      acc1[i] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xr[i] + k + 8), acc1[i]);
    }
  }
  if (k + 8 <= n) {
    const __m256 w0 = W::Load(w + k);
    for (int i = 0; i < R; ++i) acc0[i] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xr[i] + k), acc0[i]);
    k += 8;
  }
  if (k < n) {
    const int64_t rest = n - k;
    typename W::T w_tail[8] = {};
    std::memcpy(w_tail, w + k, rest * sizeof(typename W::T));
    const __m256 w0 = W::Load(w_tail);
    for (int i = 0; i < R; ++i) {
      float x_tail[8] = {};
      std::memcpy(x_tail, xr[i] + k, rest * sizeof(float));
      acc1[i] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x_tail), acc1[i]);
    }
  }
  for (int i = 0; i < R; ++i) y[i * y_stride] = Hsum(_mm256_add_ps(acc0[i], acc1[i]));
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

// ---- Q8_0 / Q4_0 / Q5_0 / IQ4_NL / MXFP4 weights times ActQ8 activations (signed bytes, one float
// scale per block)

// The 32 bits of a Q5_1 block's qh as 32 bytes, 0x10 where the bit is set (bit 4 of the quant).
__m256i HighBits(const uint8_t* qh) {
  uint32_t bits;
  std::memcpy(&bits, qh, sizeof(bits));
  // Byte k takes byte k / 8 of the word (shuffles stay within 128-bit lanes; each lane holds the
  // whole word), then tests its bit k % 8.
  const __m256i bytes =
      _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)),
                          _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                           2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

__m256i Nibbles(const uint8_t* qs) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0f));
}

struct Q8_0Weights {
  using Block = BlockQ8_0;
  static __m256i Load(const BlockQ8_0& b) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
  }
};
struct Q4_0Weights {
  using Block = BlockQ4_0;
  static __m256i Load(const BlockQ4_0& b) {
    // Low nibbles are elements 0..15, high nibbles 16..31: put the shifted copy in the upper half.
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
    const __m256i v = _mm256_set_m128i(_mm_srli_epi16(q, 4), q);
    return _mm256_sub_epi8(_mm256_and_si256(v, _mm256_set1_epi8(0x0f)), _mm256_set1_epi8(8));
  }
};

struct Q5_0Weights {
  using Block = BlockQ5_0;
  static __m256i Load(const BlockQ5_0& b) {
    return _mm256_sub_epi8(_mm256_or_si256(Nibbles(b.qs), HighBits(b.qh)), _mm256_set1_epi8(16));
  }
};
// IQ4_NL and MXFP4: each nibble replaced by its level with a byte shuffle.
template <typename BlockT, const int8_t* kLevels>
struct LevelWeights {
  using Block = BlockT;
  static __m256i Load(const BlockT& b) {
    const __m256i levels =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kLevels)));
    return _mm256_shuffle_epi8(levels, Nibbles(b.qs));
  }
};
using IQ4_NLWeights = LevelWeights<BlockIQ4_NL, kIq4NlLevels>;
using MXFP4Weights = LevelWeights<BlockMXFP4, kMxfp4Levels>;

// A block's step: its fp16 d, or MXFP4's 2^(e - 128).
template <typename Block>
float BlockStep(const Block& b) {
  if constexpr (requires { b.e; }) {
    return kMxfp4Scales[b.e];
  } else {
    return _cvtsh_ss(b.d);
  }
}

// One block of 32 per step: maddubs multiplies unsigned by signed bytes, so the weight's sign moves
// onto the activation (|w| <= 128, |x| <= 127: a pair sum stays below the int16 limit, 32512).
// Then per row and block one float multiply-add of the exact int32 sum with d_w * d_x.
template <typename W, int R>
void QuantTile(const typename W::Block* w, int64_t n_blocks, int64_t scale_offset, const void* x,
               int64_t x_stride, float* y, int64_t y_stride) {
  const uint8_t* xq[R];
  const float* xd[R];
  for (int i = 0; i < R; ++i) {
    xq[i] = RowPtr(x, x_stride, i);
    xd[i] = reinterpret_cast<const float*>(xq[i] + scale_offset);
  }
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[R];
  for (int i = 0; i < R; ++i) acc[i] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const __m256i wq = W::Load(w[b]);
    const __m256i w_abs = _mm256_abs_epi8(wq);
    const __m256 wd = _mm256_set1_ps(BlockStep(w[b]));
    for (int i = 0; i < R; ++i) {
      const __m256i xb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[i] + b * kQBlock));
      const __m256i prod16 = _mm256_maddubs_epi16(w_abs, _mm256_sign_epi8(xb, wq));
      const __m256i prod32 = _mm256_madd_epi16(prod16, ones);
      const __m256 scale = _mm256_mul_ps(wd, _mm256_broadcast_ss(xd[i] + b));
      acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(prod32), scale, acc[i]);
    }
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

// ---- Q4_1 / Q5_1 weights (value = d q + m, q unsigned) times ActQ8 activations
//
// Per block b: d d_b sum(q x_q) + m (d_b sum x_q); the second factor is the activation row's block
// sum (kernel_set.h), so the min term is one scalar multiply-add per block and row, in its own
// accumulator added at the end. The quants are unsigned (0..31), so maddubs takes them directly.

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
  const uint8_t* xq[R];
  const float* xd[R];
  const float* xsum[R];
  for (int i = 0; i < R; ++i) {
    xq[i] = RowPtr(x, x_stride, i);
    xd[i] = reinterpret_cast<const float*>(xq[i] + scale_offset);
    xsum[i] = reinterpret_cast<const float*>(xq[i] + sum_offset);
  }
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[R];
  float min_acc[R];
  for (int i = 0; i < R; ++i) {
    acc[i] = _mm256_setzero_ps();
    min_acc[i] = 0.0f;
  }
  for (int64_t b = 0; b < n_blocks; ++b) {
    const __m256i wq = W::Load(w[b]);
    const __m256 wd = _mm256_set1_ps(_cvtsh_ss(w[b].d));
    const float m = _cvtsh_ss(w[b].m);
    for (int i = 0; i < R; ++i) {
      const __m256i xb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[i] + b * kQBlock));
      const __m256i prod32 = _mm256_madd_epi16(_mm256_maddubs_epi16(wq, xb), ones);
      const __m256 scale = _mm256_mul_ps(wd, _mm256_broadcast_ss(xd[i] + b));
      acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(prod32), scale, acc[i]);
      min_acc[i] += m * xsum[i][b];
    }
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

// ---- k-quant weights (Q2_K ... Q6_K, IQ4_XS) times ActQ8 activations, one block of 32 per step
// like Q4_0
//
// Q4_K and Q5_K quants are unsigned (0..15, 0..31), so maddubs takes them directly; the min term,
// sum_j dmin m_j d_b sum(x_bj), is one 8-lane FMA per super-block and row on the activation block
// sums, in a second accumulator subtracted at the end. Q2_K, Q3_K and Q6_K take their quants
// unsigned as well (offsets -4 and -32 moved onto the half-block sums); each of their blocks has
// two 16-element scales, which cover lanes 0-3 and 4-7 of the 8 int32 sums.

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

// The quants (0..31) of sub-block j of a Q4_K or Q5_K block, 32 bytes: Q4_K's nibbles, and for
// Q5_K bit j of each qh byte moved to bit 4.
struct Q4_KQuants {
  using Block = BlockQ4_K;
  static __m256i Load(const BlockQ4_K& w, int j) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qs + 32 * (j / 2)));
    return _mm256_and_si256(j % 2 == 0 ? q : _mm256_srli_epi16(q, 4), _mm256_set1_epi8(0x0f));
  }
};
struct Q5_KQuants {
  using Block = BlockQ5_K;
  static __m256i Load(const BlockQ5_K& w, int j) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qs + 32 * (j / 2)));
    const __m256i nibbles =
        _mm256_and_si256(j % 2 == 0 ? q : _mm256_srli_epi16(q, 4), _mm256_set1_epi8(0x0f));
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qh));
    // Bit j of each byte to bit 4 (a 16-bit shift: bit 4 of each byte comes from its own byte,
    // as j <= 7).
    const __m256i moved = j <= 4 ? _mm256_slli_epi16(qh, 4 - j) : _mm256_srli_epi16(qh, j - 4);
    return _mm256_or_si256(nibbles, _mm256_and_si256(moved, _mm256_set1_epi8(0x10)));
  }
};

// Q4_K/Q5_K quants are unsigned (0..31), so maddubs takes them directly (pair sums <= 2 * 31 *
// 128).
template <typename K, int R>
void ScaleMinTile(const typename K::Block* w, int64_t n_super, int64_t scale_offset,
                  int64_t sum_offset, const void* x, int64_t x_stride, float* y, int64_t y_stride) {
  const uint8_t* xq[R];
  const float* xd[R];
  const float* xsum[R];
  for (int i = 0; i < R; ++i) {
    xq[i] = RowPtr(x, x_stride, i);
    xd[i] = reinterpret_cast<const float*>(xq[i] + scale_offset);
    xsum[i] = reinterpret_cast<const float*>(xq[i] + sum_offset);
  }
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[R], min_acc[R];
  for (int i = 0; i < R; ++i) acc[i] = min_acc[i] = _mm256_setzero_ps();
  alignas(32) float sub_scales[8];
  for (int64_t s = 0; s < n_super; ++s) {
    __m256i sc, m;
    UnpackScaleMin(w[s].scales, &sc, &m);
    _mm256_store_ps(sub_scales,
                    _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(w[s].d)), _mm256_cvtepi32_ps(sc)));
    const __m256 mins = _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(w[s].dmin)), _mm256_cvtepi32_ps(m));
    const int64_t b0 = s * (kKBlock / kQBlock);
    for (int j = 0; j < kKBlock / kQBlock; ++j) {
      const __m256i wq = K::Load(w[s], j);
      const __m256 wd = _mm256_set1_ps(sub_scales[j]);
      const int64_t b = b0 + j;
      for (int i = 0; i < R; ++i) {
        const __m256i xb =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[i] + b * kQBlock));
        const __m256i prod32 = _mm256_madd_epi16(_mm256_maddubs_epi16(wq, xb), ones);
        const __m256 scale = _mm256_mul_ps(wd, _mm256_broadcast_ss(xd[i] + b));
        acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(prod32), scale, acc[i]);
      }
    }
    for (int i = 0; i < R; ++i) {
      min_acc[i] = _mm256_fmadd_ps(mins, _mm256_loadu_ps(xsum[i] + b0), min_acc[i]);
    }
  }
  for (int i = 0; i < R; ++i) y[i * y_stride] = Hsum(acc[i]) - Hsum(min_acc[i]);
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

// IQ4_XS: sub-block j of 32 is activation block b0 + j; its nibbles decode through the IQ4_NL
// levels as IQ4_NL's do, and its step d (ls_j - 32) is one float per block, as Q4_K's sub-scales.
template <int R>
void IQ4_XSTile(const BlockIQ4_XS* w, int64_t n_super, int64_t scale_offset, const void* x,
                int64_t x_stride, float* y, int64_t y_stride) {
  const uint8_t* xq[R];
  const float* xd[R];
  for (int i = 0; i < R; ++i) {
    xq[i] = RowPtr(x, x_stride, i);
    xd[i] = reinterpret_cast<const float*>(xq[i] + scale_offset);
  }
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[R];
  for (int i = 0; i < R; ++i) acc[i] = _mm256_setzero_ps();
  for (int64_t s = 0; s < n_super; ++s) {
    const float d = _cvtsh_ss(w[s].d);
    const int64_t b0 = s * (kKBlock / kQBlock);
    for (int j = 0; j < kKBlock / kQBlock; ++j) {
      const __m256 wd = _mm256_set1_ps(d * static_cast<float>(IQ4_XSScale(w[s], j)));
      const __m256i levels = _mm256_broadcastsi128_si256(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4NlLevels)));
      const __m256i wq = _mm256_shuffle_epi8(levels, Nibbles(w[s].qs + 16 * j));
      const __m256i w_abs = _mm256_abs_epi8(wq);
      const int64_t b = b0 + j;
      for (int i = 0; i < R; ++i) {
        const __m256i xb =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[i] + b * kQBlock));
        const __m256i prod16 = _mm256_maddubs_epi16(w_abs, _mm256_sign_epi8(xb, wq));
        const __m256i prod32 = _mm256_madd_epi16(prod16, ones);
        const __m256 scale = _mm256_mul_ps(wd, _mm256_broadcast_ss(xd[i] + b));
        acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(prod32), scale, acc[i]);
      }
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

// The low 2 bits of activation block c8 (0..7) of a Q2_K or Q3_K super-block: bits 2 (c8 % 4) of
// the 32 bytes of qs for its half c8 / 4.
__m256i Low2Bits(const uint8_t* qs, int c8) {
  const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * (c8 / 4)));
  return _mm256_and_si256(_mm256_srli_epi16(q, 2 * (c8 % 4)), _mm256_set1_epi8(0x03));
}

// Q3_K and Q6_K: q = u - kOffset with u unsigned (Q3_K: low 2 bits | bit c8 of hmask << 2, 0..7;
// Q6_K: 4 low bits | 2 high bits << 4, 0..63), so maddubs takes it directly (pair sums <= 2 * 63 *
// 127). Per block the exact sum of u x weighted by the two signed 16-bit scales, one FMA (d d_b);
// the offset term, -kOffset d sum_k sc_k d_b sum(x over sub-block k), is two 8-lane FMAs per
// super-block and row on the activation's half-block sums. (The sign trick on u - kOffset cost a
// subtract, an abs and a sign per block and row more.)
struct Q3_KQuants {
  using Block = BlockQ3_K;
  static constexpr float kOffset = 4.0f;
  // The 16 signed scales, built in a register: a 16-byte load of an array just written byte by
  // byte stalls on store forwarding (decoding lost a fifth).
  static __m128i Scales(const BlockQ3_K& w) {
    uint32_t words[4];
    Q3_KScaleWords(w.scales, words);
    return _mm_sub_epi8(_mm_setr_epi32(static_cast<int>(words[0]), static_cast<int>(words[1]),
                                       static_cast<int>(words[2]), static_cast<int>(words[3])),
                        _mm_set1_epi8(32));
  }
  // What Quants reads of a block, loaded once per super-block.
  struct Loaded {
    const uint8_t* qs;
    __m256i hmask;
  };
  static Loaded Load(const BlockQ3_K& w) {
    return {w.qs, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.hmask))};
  }
  static __m256i Quants(const Loaded& w, int c8) {
    const __m256i hmask = w.hmask;
    // Bit c8 of each hmask byte to bit 2 (a 16-bit shift keeps it in its own byte).
    const __m256i moved =
        c8 <= 2 ? _mm256_slli_epi16(hmask, 2 - c8) : _mm256_srli_epi16(hmask, c8 - 2);
    return _mm256_or_si256(Low2Bits(w.qs, c8), _mm256_and_si256(moved, _mm256_set1_epi8(0x04)));
  }
};
struct Q6_KQuants {
  using Block = BlockQ6_K;
  static constexpr float kOffset = 32.0f;
  static __m128i Scales(const BlockQ6_K& w) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.scales));
  }
  using Loaded = const BlockQ6_K&;
  static Loaded Load(const BlockQ6_K& w) { return w; }
  static __m256i Quants(const BlockQ6_K& w, int c8) {
    const int h = c8 / 4, c = c8 % 4;
    const __m256i ql =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.ql + 64 * h + 32 * (c % 2)));
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qh + 32 * h));
    const __m256i nibbles =
        _mm256_and_si256(_mm256_srli_epi16(ql, 4 * (c / 2)), _mm256_set1_epi8(0x0f));
    const __m256i top = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * c), _mm256_set1_epi8(0x03));
    return _mm256_or_si256(nibbles, _mm256_slli_epi16(top, 4));
  }
};

template <typename K, int R>
void OffsetScaleTile(const typename K::Block* w, int64_t n_super, int64_t scale_offset,
                     int64_t half_sum_offset, const void* x, int64_t x_stride, float* y,
                     int64_t y_stride) {
  const uint8_t* xq[R];
  const float* xd[R];
  const float* x_half[R];
  for (int i = 0; i < R; ++i) {
    xq[i] = RowPtr(x, x_stride, i);
    xd[i] = reinterpret_cast<const float*>(xq[i] + scale_offset);
    x_half[i] = reinterpret_cast<const float*>(xq[i] + half_sum_offset);
  }
  __m256 acc[R], offset_acc[R];
  for (int i = 0; i < R; ++i) acc[i] = offset_acc[i] = _mm256_setzero_ps();
  for (int64_t s = 0; s < n_super; ++s) {
    const float d_scalar = _cvtsh_ss(w[s].d);
    const __m256 d = _mm256_set1_ps(d_scalar);
    const __m128i sc8 = K::Scales(w[s]);
    alignas(16) int8_t scales[16];
    _mm_store_si128(reinterpret_cast<__m128i*>(scales), sc8);
    const __m256 offset_d = _mm256_set1_ps(K::kOffset * d_scalar);
    const __m256 offsets_lo =
        _mm256_mul_ps(offset_d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc8)));
    const __m256 offsets_hi = _mm256_mul_ps(
        offset_d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(sc8, sc8))));
    const int64_t b0 = s * (kKBlock / kQBlock);
    const typename K::Loaded loaded = K::Load(w[s]);
    for (int c8 = 0; c8 < kKBlock / kQBlock; ++c8) {
      const __m256i u = K::Quants(loaded, c8);
      const __m256i sc =
          _mm256_set_m128i(_mm_set1_epi16(scales[2 * c8 + 1]), _mm_set1_epi16(scales[2 * c8]));
      const int64_t b = b0 + c8;
      for (int i = 0; i < R; ++i) {
        const __m256i xb =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[i] + b * kQBlock));
        const __m256i scaled = _mm256_madd_epi16(_mm256_maddubs_epi16(u, xb), sc);
        const __m256 xs = _mm256_broadcast_ss(xd[i] + b);
        acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(scaled), _mm256_mul_ps(d, xs), acc[i]);
      }
    }
    for (int i = 0; i < R; ++i) {
      offset_acc[i] =
          _mm256_fmadd_ps(offsets_lo, _mm256_loadu_ps(x_half[i] + 2 * b0), offset_acc[i]);
      offset_acc[i] =
          _mm256_fmadd_ps(offsets_hi, _mm256_loadu_ps(x_half[i] + 2 * b0 + 8), offset_acc[i]);
    }
  }
  for (int i = 0; i < R; ++i) y[i * y_stride] = Hsum(acc[i]) - Hsum(offset_acc[i]);
}

template <typename K>
void DotOffsetScale(const void* w_row, int64_t n_in, const void* x, int64_t x_stride, int n_x,
                    float* y, int64_t y_stride) {
  const auto* w = static_cast<const typename K::Block*>(w_row);
  const int64_t scale_offset = ActQ8ScaleOffset(n_in);
  const int64_t half_sum_offset = ActQ8HalfSumOffset(n_in);
  ForEachTile(n_x, [&](auto rows, int i) {
    OffsetScaleTile<K, decltype(rows)::kR>(w, n_in / kKBlock, scale_offset, half_sum_offset,
                                           RowPtr(x, x_stride, i), x_stride, y + i * y_stride,
                                           y_stride);
  });
}

// Q2_K: per activation block, maddubs of the unsigned quants (0..3) with x, weighted by the two
// 4-bit scales in 16-bit lanes: an exact int32 sum with one float FMA (d d_b). The min term,
// dmin sum_k m_k d_b sum(x over sub-block k), is two 8-lane FMAs per super-block and row on the
// activation's half-block sums (kernel_set.h), as the AVX-512 level does: per block it cost a
// second maddubs, madd, convert, multiply and FMA.
template <int R>
void Q2_KTile(const BlockQ2_K* w, int64_t n_super, int64_t scale_offset, int64_t half_sum_offset,
              const void* x, int64_t x_stride, float* y, int64_t y_stride) {
  const uint8_t* xq[R];
  const float* xd[R];
  const float* x_half[R];
  for (int i = 0; i < R; ++i) {
    xq[i] = RowPtr(x, x_stride, i);
    xd[i] = reinterpret_cast<const float*>(xq[i] + scale_offset);
    x_half[i] = reinterpret_cast<const float*>(xq[i] + half_sum_offset);
  }
  __m256 acc[R], min_acc[R];
  for (int i = 0; i < R; ++i) acc[i] = min_acc[i] = _mm256_setzero_ps();
  for (int64_t s = 0; s < n_super; ++s) {
    const __m256 d = _mm256_set1_ps(_cvtsh_ss(w[s].d));
    const __m256 dmin = _mm256_set1_ps(_cvtsh_ss(w[s].dmin));
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[s].scales));
    const __m128i m = _mm_and_si128(_mm_srli_epi16(packed, 4), _mm_set1_epi8(0x0f));
    const __m256 mins_lo = _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(m)));
    const __m256 mins_hi =
        _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(m, m))));
    const int64_t b0 = s * (kKBlock / kQBlock);
    for (int c8 = 0; c8 < kKBlock / kQBlock; ++c8) {
      const int p0 = w[s].scales[2 * c8], p1 = w[s].scales[2 * c8 + 1];
      const __m256i sc = _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(p1 & 0x0f)),
                                          _mm_set1_epi16(static_cast<int16_t>(p0 & 0x0f)));
      const __m256i q = Low2Bits(w[s].qs, c8);
      const int64_t b = b0 + c8;
      for (int i = 0; i < R; ++i) {
        const __m256i xb =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[i] + b * kQBlock));
        const __m256i scaled = _mm256_madd_epi16(_mm256_maddubs_epi16(q, xb), sc);
        const __m256 xs = _mm256_broadcast_ss(xd[i] + b);
        acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(scaled), _mm256_mul_ps(d, xs), acc[i]);
      }
    }
    for (int i = 0; i < R; ++i) {
      min_acc[i] = _mm256_fmadd_ps(mins_lo, _mm256_loadu_ps(x_half[i] + 2 * b0), min_acc[i]);
      min_acc[i] = _mm256_fmadd_ps(mins_hi, _mm256_loadu_ps(x_half[i] + 2 * b0 + 8), min_acc[i]);
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

// ---- Row groups (quant/packed.h) times grouped ActQ8 activations
//
// The AVX-512 level's layout read in two halves: lane j of a 256-bit register is row j of the
// group's first 8 rows (half 0) or its last 8 (half 1). AVX2 has no vpdpbusd: maddubs multiplies 4
// weights of each of 8 rows by the same 4 activation bytes (broadcast) into two int16 pair sums per
// row. Q4_K's nibbles are unsigned (0..15) and activation quants |q| <= 127, so a sub-block's 8
// chunks add up in int16 (|sum| <= 8 * 2 * 15 * 127 = 30480) and one madd with ones per sub-block
// and half gives each row's exact int32 sum. The float steps after it are the AVX-512 kernel's,
// lane for lane, so the two levels give the same bits; no horizontal sums.

// Weight bytes requested ahead of use by the group kernels here: two Q4_K super-blocks of a group
// (4.5 KB) for Q4_K, 16 KB for the block-of-32 groups and F16, as at the AVX-512 level. At this
// level 8-row tiles are compute-bound (t(8) about 3 t(1)), so the 16 KB lead gains less than
// there: t(8) 2-5% lower for Q8_0 and Q4_0, 15% for F16 (GROVE_KERNELS=avx2 on a Zen 5).
constexpr int64_t kPrefetchQ4_KBytes = 2 * kGroupRows * static_cast<int64_t>(sizeof(BlockQ4_K));
constexpr int64_t kPrefetchBytes = 16 * 1024;

// One chunk of a block for every row of a tile: the unsigned weights w of the two halves times the
// 4 activation bytes at offset in block b, added to each row's int16 sums.
template <int R>
void AddGroupChunk(const GroupedRows<R>& rows, int64_t b, int offset, const __m256i (&w)[2],
                   __m256i (&sums)[R][2]) {
  for (int i = 0; i < R; ++i) {
    int32_t four;
    std::memcpy(&four, rows.q[i] + b * kQBlock + offset, sizeof(four));
    const __m256i x4 = _mm256_set1_epi32(four);
    for (int h = 0; h < 2; ++h) {
      sums[i][h] = _mm256_add_epi16(sums[i][h], _mm256_maddubs_epi16(w[h], x4));
    }
  }
}

// The same for signed weights w (|w| <= 128), whose pair sums would saturate maddubs as unsigned
// ones: each weight's sign moves onto the activation bytes, lane by lane (|w| times sign(x, w),
// pair sums <= 2 * 128 * 127), and the step's sums become int32 at once (the tile's sums are
// int32 here).
template <int R>
void AddSignedGroupChunk(const GroupedRows<R>& rows, int64_t b, int offset, const __m256i (&w)[2],
                         __m256i (&sums)[R][2]) {
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i w_abs[2] = {_mm256_abs_epi8(w[0]), _mm256_abs_epi8(w[1])};
  for (int i = 0; i < R; ++i) {
    int32_t four;
    std::memcpy(&four, rows.q[i] + b * kQBlock + offset, sizeof(four));
    const __m256i x4 = _mm256_set1_epi32(four);
    for (int h = 0; h < 2; ++h) {
      const __m256i pairs = _mm256_maddubs_epi16(w_abs[h], _mm256_sign_epi8(x4, w[h]));
      sums[i][h] = _mm256_add_epi32(sums[i][h], _mm256_madd_epi16(pairs, ones));
    }
  }
}

// The nibbles of 64 bytes of a group (two halves), low (high = false) or high.
void GroupNibbles(const uint8_t* p, bool high, __m256i (&w)[2]) {
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  for (int h = 0; h < 2; ++h) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * h));
    w[h] = _mm256_and_si256(high ? _mm256_srli_epi16(v, 4) : v, low4);
  }
}

void PrefetchGroupBytes(const uint8_t* p, int64_t bytes) {
  for (int64_t line = 0; line < bytes; line += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(p + line), _MM_HINT_T0);
  }
}

// The 16 outputs of each row of a tile.
template <int R>
void StoreGroupTile(const __m256 (&acc)[R][2], float* y, int64_t y_stride) {
  for (int i = 0; i < R; ++i) {
    _mm256_storeu_ps(y + i * y_stride, acc[i][0]);
    _mm256_storeu_ps(y + i * y_stride + 8, acc[i][1]);
  }
}

// Block-of-32 groups (Q4_0, IQ4_NL: a block's 4 chunks of 64 bytes hold elements 4c..4c+3 in
// the low nibbles and 16 + 4c.. in the high ones of the 16 rows; Q8_0: 8 chunks of 4 bytes):
// G::BlockSums gives every row's exact int32 sum of weight times activation for block b, then
// one convert, multiply and FMA per half and row, with the 16 halves of d per block.
//
// Q4_0: the nibbles are q + 8; a block's 8 steps add up in int16, and each row's correction, -8
// times the activation block sum, joins at the int32 step (quantize_act_grouped stores -sum q).
struct Q4_0Group {
  static constexpr int64_t kQuantBytes = kGroupRows * kQBlock / 2;
  template <int R>
  static void BlockSums(const uint8_t* quants, const GroupedRows<R>& rows, int64_t b,
                        __m256i (&out)[R][2]) {
    __m256i sums[R][2];
    for (int i = 0; i < R; ++i) sums[i][0] = sums[i][1] = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      __m256i w[2];
      GroupNibbles(quants + 64 * c, false, w);
      AddGroupChunk(rows, b, 4 * c, w, sums);
      GroupNibbles(quants + 64 * c, true, w);
      AddGroupChunk(rows, b, 16 + 4 * c, w, sums);
    }
    const __m256i ones = _mm256_set1_epi16(1);
    for (int i = 0; i < R; ++i) {
      const __m256i offset = _mm256_set1_epi32(rows.neg_sums[i][b] * 8);
      for (int h = 0; h < 2; ++h) {
        out[i][h] = _mm256_add_epi32(offset, _mm256_madd_epi16(sums[i][h], ones));
      }
    }
  }
};

// IQ4_NL: each nibble replaced by its signed level (-127..113) with a byte shuffle. Levels + 128
// (what vpdpbusd takes on AVX-512) would saturate maddubs' int16 pair sums, so the levels go
// through AddSignedGroupChunk. The integer sums equal the AVX-512 kernel's (which subtracts 128
// times the activation sum), so the bits do.
struct IQ4_NLGroup {
  static constexpr int64_t kQuantBytes = kGroupRows * kQBlock / 2;
  template <int R>
  static void BlockSums(const uint8_t* quants, const GroupedRows<R>& rows, int64_t b,
                        __m256i (&sums)[R][2]) {
    const __m256i levels = _mm256_broadcastsi128_si256(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4NlLevels)));
    for (int i = 0; i < R; ++i) sums[i][0] = sums[i][1] = _mm256_setzero_si256();
    for (int step = 0; step < 8; ++step) {
      const int c = step / 2;
      const bool high = step % 2 == 1;
      __m256i w[2];
      GroupNibbles(quants + 64 * c, high, w);
      for (int h = 0; h < 2; ++h) w[h] = _mm256_shuffle_epi8(levels, w[h]);
      AddSignedGroupChunk(rows, b, (high ? 16 : 0) + 4 * c, w, sums);
    }
  }
};

// Q8_0: the quants are stored q + 128 (what vpdpbusd takes); an xor gives q back, and the signed
// quants go through AddSignedGroupChunk as IQ4_NL's levels do. The exact sum of q x is the AVX-512
// kernel's (which subtracts 128 times the activation sum), so the bits are too. Against the row
// kernel: the weight's abs and sign are shared by the tile's rows, and a block's scaling is one
// step for 8 weight rows.
struct Q8_0Group {
  static constexpr int64_t kQuantBytes = kGroupRows * kQBlock;
  template <int R>
  static void BlockSums(const uint8_t* quants, const GroupedRows<R>& rows, int64_t b,
                        __m256i (&sums)[R][2]) {
    const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80));
    for (int i = 0; i < R; ++i) sums[i][0] = sums[i][1] = _mm256_setzero_si256();
    for (int c = 0; c < 8; ++c) {
      __m256i w[2];
      for (int h = 0; h < 2; ++h) {
        w[h] = _mm256_xor_si256(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(quants + 64 * c + 32 * h)), bias);
      }
      AddSignedGroupChunk(rows, b, 4 * c, w, sums);
    }
  }
};

template <typename G, int R>
void GroupTile(const uint8_t* group, int64_t n_in, const void* x, int64_t x_stride, float* y,
               int64_t y_stride) {
  constexpr int64_t kQuantBytes = G::kQuantBytes;
  const GroupedRows<R> rows(x, x_stride, n_in);
  const int64_t n_blocks = n_in / kQBlock;
  const uint8_t* scales = group + n_blocks * kQuantBytes;
  __m256 acc[R][2];
  for (int i = 0; i < R; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* quants = group + b * kQuantBytes;
    PrefetchGroupBytes(quants + kPrefetchBytes, kQuantBytes);
    __m256i sums[R][2];
    G::BlockSums(quants, rows, b, sums);
    for (int h = 0; h < 2; ++h) {
      const __m256 d = _mm256_cvtph_ps(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + 32 * b + 16 * h)));
      for (int i = 0; i < R; ++i) {
        const __m256 scaled =
            _mm256_mul_ps(_mm256_cvtepi32_ps(sums[i][h]), _mm256_set1_ps(rows.d[i][b]));
        acc[i][h] = _mm256_fmadd_ps(scaled, d, acc[i][h]);
      }
    }
  }
  StoreGroupTile(acc, y, y_stride);
}

template <typename G>
void DotGroup(const void* group, int64_t n_in, const void* x, int64_t x_stride, int n_x, float* y,
              int64_t y_stride) {
  ForEachTile(n_x, [&](auto rows, int i) {
    GroupTile<G, decltype(rows)::kR>(static_cast<const uint8_t*>(group), n_in,
                                     RowPtr(x, x_stride, i), x_stride, y + i * y_stride, y_stride);
  });
}

template <int R>
void GroupQ4_KTile(const uint8_t* group, int64_t n_in, const void* x, int64_t x_stride, float* y,
                   int64_t y_stride) {
  constexpr int64_t kSuperBytes = kGroupRows * sizeof(BlockQ4_K);
  constexpr int kSubs = kKBlock / kQBlock;
  const GroupedRows<R> rows(x, x_stride, n_in);
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[R][2];
  for (int i = 0; i < R; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  // Per sub-block and half: d sc and dmin m of the 8 rows.
  alignas(32) float scale[kSubs][2][8];
  alignas(32) float min[kSubs][2][8];
  for (int64_t s = 0; s < n_in / kKBlock; ++s) {
    const uint8_t* base = group + s * kSuperBytes;
    PrefetchGroupBytes(base + kPrefetchQ4_KBytes, kSuperBytes);
    // d_x (-sum q_x) of each row's 8 blocks here, 8 at a time, as the AVX-512 level does.
    alignas(32) float x_sums[R][kSubs];
    for (int i = 0; i < R; ++i) {
      const __m256i neg =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows.neg_sums[i] + s * kSubs));
      _mm256_store_ps(x_sums[i], _mm256_mul_ps(_mm256_loadu_ps(rows.d[i] + s * kSubs),
                                               _mm256_cvtepi32_ps(neg)));
    }
    for (int h = 0; h < 2; ++h) {
      auto halves = [&](int offset) {
        return _mm256_cvtph_ps(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(base + offset + 16 * h)));
      };
      auto chunk = [&](int w) {
        return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
            base + kQ4_KGroupScales + w * kQ4_KGroupScaleChunk + 32 * h));
      };
      const __m256 d = halves(kQ4_KGroupD);
      const __m256 dmin = halves(kQ4_KGroupDmin);
      const __m256i a0 = chunk(0);
      const __m256i a1 = chunk(1);
      const __m256i a2 = chunk(2);
      // Byte t of lane j: the scale (min) of sub-block t (lo) or 4 + t (hi) of row j.
      const __m256i low6 = _mm256_set1_epi8(0x3f);
      const __m256i low2 = _mm256_set1_epi8(0x03);
      const __m256i sc_lo = _mm256_and_si256(a0, low6);
      const __m256i m_lo = _mm256_and_si256(a1, low6);
      const __m256i sc_hi =
          _mm256_or_si256(_mm256_and_si256(a2, low4),
                          _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(a0, 6), low2), 4));
      const __m256i m_hi =
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(a2, 4), low4),
                          _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(a1, 6), low2), 4));
      const __m256i byte = _mm256_set1_epi32(0xff);
      for (int sub = 0; sub < kSubs; ++sub) {
        const int shift = 8 * (sub % 4);
        _mm256_store_ps(
            scale[sub][h],
            _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_and_si256(
                                 _mm256_srli_epi32(sub < 4 ? sc_lo : sc_hi, shift), byte))));
        _mm256_store_ps(
            min[sub][h],
            _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(_mm256_and_si256(
                                    _mm256_srli_epi32(sub < 4 ? m_lo : m_hi, shift), byte))));
      }
    }
    for (int sub = 0; sub < kSubs; ++sub) {
      const int64_t b = s * kSubs + sub;
      const uint8_t* quants = base + (sub / 2) * 8 * 64;
      __m256i sums[R][2];
      for (int i = 0; i < R; ++i) sums[i][0] = sums[i][1] = _mm256_setzero_si256();
      for (int c = 0; c < 8; ++c) {
        __m256i w[2];
        GroupNibbles(quants + 64 * c, sub % 2 == 1, w);
        AddGroupChunk(rows, b, 4 * c, w, sums);
      }
      for (int i = 0; i < R; ++i) {
        // - dmin m d_x sum(q_x) = dmin m (d_x * -sum(q_x))
        const __m256 x_sum = _mm256_set1_ps(x_sums[i][sub]);
        for (int h = 0; h < 2; ++h) {
          const __m256 scaled =
              _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(sums[i][h], ones)),
                            _mm256_set1_ps(rows.d[i][b]));
          acc[i][h] = _mm256_fmadd_ps(scaled, _mm256_load_ps(scale[sub][h]), acc[i][h]);
          acc[i][h] = _mm256_fmadd_ps(x_sum, _mm256_load_ps(min[sub][h]), acc[i][h]);
        }
      }
    }
  }
  StoreGroupTile(acc, y, y_stride);
}

void DotGroupQ4_K(const void* group, int64_t n_in, const void* x, int64_t x_stride, int n_x,
                  float* y, int64_t y_stride) {
  ForEachTile(n_x, [&](auto rows, int i) {
    GroupQ4_KTile<decltype(rows)::kR>(static_cast<const uint8_t*>(group), n_in,
                                      RowPtr(x, x_stride, i), x_stride, y + i * y_stride, y_stride);
  });
}

// F16 groups, as the AVX-512 level computes them and with the same bits: per row, an even and an
// odd chain of FMAs over the elements, added at the end. Element k of the 16 rows is 32 bytes,
// read as two 8-row halves, each widened once; activation k of a row is broadcast once (from
// memory) and multiplied with both halves. Tiles of 3 rows: 12 accumulators, the two halves of one
// element and the broadcast take 15 of the 16 registers (tiles of 4 took a pass per half).
template <int R>
void GroupF16Tile(const uint16_t* group, int64_t n, const void* x, int64_t x_stride, float* y,
                  int64_t y_stride) {
  constexpr int64_t kPrefetchElements = kPrefetchBytes / (kGroupRows * 2);  // 16 KB
  const float* xr[R];
  for (int i = 0; i < R; ++i) xr[i] = reinterpret_cast<const float*>(RowPtr(x, x_stride, i));
  __m256 even[R][2], odd[R][2];
#pragma GCC unroll 4
  for (int i = 0; i < R; ++i) even[i][0] = even[i][1] = odd[i][0] = odd[i][1] = _mm256_setzero_ps();
  auto load = [&](int64_t k, int h) {
    return _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(group + k * kGroupRows + 8 * h)));
  };
  // Even and odd written out: with a lambda taking the accumulator array by reference, the
  // 2-row tile kept its accumulators on the stack.
  int64_t k = 0;
  for (; k + 2 <= n; k += 2) {
    _mm_prefetch(reinterpret_cast<const char*>(group + (k + kPrefetchElements) * kGroupRows),
                 _MM_HINT_T0);
    const __m256 w0 = load(k, 0);
    const __m256 w1 = load(k, 1);
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i) {
      const __m256 xk = _mm256_broadcast_ss(xr[i] + k);
      even[i][0] = _mm256_fmadd_ps(w0, xk, even[i][0]);
      even[i][1] = _mm256_fmadd_ps(w1, xk, even[i][1]);
    }
    const __m256 v0 = load(k + 1, 0);
    const __m256 v1 = load(k + 1, 1);
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i) {
      const __m256 xk = _mm256_broadcast_ss(xr[i] + k + 1);
      odd[i][0] = _mm256_fmadd_ps(v0, xk, odd[i][0]);
      odd[i][1] = _mm256_fmadd_ps(v1, xk, odd[i][1]);
    }
  }
  if (k < n) {
    const __m256 w0 = load(k, 0);
    const __m256 w1 = load(k, 1);
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i) {
      const __m256 xk = _mm256_broadcast_ss(xr[i] + k);
      even[i][0] = _mm256_fmadd_ps(w0, xk, even[i][0]);
      even[i][1] = _mm256_fmadd_ps(w1, xk, even[i][1]);
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < R; ++i) {
    for (int h = 0; h < 2; ++h) {
      _mm256_storeu_ps(y + i * y_stride + 8 * h, _mm256_add_ps(even[i][h], odd[i][h]));
    }
  }
}

void DotGroupF16(const void* group, int64_t n_in, const void* x, int64_t x_stride, int n_x,
                 float* y, int64_t y_stride) {
  auto tile = [&](auto rows, int i) {
    GroupF16Tile<decltype(rows)::kR>(static_cast<const uint16_t*>(group), n_in,
                                     RowPtr(x, x_stride, i), x_stride, y + i * y_stride, y_stride);
  };
  int i = 0;
  for (; i + 3 <= n_x; i += 3) tile(Rows<3>{}, i);
  if (n_x - i == 2) tile(Rows<2>{}, i);
  if (n_x - i == 1) tile(Rows<1>{}, i);
}

// round() (half away from zero) for |v| < 2^23, exactly as std::round, so this quantizer matches
// the scalar one bit for bit: truncate, then step away from zero if the dropped part is >= 0.5.
__m256 RoundHalfAway(__m256 v) {
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  const __m256 truncated = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 dropped = _mm256_andnot_ps(sign_mask, _mm256_sub_ps(v, truncated));  // exact
  const __m256 step = _mm256_or_ps(_mm256_and_ps(v, sign_mask), _mm256_set1_ps(1.0f));
  const __m256 away = _mm256_cmp_ps(dropped, _mm256_set1_ps(0.5f), _CMP_GE_OQ);
  return _mm256_add_ps(truncated, _mm256_and_ps(away, step));
}

// One block of 32 floats as signed quants in natural order (bytes of the result) and its scale d,
// as the scalar quantizer does bit for bit.
__m256i QuantizeBlock(const float* x, float* d_out) {
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  __m256 v[4];
  __m256 amax = _mm256_setzero_ps();
  for (int j = 0; j < 4; ++j) {
    v[j] = _mm256_loadu_ps(x + 8 * j);
    amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign_mask, v[j]));
  }
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  const float d = _mm_cvtss_f32(m) / 127.0f;
  // 0 where 1 / d overflows (a block of amax below about 4e-37): its quants are 0 then.
  const float id = d != 0.0f && 1.0f / d <= FLT_MAX ? 1.0f / d : 0.0f;
  *d_out = d;
  const __m256 vid = _mm256_set1_ps(id);
  __m256i q[4];
  for (int j = 0; j < 4; ++j) q[j] = _mm256_cvttps_epi32(RoundHalfAway(_mm256_mul_ps(v[j], vid)));
  // packs works within 128-bit lanes; the permute restores element order.
  const __m256i q16a = _mm256_packs_epi32(q[0], q[1]);
  const __m256i q16b = _mm256_packs_epi32(q[2], q[3]);
  return _mm256_permutevar8x32_epi32(_mm256_packs_epi16(q16a, q16b),
                                     _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

void QuantizeAct(const float* x, int64_t n_in, void* act_row) {
  auto* qs = static_cast<uint8_t*>(act_row);
  auto* scales = reinterpret_cast<float*>(qs + ActQ8ScaleOffset(n_in));
  auto* sums = reinterpret_cast<float*>(qs + ActQ8SumOffset(n_in));
  auto* half_sums = reinterpret_cast<float*>(qs + ActQ8HalfSumOffset(n_in));
  for (int64_t b = 0; b < n_in / kQBlock; ++b) {
    const __m256i q8 = QuantizeBlock(x + b * kQBlock, &scales[b]);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs + b * kQBlock), q8);
    StoreBlockSums(q8, scales[b], b, sums, half_sums);
  }
}

// The grouped format (kernel_set.h): the same quants and scales, and the negated exact block sums.
void QuantizeActGrouped(const float* x, int64_t n_in, void* act_row) {
  auto* qs = static_cast<uint8_t*>(act_row);
  auto* scales = reinterpret_cast<float*>(qs + ActQ8ScaleOffset(n_in));
  auto* neg_sums = reinterpret_cast<int32_t*>(qs + ActQ8SumOffset(n_in));
  for (int64_t b = 0; b < n_in / kQBlock; ++b) {
    const __m256i q8 = QuantizeBlock(x + b * kQBlock, &scales[b]);
    const HalfSums h = BlockHalfSums(q8);
    neg_sums[b] = -(h.lo + h.hi);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs + b * kQBlock), q8);
  }
}

// ---- Attention: 8 lanes, tails on the scalar path of the same order (lane sums, then Hsum).

// The sums of eight accumulators, each added exactly as Hsum adds one (lanes i and i + 4, then
// (0 + 2) + (1 + 3)), so a key's score has the same bits in a block of eight as alone.
__m256 Hsum8x8(const __m256 (&a)[8]) {
  auto halves = [&](int k) {  // lanes [k's lo + hi | k+1's lo + hi]
    return _mm256_add_ps(_mm256_permute2f128_ps(a[k], a[k + 1], 0x20),
                         _mm256_permute2f128_ps(a[k], a[k + 1], 0x31));
  };
  auto pairs = [](__m256 x, __m256 y) {  // [t0 t1 of x.lo, of y.lo | of x.hi, of y.hi]
    return _mm256_add_ps(_mm256_shuffle_ps(x, y, _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm256_shuffle_ps(x, y, _MM_SHUFFLE(3, 2, 3, 2)));
  };
  const __m256 c0 = pairs(halves(0), halves(2));  // keys 0, 2 | 1, 3
  const __m256 c1 = pairs(halves(4), halves(6));  // keys 4, 6 | 5, 7
  const __m256 sums = _mm256_add_ps(_mm256_shuffle_ps(c0, c1, _MM_SHUFFLE(2, 0, 2, 0)),
                                    _mm256_shuffle_ps(c0, c1, _MM_SHUFFLE(3, 1, 3, 1)));
  // sums holds keys 0 2 4 6 | 1 3 5 7.
  return _mm256_permutevar8x32_ps(sums, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// Eight elements of a float or half-float (f16 KV cache) row as floats; the f16 kernels widen
// each key and value and then compute exactly as the float ones (kernel_set.h).
inline __m256 Load8(const float* x) { return _mm256_loadu_ps(x); }
inline __m256 Load8(const uint16_t* x) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x)));
}
inline float Widen(float x) { return x; }
inline float Widen(uint16_t h) { return _cvtsh_ss(h); }

template <typename T>
void AttnScores(const float* q, const T* keys, int64_t stride, int32_t n, int32_t head_dim,
                float scale, float* scores) {
  const int32_t whole = head_dim / 8 * 8;
  int32_t j = 0;
  if (whole == head_dim) {
    // Eight keys at a time: one reduction for eight instead of eight (small heads spent most of
    // their time there).
    const __m256 vscale = _mm256_set1_ps(scale);
    for (; j + 8 <= n; j += 8) {
      __m256 acc[8];
      for (auto& a : acc) a = _mm256_setzero_ps();
      for (int32_t d = 0; d < whole; d += 8) {
        const __m256 qd = _mm256_loadu_ps(q + d);
        for (int r = 0; r < 8; ++r)
          acc[r] = _mm256_fmadd_ps(qd, Load8(keys + (j + r) * stride + d), acc[r]);
      }
      _mm256_storeu_ps(scores + j, _mm256_mul_ps(Hsum8x8(acc), vscale));
    }
  }
  for (; j < n; ++j) {
    const T* k = keys + j * stride;
    __m256 acc = _mm256_setzero_ps();
    for (int32_t d = 0; d < whole; d += 8) {
      acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), Load8(k + d), acc);
    }
    float sum = Hsum(acc);
    for (int32_t d = whole; d < head_dim; ++d) sum += q[d] * Widen(k[d]);
    scores[j] = sum * scale;
  }
}

// exp(x) for x <= 0: x = n ln2 + r with |r| <= ln2 / 2, a degree-6 polynomial for exp(r) (relative
// error about 2e-7), times 2^n built in the exponent field. Below -87.3 the result is 0.
__m256 ExpNonPositive(__m256 x) {
  const __m256 too_small = _mm256_cmp_ps(x, _mm256_set1_ps(-87.3f), _CMP_LT_OQ);
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.3f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145752f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.42860677e-6f), r);
  __m256 p = _mm256_set1_ps(1.0f / 720);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i bits =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_andnot_ps(too_small, _mm256_mul_ps(p, _mm256_castsi256_ps(bits)));
}

float SoftmaxExp(float* x, int32_t n) {
  const int32_t whole = n / 8 * 8;
  __m256 vmax = _mm256_set1_ps(x[0]);
  for (int32_t j = 0; j < whole; j += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(x + j));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, vmax);
  float max = x[0];
  for (float v : lanes) max = std::max(max, v);
  for (int32_t j = whole; j < n; ++j) max = std::max(max, x[j]);
  const __m256 vm = _mm256_set1_ps(max);
  __m256 acc = _mm256_setzero_ps();
  for (int32_t j = 0; j < whole; j += 8) {
    const __m256 e = ExpNonPositive(_mm256_sub_ps(_mm256_loadu_ps(x + j), vm));
    _mm256_storeu_ps(x + j, e);
    acc = _mm256_add_ps(acc, e);
  }
  if (whole < n) {
    // Lanes past n hold -inf, whose exponential is exactly 0, so they add nothing.
    alignas(32) float tail[8];
    for (int32_t j = 0; j < 8; ++j) tail[j] = whole + j < n ? x[whole + j] - max : -INFINITY;
    const __m256 e = ExpNonPositive(_mm256_load_ps(tail));
    _mm256_store_ps(tail, e);
    for (int32_t j = whole; j < n; ++j) x[j] = tail[j - whole];
    acc = _mm256_add_ps(acc, e);
  }
  return Hsum(acc);
}

// Up to 8 chunks of 8 values at once, key after key (independent FMA chains; each element still
// adds p[j] v[j] in key order, as one chunk alone would).
template <int C, typename T>
void WeightedSumChunks(const float* p, const T* values, int64_t stride, int32_t n, int32_t d0,
                       float* out) {
  __m256 acc[C];
  for (int c = 0; c < C; ++c) acc[c] = _mm256_loadu_ps(out + d0 + 8 * c);
  for (int32_t j = 0; j < n; ++j) {
    const __m256 pj = _mm256_set1_ps(p[j]);
    const T* v = values + j * stride + d0;
    for (int c = 0; c < C; ++c) acc[c] = _mm256_fmadd_ps(pj, Load8(v + 8 * c), acc[c]);
  }
  for (int c = 0; c < C; ++c) _mm256_storeu_ps(out + d0 + 8 * c, acc[c]);
}

template <typename T>
void AttnWeightedSum(const float* p, const T* values, int64_t stride, int32_t n, int32_t head_dim,
                     float* out) {
  const int32_t whole = head_dim / 8 * 8;
  int32_t d0 = 0;
  for (; d0 + 64 <= whole; d0 += 64) WeightedSumChunks<8>(p, values, stride, n, d0, out);
  for (; d0 + 32 <= whole; d0 += 32) WeightedSumChunks<4>(p, values, stride, n, d0, out);
  for (; d0 + 16 <= whole; d0 += 16) WeightedSumChunks<2>(p, values, stride, n, d0, out);
  for (; d0 < whole; d0 += 8) WeightedSumChunks<1>(p, values, stride, n, d0, out);
  for (int32_t d = whole; d < head_dim; ++d) {
    float acc = out[d];
    for (int32_t j = 0; j < n; ++j) acc = std::fma(p[j], Widen(values[j * stride + d]), acc);
    out[d] = acc;
  }
}

// Eight at a time by F16C (round to nearest even, as Fp32ToFp16), the tail through a padded block.
void ToF16(const float* x, uint16_t* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  }
  if (i < n) {
    alignas(32) float tail[8] = {};
    alignas(16) uint16_t halves[8];
    for (int64_t t = i; t < n; ++t) tail[t - i] = x[t];
    _mm_store_si128(reinterpret_cast<__m128i*>(halves),
                    _mm256_cvtps_ph(_mm256_load_ps(tail), _MM_FROUND_TO_NEAREST_INT));
    for (int64_t t = i; t < n; ++t) out[t] = halves[t - i];
  }
}

// silu(g) = 1 / (1 + exp(-g)) for g >= 0 and exp(g) / (1 + exp(g)) otherwise: one exponential of
// -|g| (never overflows) serves both.
__m256 SiluMul8(__m256 g, __m256 u) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 e = ExpNonPositive(_mm256_or_ps(g, sign));  // exp(-|g|)
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 numerator = _mm256_blendv_ps(one, e, g);  // sign bit of g set: e
  return _mm256_mul_ps(_mm256_mul_ps(g, _mm256_div_ps(numerator, _mm256_add_ps(one, e))), u);
}

void SiluMul(const float* gate, const float* up, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, SiluMul8(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
  if (i < n) {
    alignas(32) float g[8] = {}, u[8] = {};
    for (int64_t j = i; j < n; ++j) {
      g[j - i] = gate[j];
      u[j - i] = up[j];
    }
    _mm256_store_ps(g, SiluMul8(_mm256_load_ps(g), _mm256_load_ps(u)));
    for (int64_t j = i; j < n; ++j) out[j] = g[j - i];
  }
}

// gelu(g) = g sigmoid(y), y = 2 sqrt(2 / pi) (g + 0.044715 g^3), with the sigmoid as in SiluMul8.
__m256 GeluMul8(__m256 g, __m256 u) {
  const __m256 g2 = _mm256_mul_ps(g, g);
  const __m256 y = _mm256_mul_ps(_mm256_mul_ps(g, _mm256_set1_ps(1.5957691216f)),
                                 _mm256_fmadd_ps(g2, _mm256_set1_ps(0.044715f), _mm256_set1_ps(1)));
  const __m256 e = ExpNonPositive(_mm256_or_ps(y, _mm256_set1_ps(-0.0f)));  // exp(-|y|)
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 numerator = _mm256_blendv_ps(one, e, y);  // sign bit of y set: e
  return _mm256_mul_ps(_mm256_mul_ps(g, _mm256_div_ps(numerator, _mm256_add_ps(one, e))), u);
}

void GeluMul(const float* gate, const float* up, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, GeluMul8(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
  if (i < n) {
    alignas(32) float g[8] = {}, u[8] = {};
    for (int64_t j = i; j < n; ++j) {
      g[j - i] = gate[j];
      u[j - i] = up[j];
    }
    _mm256_store_ps(g, GeluMul8(_mm256_load_ps(g), _mm256_load_ps(u)));
    for (int64_t j = i; j < n; ++j) out[j] = g[j - i];
  }
}

// Two chains of four doubles over eight floats at a time, then the tail in order.
double SumSquares(const float* x, int64_t n) {
  __m256d a = _mm256_setzero_pd(), b = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256d lo = _mm256_cvtps_pd(_mm_loadu_ps(x + i));
    const __m256d hi = _mm256_cvtps_pd(_mm_loadu_ps(x + i + 4));
    a = _mm256_fmadd_pd(lo, lo, a);
    b = _mm256_fmadd_pd(hi, hi, b);
  }
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, _mm256_add_pd(a, b));
  double sum = (lanes[0] + lanes[2]) + (lanes[1] + lanes[3]);
  for (; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  return sum;
}

// Eight at a time: a compare mask, and the set bits' indices only where a lane passed.
int32_t IndicesAbove(const float* x, int32_t n, float threshold, int32_t* indices) {
  const __m256 t = _mm256_set1_ps(threshold);
  int32_t count = 0, i = 0;
  for (; i + 8 <= n; i += 8) {
    unsigned mask = static_cast<unsigned>(
        _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), t, _CMP_GT_OQ)));
    while (mask != 0) {
      indices[count++] = i + __builtin_ctz(mask);
      mask &= mask - 1;
    }
  }
  for (; i < n; ++i) {
    if (x[i] > threshold) indices[count++] = i;
  }
  return count;
}

float SumExp(const float* x, int32_t n, float max) {
  const __m256 vm = _mm256_set1_ps(max);
  __m256 acc = _mm256_setzero_ps();
  int32_t j = 0;
  for (; j + 8 <= n; j += 8)
    acc = _mm256_add_ps(acc, ExpNonPositive(_mm256_sub_ps(_mm256_loadu_ps(x + j), vm)));
  if (j < n) {
    // Lanes past n hold -inf, whose exponential is exactly 0.
    alignas(32) float tail[8];
    for (int32_t i = 0; i < 8; ++i) tail[i] = j + i < n ? x[j + i] - max : -INFINITY;
    acc = _mm256_add_ps(acc, ExpNonPositive(_mm256_load_ps(tail)));
  }
  return Hsum(acc);
}

}  // namespace

extern const KernelSet kAvx2Kernels = {
    .level = KernelLevel::kAvx2,
    .name = "avx2",
    .act_q8_unsigned = false,
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
    .dot_q6_k = &DotOffsetScale<Q6_KQuants>,
    .dot_iq4_xs = &DotIQ4_XS,
    .dot_q2_k = &DotQ2_K,
    .dot_q3_k = &DotOffsetScale<Q3_KQuants>,
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
