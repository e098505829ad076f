// The compute kernels of one instruction-set level, chosen once per process.
//
// Every level implements the same operations: a scalar reference (always present), AVX2+FMA+F16C
// and AVX-512 (F/BW/VL + VNNI). The best level the CPU supports is chosen on first use; the
// environment variable GROVE_KERNELS=scalar|avx2|avx512 caps it (for tests and comparisons), it
// never raises it. Results of different levels may differ by rounding; within one process the level
// never changes, and every kernel's accumulation order for one output depends only on the reduction
// length, not on how many rows are computed together (the batch-invariance contract, see
// ops/matmul.h).
//
// This header holds declarations only; it is included by the SIMD files (see CMakeLists.txt).
#pragma once

#include <cstdint>

#include "quant/packed.h"  // kGroupRows

namespace grove {

enum class KernelLevel : int { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

// Most activation rows a row kernel takes in one call. Eight rows reuse each weight block decoded
// in registers eight times, enough to turn the batched matmul from memory-bound to compute-bound,
// and they fit in the 32 AVX-512 registers with their accumulators.
inline constexpr int kMaxTileRows = 8;

// Activations quantized for integer dot products with the block types' weights
// (llama.cpp's vec_dot_type): blocks of 32 int8 values with one float scale each (a float, not
// fp16: it is internal, and the extra precision is free). One row occupies ActQ8RowBytes(n_in)
// bytes, 64-byte aligned:
//   [0, ActQ8ScaleOffset(n_in))   the quants, one byte per element, in a level-specific order and
//                                 encoding (the AVX-512 level interleaves pairs of blocks and
//                                 stores q + 128, see act_q8_unsigned)
//   [ActQ8ScaleOffset(n_in), ...) the scales d_b, one float per block
//   [ActQ8SumOffset(n_in), ...)   per block d_b * sum_j q_bj (a float multiply of an exact
//                                 integer sum), for the min terms of Q4_1/Q5_1/Q4_K/Q5_K: sum_j (s
//                                 q_j - m) x_j needs sum_j x_j, and it depends on the activations
//                                 only
//   [ActQ8HalfSumOffset(n_in), ...) the same per half block (16 elements: d_b times the exact sum
//                                 of its 16 quants, two floats per block), for Q2_K's mins, which
//                                 change every 16 elements
// n_in must be a multiple of 32. `static`: each file gets its own copy, so the SIMD files (built
// with -mavx512*) inline them into their loops, and no copy compiled for AVX-512 can become the one
// a scalar file calls (an ordinary inline function could; see CMakeLists.txt).
static constexpr int64_t ActQ8ScaleOffset(int64_t n_in) { return (n_in + 63) / 64 * 64; }
static constexpr int64_t ActQ8SumOffset(int64_t n_in) {
  return ActQ8ScaleOffset(n_in) + n_in / 32 * static_cast<int64_t>(sizeof(float));
}
static constexpr int64_t ActQ8HalfSumOffset(int64_t n_in) {
  return ActQ8SumOffset(n_in) + n_in / 32 * static_cast<int64_t>(sizeof(float));
}
// Padded to an odd number of cache lines so that the rows of a tile do not compete for one set.
int64_t ActQ8RowBytes(int64_t n_in);

// Stride of float activation rows copied into matmul scratch: n_in floats, padded like ActQ8 rows.
int64_t FloatRowBytes(int64_t n_in);

// y[i * y_stride] = dot(weight row, activation row i) for i in [0, n_x), 1 <= n_x <= kMaxTileRows.
// w_row: one weight row of n_in elements in the kernel's type. x: activation row 0; row i starts
// x_stride bytes after row i - 1 (float rows for f32/f16/bf16 weights, ActQ8 rows for the block
// types).
using RowKernelFn = void (*)(const void* w_row, int64_t n_in, const void* x, int64_t x_stride,
                             int n_x, float* y, int64_t y_stride);

// Quantizes one float row of n_in elements (a multiple of 32) into an ActQ8 row.
using QuantizeActFn = void (*)(const float* x, int64_t n_in, void* act_row);

// y[i * y_stride + j] = dot(weight row j of the group, activation row i) for j in [0, kGroupRows)
// and i in [0, n_x), 1 <= n_x <= kMaxTileRows. group: one row group of n_in elements in the
// kernel's packed type; x: ActQ8 rows in the grouped format (see quantize_act_grouped), or float
// rows for float weights.
using GroupKernelFn = void (*)(const void* group, int64_t n_in, const void* x, int64_t x_stride,
                               int n_x, float* y, int64_t y_stride);

// Attention of one query head (ops/attention.cc) over n keys or values that lie stride floats
// apart. Each output's reduction order depends only on head_dim or n, never on how the keys are
// split between calls: that keeps a token's result identical whether its ancestors are in the
// committed prefix or in the same tree batch (contract 2).
//   scores[j] = scale * dot(q, keys + j * stride), j in [0, n)
using AttnScoresFn = void (*)(const float* q, const float* keys, int64_t stride, int32_t n,
                              int32_t head_dim, float scale, float* scores);
//   the same over keys kept as IEEE half floats (an f16 KV cache, model/kv_cache.h): each key is
//   widened to float and then scored exactly as attn_scores scores a float key, so the result is
//   attn_scores' bits on the widened keys
using AttnScoresF16Fn = void (*)(const float* q, const uint16_t* keys, int64_t stride, int32_t n,
                                 int32_t head_dim, float scale, float* scores);
//   x[j] = exp(x[j] - max_j x[j]) for j in [0, n), n >= 1; returns their sum
using SoftmaxExpFn = float (*)(float* x, int32_t n);
//   sum of exp(x[j] - max) for j in [0, n), x unchanged (max >= every x[j]: a softmax's
//   denominator when only a few of its probabilities are wanted)
using SumExpFn = float (*)(const float* x, int32_t n, float max);
//   out[d] += p[j] * values[j * stride + d], j = 0, 1, ... in order for each d
using AttnWeightedSumFn = void (*)(const float* p, const float* values, int64_t stride, int32_t n,
                                   int32_t head_dim, float* out);
//   the same over half-float values, with attn_weighted_sum's bits on the widened values
using AttnWeightedSumF16Fn = void (*)(const float* p, const uint16_t* values, int64_t stride,
                                      int32_t n, int32_t head_dim, float* out);
//   out[i] = x[i] as an IEEE half float, rounded to nearest even (quant/half.h's Fp32ToFp16; NaNs
//   stay NaNs): the rows an f16 KV cache stores
using ToF16Fn = void (*)(const float* x, uint16_t* out, int64_t n);

// Element-wise and row-wise ops of the forward pass; like the others, each result depends only on
// its own inputs and n, never on how a batch is split.
//   out[i] = act(gate[i]) * up[i], out may be gate: silu(g) = g / (1 + exp(-g)), or GELU's tanh
//   approximation computed as gelu(g) = g / (1 + exp(-2 sqrt(2 / pi) (g + 0.044715 g^3)))
//   (the same function: (1 + tanh(y)) / 2 = 1 / (1 + exp(-2y)))
using GatedActFn = void (*)(const float* gate, const float* up, float* out, int64_t n);
//   sum of x[i]^2 accumulated in double (RMSNorm), in an order that depends only on n
using SumSquaresFn = double (*)(const float* x, int64_t n);
//   writes the indices i (increasing) with x[i] > threshold to indices, returns how many: the scan
//   behind top-k selection over a vocabulary row (sample/sampler.h, TopTokens)
using IndicesAboveFn = int32_t (*)(const float* x, int32_t n, float threshold, int32_t* indices);

// Raised whenever a change to the kernels moves their speed enough to move a verify curve: the
// curves `auto` keeps between runs (speculate/verify_cost_cache.h) are keyed by it, so a grove
// with faster tree kernels measures again instead of planning from the old times for a month.
// 2: the group kernels fetch weights 16 KB ahead (t(8) 10-20% lower); Q4_K's min term 8 blocks
// at a time (pp and t(8) 5-8%).
inline constexpr int kKernelsRevision = 2;

struct KernelSet {
  KernelLevel level;
  const char* name;  // "scalar", "avx2", "avx512_vnni"
  // True if quantize_act stores q + 128 (unsigned bytes for vpdpbusd) instead of q, with the 4-byte
  // groups of each pair of blocks interleaved (a0 b0 a1 b1 ... a7 b7).
  bool act_q8_unsigned;
  QuantizeActFn quantize_act;
  RowKernelFn dot_f32;
  RowKernelFn dot_f16;
  RowKernelFn dot_bf16;
  RowKernelFn dot_q8_0;    // weights BlockQ8_0, activations ActQ8
  RowKernelFn dot_q4_0;    // weights BlockQ4_0, activations ActQ8
  RowKernelFn dot_q5_0;    // weights BlockQ5_0, activations ActQ8
  RowKernelFn dot_iq4_nl;  // weights BlockIQ4_NL, activations ActQ8
  RowKernelFn dot_mxfp4;   // weights BlockMXFP4, activations ActQ8
  RowKernelFn dot_q4_1;    // weights BlockQ4_1, activations ActQ8
  RowKernelFn dot_q5_1;    // weights BlockQ5_1, activations ActQ8
  RowKernelFn dot_q4_k;    // weights BlockQ4_K, activations ActQ8; n_in a multiple of 256
  RowKernelFn dot_q5_k;    // weights BlockQ5_K, activations ActQ8; n_in a multiple of 256
  RowKernelFn dot_q6_k;    // weights BlockQ6_K, activations ActQ8; n_in a multiple of 256
  RowKernelFn dot_iq4_xs;  // weights BlockIQ4_XS, activations ActQ8; n_in a multiple of 256
  RowKernelFn dot_q2_k;    // weights BlockQ2_K, activations ActQ8; n_in a multiple of 256
  RowKernelFn dot_q3_k;    // weights BlockQ3_K, activations ActQ8; n_in a multiple of 256

