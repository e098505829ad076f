// AVX-512 kernels: F, BW, VL and VNNI (Ice Lake, Sapphire Rapids, Zen 4, Zen 5).
//
// Compiled with -mavx512f -mavx512bw -mavx512vl -mavx512vnni (plus AVX2/FMA/F16C) and
// -ffp-contract=off (CMakeLists.txt). Everything here lives in an anonymous namespace and uses
// intrinsics only, so no inline function of a shared header is compiled with these flags.
//
// Batch invariance: a tile of R activation rows runs, for every row, exactly the instruction sequence
// a tile of one row runs; accumulators are per row, the lane assignment and the final horizontal sum
// depend only on n_in. Hence any split of a batch into tiles gives bit-identical outputs.
// GCC 12 warns that the _mm*_undefined_*() values inside its own intrinsics may be used
// uninitialized (GCC bug 105593, fixed in 13); the warning is about the header, not this code.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>

#include "kernels/kernel_tables.h"
#include "quant/blocks.h"

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
    case 7: tile(Rows<7>{}, i); break;
    case 6: tile(Rows<6>{}, i); break;
    case 5: tile(Rows<5>{}, i); break;
    case 4: tile(Rows<4>{}, i); break;
    case 3: tile(Rows<3>{}, i); break;
    case 2: tile(Rows<2>{}, i); break;
    case 1: tile(Rows<1>{}, i); break;
    default: break;
  }
}

// ---- Float weights (f32, f16, bf16) times float activations --------------------------------------
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

// ---- Q8_0 / Q4_0 weights times ActQ8 activations ---------------------------------------------------
//
// This level's ActQ8 rows hold unsigned bytes u = q + 128, because vpdpbusd multiplies unsigned by
// signed bytes. sum(u * w) = sum(q * w) + 128 * sum(w); the correction -128 * sum(w) depends on the
// weights only, so it is computed once per weight block (one vpdpbusd with a vector of 128s) and used
// as the starting value of each row's vpdpbusd. Scales are stored per pair of blocks as 16 floats,
// d_even in lanes 0-7 and d_odd in lanes 8-15, matching the lanes each block's sums occupy.
//
// Per pair of blocks (64 weights) each row costs: load, vpdpbusd, convert, multiply, FMA.

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
    const __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(q), _mm_srli_epi16(q, 4), 1);
    return _mm256_sub_epi8(_mm256_and_si256(v, _mm256_set1_epi8(0x0f)), _mm256_set1_epi8(8));
  }
};

// fp16 scales of two blocks spread to [d0 x 8, d1 x 8].
__m512 PairScales(uint16_t d0, uint16_t d1) {
  const __m128 both = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(d0 | (static_cast<uint32_t>(d1) << 16))));
  const __m512i spread = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  return _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(both));
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

// One step over a pair of blocks (or a last single block with zeros in the upper half).
template <int R, bool kSingle>
inline void QuantStep(__m512i wq, __m512 wd, const QuantRows<R>& rows, int64_t b, __m512* acc) {
  const __m512i offset = NegatedOffsetSums(wq);
  for (int i = 0; i < R; ++i) {
    const uint8_t* p = rows.q[i] + b * kQBlock;
    const __m512i xq = kSingle
        ? _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)))
        : _mm512_loadu_si512(p);
    const __m512i sums = _mm512_dpbusd_epi32(offset, xq, wq);
    const __m512 xd = _mm512_loadu_ps(rows.scales[i] + b / 2 * 16);
    acc[i] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(sums), xd), wd, acc[i]);
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
    const __m512i wq = _mm512_inserti64x4(_mm512_castsi256_si512(W::Load(w[b])), W::Load(w[b + 1]), 1);
    QuantStep<R, false>(wq, PairScales(w[b].d, w[b + 1].d), rows, b, acc);
  }
  if (b < n_blocks) {
    QuantStep<R, true>(_mm512_zextsi256_si512(W::Load(w[b])), PairScales(w[b].d, 0), rows, b, acc);
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

// round() (half away from zero) for |v| < 2^23, exactly as std::round, so this quantizer matches
// the scalar one bit for bit: truncate, then step away from zero if the dropped part is >= 0.5.
__m512 RoundHalfAway(__m512 v) {
  const __m512 truncated = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m512 dropped = _mm512_abs_ps(_mm512_sub_ps(v, truncated));  // exact
  const __m512 step = _mm512_castsi512_ps(_mm512_or_si512(
      _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(INT32_MIN)),
      _mm512_castps_si512(_mm512_set1_ps(1.0f))));
  const __mmask16 away = _mm512_cmp_ps_mask(dropped, _mm512_set1_ps(0.5f), _CMP_GE_OQ);
  return _mm512_mask_add_ps(truncated, away, truncated, step);
}

void QuantizeAct(const float* x, int64_t n_in, void* act_row) {
  auto* qs = static_cast<uint8_t*>(act_row);
  auto* scales = reinterpret_cast<float*>(qs + ActQ8ScaleOffset(n_in));
  const int64_t n_blocks = n_in / kQBlock;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const __m512 v0 = _mm512_loadu_ps(x + b * kQBlock);
    const __m512 v1 = _mm512_loadu_ps(x + b * kQBlock + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const __m512 vid = _mm512_set1_ps(id);
    const __m128i q0 = _mm512_cvtsepi32_epi8(
        _mm512_cvttps_epi32(RoundHalfAway(_mm512_mul_ps(v0, vid))));
    const __m128i q1 = _mm512_cvtsepi32_epi8(
        _mm512_cvttps_epi32(RoundHalfAway(_mm512_mul_ps(v1, vid))));
    const __m256i q = _mm256_inserti128_si256(_mm256_castsi128_si256(q0), q1, 1);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs + b * kQBlock),
                        _mm256_xor_si256(q, _mm256_set1_epi8(char{-128})));  // q + 128
    _mm256_storeu_ps(scales + b / 2 * 16 + b % 2 * 8, _mm256_set1_ps(d));
  }
  // The upper half of a last unpaired block's scales must read as zero (its sums are zero too).
  if (n_blocks % 2 == 1) _mm256_storeu_ps(scales + n_blocks / 2 * 16 + 8, _mm256_setzero_ps());
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
};

}  // namespace grove