  // Row-group kernels, or nullptr where this level has none (the weights then stay in rows). A
  // model packs the matrices of a type that has one at load (quant/packed.h).
  // Their activations are ActQ8 rows in the grouped format: signed quants in natural order, the
  // float scales, and at ActQ8SumOffset the negated exact block sums -sum_j q_bj as int32.
  QuantizeActFn quantize_act_grouped;
  GroupKernelFn group_q8_0;
  GroupKernelFn group_q4_0;
  GroupKernelFn group_iq4_nl;
  GroupKernelFn group_q4_k;  // n_in a multiple of 256
  GroupKernelFn group_f16;   // float activation rows, as dot_f16

  AttnScoresFn attn_scores;
  SoftmaxExpFn softmax_exp;
  AttnWeightedSumFn attn_weighted_sum;
  AttnScoresF16Fn attn_scores_f16;
  AttnWeightedSumF16Fn attn_weighted_sum_f16;
  ToF16Fn to_f16;

  GatedActFn silu_mul;
  GatedActFn gelu_mul;
  SumSquaresFn sum_squares;
  IndicesAboveFn indices_above;
  SumExpFn sum_exp;
};

// The kernels this process uses: the best level the CPU supports, capped by GROVE_KERNELS. Chosen
// on the first call (thread-safe) and fixed from then on. An unknown GROVE_KERNELS value is ignored
// with a warning through the log callback.
const KernelSet& ActiveKernels();

// The kernels of one level, or nullptr if this CPU cannot run them (tests compare levels with it).
const KernelSet* KernelsForLevel(KernelLevel level);

// The best level this CPU supports, ignoring GROVE_KERNELS.
KernelLevel BestKernelLevel();

const char* KernelLevelName(KernelLevel level);  // "scalar", "avx2", "avx512"

}  // namespace grove
