// The forward pass's kernels (kernels.h). Each keeps the batch-invariance contract in the
// simplest form found to be fast enough so far; docs/cuda.md says what was measured and what is
// left to tune.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "base/error.h"
#include "cuda/device.h"
#include "cuda/kernels.h"

namespace grove::cuda {
namespace {

cudaStream_t S() { return static_cast<cudaStream_t>(Stream()); }

constexpr int kWarp = 32;

int64_t Blocks(int64_t count, int threads) { return (count + threads - 1) / threads; }

__device__ inline float WarpSum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over a block of blockDim.x threads (a multiple of 32, at most 1024), the same in every
// thread. Fixed order: each warp's butterfly, then the warps' sums in warp order.
__device__ inline float BlockSum(float v) {
  __shared__ float sums[32];
  __syncthreads();  // sums may still be read by a previous call
  v = WarpSum(v);
  const int warp = threadIdx.x / kWarp;
  if (threadIdx.x % kWarp == 0) sums[warp] = v;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < static_cast<int>(blockDim.x / kWarp); ++w) total += sums[w];
  return total;
}

// ---- matrix products ------------------------------------------------------------------------
//
// The activations are first rounded to the tensor cores' 16-bit input (ToHalfKernel). A warp then
// computes kNt groups of 8 outputs for 16 * kTiles rows with mma.sync m16n8k16 (f32
// accumulators) over its share of the reduction: the chunks ChunkOf(q, kw) for q = 0, 1, ..., in
// increasing order. A chunk is 64 bytes of each weight row (32 16-bit elements, or 64 Q8 bytes);
// thread t of quad g loads 16 of them (row g, bytes 16 t ..). Which element of a chunk enters the
// tensor core at which fragment position is a fixed permutation that the activations follow too
// (MatMulKernel), the same for every row. The kMatMulSplitK warps' partial sums of an output are
// added in warp order through shared memory. Rows beyond n read zeros and are not stored; row
// groups are spread over the grid's y blocks, which read the same weights (mostly from L2).

__device__ inline uint32_t PackBf16(float a, float b) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(a, b);  // a in the low half
  return *reinterpret_cast<const uint32_t*>(&v);
}

__device__ inline uint32_t PackF16(float a, float b) {
  const __half2 v = __floats2half2_rn(a, b);
  return *reinterpret_cast<const uint32_t*>(&v);
}

__device__ inline uint32_t Word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// Two signed bytes of w (bytes `first` and first + 1) as a bf16 pair: exact (|q| <= 128). No
// integer-to-float conversion (a quarter-rate instruction): the byte, biased to q + 128, becomes
// the low mantissa bits of 2^23 (0x4B000000), and 2^23 + 128 is subtracted.
__device__ inline uint32_t Q8PairBf16(uint32_t w, int first) {
  const uint32_t biased = w ^ 0x80808080u;
  const float a =
      __int_as_float(static_cast<int>(__byte_perm(biased, 0x4B000000u, 0x7440u | first))) -
      8388736.0f;
  const float b =
      __int_as_float(static_cast<int>(__byte_perm(biased, 0x4B000000u, 0x7440u | (first + 1)))) -
      8388736.0f;
  return PackBf16(a, b);
}

__device__ inline void MmaBf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ inline void MmaF16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Four 16-bit activations of row r from element k, as two fragment registers (zeros past the
// batch; the rows are padded to n_in_padded with zeros by ToHalfKernel).
__device__ inline uint2 LoadA(const uint16_t* __restrict__ xh, int r, int n, int stride, int k) {
  if (r < n) return *reinterpret_cast<const uint2*>(xh + static_cast<int64_t>(r) * stride + k);
  return make_uint2(0u, 0u);
}

// The activations of a product rounded once to the tensor cores' input type (bf16, or fp16 for
// F16 weights), rows padded with zeros to n_in_padded: one pass instead of a conversion in every
// warp that reads them.
template <bool kF16>
__global__ void ToHalfKernel(const float* __restrict__ x, int n, int x_stride, int n_in,
                             int n_in_padded, uint16_t* __restrict__ out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t pairs = static_cast<int64_t>(n) * n_in_padded / 2;
  if (i >= pairs) return;
  const int r = static_cast<int>(2 * i / n_in_padded);
  const int k = static_cast<int>(2 * i % n_in_padded);
  const float a = k < n_in ? x[static_cast<int64_t>(r) * x_stride + k] : 0.0f;
  const float b = k + 1 < n_in ? x[static_cast<int64_t>(r) * x_stride + k + 1] : 0.0f;
  reinterpret_cast<uint32_t*>(out)[i] = kF16 ? PackF16(a, b) : PackBf16(a, b);
}

constexpr int kWarpsOut = 2;  // warps of a block along the outputs
// The reduction's chunks are dealt to the kMatMulSplitK warps in turns of kChunkTurn consecutive
// chunks: the q-th chunk of warp kw is ChunkOf(q, kw), whatever the tiling (this is what keeps
// every tiling's bits the same).
constexpr int kChunkTurn = 4;

__device__ inline int ChunkOf(int q, int kw) {
  return (q / kChunkTurn) * (kMatMulSplitK * kChunkTurn) + kw * kChunkTurn + q % kChunkTurn;
}

// A warp's chunks q0 .. q0 + kU - 1 of one weight row, its thread's 16 bytes of each (zeros past
// the row).
template <int kU>
__device__ inline void LoadChunks(const uint8_t* __restrict__ w_row, int q0, int kw, int n_chunks,
                                  uint4 (&out)[kU]) {
#pragma unroll
  for (int u = 0; u < kU; ++u) {
    const int c = ChunkOf(q0 + u, kw);
    out[u] = c < n_chunks ? *reinterpret_cast<const uint4*>(w_row + static_cast<int64_t>(c) * 64)
                          : make_uint4(0, 0, 0, 0);
  }
}

// A warp computes kNt groups of 8 outputs for 16 * kTiles rows, each activation fragment used for
// all kNt groups; kU chunks of each group's weights are loaded one round ahead of the products.
// Every (kTiles, kNt, kU) gives the same bits: they change which rows and outputs a warp holds,
// never the order in which an output's sum is accumulated.
template <MatrixFormat F, int kTiles, int kNt, int kU>
__global__ void __launch_bounds__(kWarp* kWarpsOut* kMatMulSplitK)
    MatMulKernel(const uint8_t* __restrict__ w, const __half* __restrict__ scales,
                 const uint16_t* __restrict__ xh, int n, int n_in_padded, float* __restrict__ y,
                 int y_stride, int n_out) {
  constexpr bool kQ8 = F == MatrixFormat::kQ8;
  constexpr int kChunk = kQ8 ? 64 : 32;  // elements per 64-byte chunk of a row
  constexpr int kSteps = kChunk / 16;    // tensor-core steps per chunk
  const int warp = static_cast<int>(threadIdx.x) / kWarp;
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int kw = warp % kMatMulSplitK;
  const int ow = warp / kMatMulSplitK;
  const int g = lane / 4;
  const int t = lane % 4;
  const int o_base = (static_cast<int>(blockIdx.x) * kWarpsOut + ow) * 8 * kNt;
  const int64_t row_bytes = kQ8 ? n_in_padded : 2 * static_cast<int64_t>(n_in_padded);
  const uint8_t* w_row[kNt];
#pragma unroll
  for (int j = 0; j < kNt; ++j)
    w_row[j] = w + static_cast<int64_t>(o_base + 8 * j + g) * row_bytes + 16 * t;
  const int n_chunks = n_in_padded / kChunk;
  const int n_blocks32 = n_in_padded / 32;
  __shared__ float partial[kWarpsOut][kMatMulSplitK - 1][kTiles * kNt * 4 * kWarp];

  // Row groups are spread over the grid's y blocks (a tree's rows over more of the GPU; each
  // block reads the same weights, mostly from L2). A row's sums do not depend on its group.
  for (int r0 = static_cast<int>(blockIdx.y) * 16 * kTiles; r0 < n;
       r0 += static_cast<int>(gridDim.y) * 16 * kTiles) {
    float acc[kTiles][kNt][4];
#pragma unroll
    for (int tile = 0; tile < kTiles; ++tile) {
#pragma unroll
      for (int j = 0; j < kNt; ++j)
        acc[tile][j][0] = acc[tile][j][1] = acc[tile][j][2] = acc[tile][j][3] = 0.0f;
    }
    uint4 wf[kNt][kU];
#pragma unroll
    for (int j = 0; j < kNt; ++j) LoadChunks<kU>(w_row[j], 0, kw, n_chunks, wf[j]);
    for (int q0 = 0; ChunkOf(q0, kw) < n_chunks; q0 += kU) {
      uint4 wn[kNt][kU];
#pragma unroll
      for (int j = 0; j < kNt; ++j) LoadChunks<kU>(w_row[j], q0 + kU, kw, n_chunks, wn[j]);
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int c = ChunkOf(q0 + u, kw);
        if (c >= n_chunks) break;
        float s[kNt][2][2];  // Q8: [group][block of the chunk][column]
        if constexpr (kQ8) {
#pragma unroll
          for (int j = 0; j < kNt; ++j) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
#pragma unroll
              for (int e = 0; e < 2; ++e) {
                s[j][h][e] = __half2float(
                    scales[static_cast<int64_t>(o_base + 8 * j + 2 * t + e) * n_blocks32 + 2 * c +
                           h]);
              }
            }
          }
        }
#pragma unroll
        for (int tile = 0; tile < kTiles; ++tile) {
          if (r0 + 16 * tile >= n) continue;
          const int ra = r0 + 16 * tile + g;
          float part[kNt][4];
#pragma unroll
          for (int j = 0; j < kNt; ++j) part[j][0] = part[j][1] = part[j][2] = part[j][3] = 0.0f;
#pragma unroll
          for (int m = 0; m < kSteps; ++m) {
            // Fragment position (2t, 2t + 1, 2t + 8, 2t + 9) of step m holds elements koff .. + 3.
            const int koff = kQ8 ? (m / 2) * 32 + (m % 2) * 16 + 4 * t : 8 * t + 4 * m;
            const int k = c * kChunk + koff;
            const uint2 xa = LoadA(xh, ra, n, n_in_padded, k);
            const uint2 xb = LoadA(xh, ra + 8, n, n_in_padded, k);
            const uint32_t a[4] = {xa.x, xb.x, xa.y, xb.y};
#pragma unroll
            for (int j = 0; j < kNt; ++j) {
              if constexpr (kQ8) {
                const uint32_t word = Word(wf[j][u], m);
                MmaBf16(part[j], a, Q8PairBf16(word, 0), Q8PairBf16(word, 2));
                if (m % 2 == 1) {  // one 32-element block done: scale it into the sums
                  const int h = m / 2;
                  acc[tile][j][0] = fmaf(s[j][h][0], part[j][0], acc[tile][j][0]);
                  acc[tile][j][1] = fmaf(s[j][h][1], part[j][1], acc[tile][j][1]);
                  acc[tile][j][2] = fmaf(s[j][h][0], part[j][2], acc[tile][j][2]);
                  acc[tile][j][3] = fmaf(s[j][h][1], part[j][3], acc[tile][j][3]);
                  part[j][0] = part[j][1] = part[j][2] = part[j][3] = 0.0f;
                }
              } else if constexpr (F == MatrixFormat::kF16) {
                MmaF16(acc[tile][j], a, Word(wf[j][u], 2 * m), Word(wf[j][u], 2 * m + 1));
              } else {
                MmaBf16(acc[tile][j], a, Word(wf[j][u], 2 * m), Word(wf[j][u], 2 * m + 1));
              }
            }
          }
        }
      }
#pragma unroll
      for (int j = 0; j < kNt; ++j) {
#pragma unroll
        for (int u = 0; u < kU; ++u) wf[j][u] = wn[j][u];
      }
    }
    // The reduction's parts, added in warp order.
    if (kw > 0) {
#pragma unroll
      for (int tile = 0; tile < kTiles; ++tile) {
#pragma unroll
        for (int j = 0; j < kNt; ++j) {
#pragma unroll
          for (int i = 0; i < 4; ++i)
            partial[ow][kw - 1][((tile * kNt + j) * 4 + i) * kWarp + lane] = acc[tile][j][i];
        }
      }
    }
    __syncthreads();
    if (kw == 0) {
#pragma unroll
      for (int tile = 0; tile < kTiles; ++tile) {
#pragma unroll
        for (int j = 0; j < kNt; ++j) {
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            float v = acc[tile][j][i];
#pragma unroll
            for (int p = 0; p < kMatMulSplitK - 1; ++p)
              v += partial[ow][p][((tile * kNt + j) * 4 + i) * kWarp + lane];
            const int row = r0 + 16 * tile + g + (i >= 2 ? 8 : 0);
            const int col = o_base + 8 * j + 2 * t + (i & 1);
            if (row < n && col < n_out) y[static_cast<int64_t>(row) * y_stride + col] = v;
          }
        }
      }
    }
    __syncthreads();
  }
}

int g_tiling = -1;

template <MatrixFormat F, int kTiles, int kNt, int kU>
void LaunchTiled(const DeviceMatrix& w, const uint16_t* xh, int32_t n, float* y, int32_t y_stride) {
  const int out_padded = (w.n_out + kMatMulOutAlign - 1) / kMatMulOutAlign * kMatMulOutAlign;
  static_assert(kMatMulOutAlign % (8 * kNt * kWarpsOut) == 0);
  // At most 65535 row groups in y (n <= 8192 rows: max_batch), each a block.
  const auto row_groups = static_cast<unsigned>((n + 16 * kTiles - 1) / (16 * kTiles));
  const dim3 grid(out_padded / (8 * kNt * kWarpsOut), row_groups);
  const dim3 block(kWarp * kWarpsOut * kMatMulSplitK);
  MatMulKernel<F, kTiles, kNt, kU><<<grid, block, 0, S()>>>(
      static_cast<const uint8_t*>(w.data), static_cast<const __half*>(w.scales), xh, n,
      w.n_in_padded, y, y_stride, w.n_out);
}

// Variants: 0: one tile, one group of outputs per warp, four chunks ahead (decode); 1: two tiles;
// 2: four tiles x four groups (trees, prompts: each activation fragment feeds four products);
// 3: eight tiles, one group; 4: four tiles x two groups; 5: as 0, eight chunks ahead.
template <MatrixFormat F>
void LaunchMatMul(const DeviceMatrix& w, const float* x, int32_t n, int32_t x_stride, float* y,
                  int32_t y_stride, void* scratch, int variant) {
  auto* xh = static_cast<uint16_t*>(scratch);
  const int64_t pairs = static_cast<int64_t>(n) * w.n_in_padded / 2;
  ToHalfKernel<F == MatrixFormat::kF16>
      <<<Blocks(pairs, 256), 256, 0, S()>>>(x, n, x_stride, w.n_in, w.n_in_padded, xh);
  switch (variant) {
    case 0:
      LaunchTiled<F, 1, 1, 4>(w, xh, n, y, y_stride);
      break;
    case 1:
      LaunchTiled<F, 2, 1, 4>(w, xh, n, y, y_stride);
      break;
    case 2:
      LaunchTiled<F, 4, 4, 1>(w, xh, n, y, y_stride);
      break;
    case 3:
      LaunchTiled<F, 8, 1, 2>(w, xh, n, y, y_stride);
      break;
    case 4:
      LaunchTiled<F, 4, 2, 2>(w, xh, n, y, y_stride);
      break;
    default:
      LaunchTiled<F, 1, 1, 8>(w, xh, n, y, y_stride);
      break;
  }
}

// ---- element-wise and row-wise steps --------------------------------------------------------

__global__ void RmsNormKernel(const float* __restrict__ x, const int32_t* __restrict__ rows,
                              const float* __restrict__ w, float* __restrict__ out, int d,
                              float eps) {
  const int i = static_cast<int>(blockIdx.x);
  const float* xr = x + static_cast<int64_t>(rows ? rows[i] : i) * d;
  float ss = 0.0f;
  for (int j = static_cast<int>(threadIdx.x); j < d; j += static_cast<int>(blockDim.x))
    ss = fmaf(xr[j], xr[j], ss);
  const float scale = rsqrtf(BlockSum(ss) / static_cast<float>(d) + eps);
  float* o = out + static_cast<int64_t>(i) * d;
  for (int j = static_cast<int>(threadIdx.x); j < d; j += static_cast<int>(blockDim.x))
    o[j] = xr[j] * scale * w[j];
}

__global__ void AddResidualKernel(float* __restrict__ x, const float* __restrict__ proj,
                                  const float* __restrict__ post_norm, int d, float eps) {
  const int64_t base = static_cast<int64_t>(blockIdx.x) * d;
  float scale = 1.0f;
  if (post_norm) {
    float ss = 0.0f;
    for (int j = static_cast<int>(threadIdx.x); j < d; j += static_cast<int>(blockDim.x))
      ss = fmaf(proj[base + j], proj[base + j], ss);
    scale = rsqrtf(BlockSum(ss) / static_cast<float>(d) + eps);
  }
  for (int j = static_cast<int>(threadIdx.x); j < d; j += static_cast<int>(blockDim.x))
    x[base + j] += post_norm ? proj[base + j] * scale * post_norm[j] : proj[base + j];
}

__global__ void AddBiasKernel(float* __restrict__ y, const float* __restrict__ b, int64_t count,
                              int width) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) y[i] += b[i % width];
}

__global__ void GatedActivationKernel(int act, float* __restrict__ gate,
                                      const float* __restrict__ up, int64_t count) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const float g = gate[i];
  float a;
  if (act == 0) {
    a = g / (1.0f + expf(-g));
  } else {
    constexpr float kSqrt2OverPi = 0.7978845608028654f;
    a = 0.5f * g * (1.0f + tanhf(kSqrt2OverPi * (g + 0.044715f * g * g * g)));
  }
  gate[i] = a * up[i];
}

__global__ void SoftCapKernel(float* __restrict__ logits, int64_t count, float cap) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) logits[i] = cap * tanhf(logits[i] / cap);
}

// One block per token, one warp per head (q heads, then k heads).
__global__ void RotateAndStoreKernel(RotateArgs a) {
  const int i = static_cast<int>(blockIdx.x);
  const int warp = static_cast<int>(threadIdx.x) / kWarp;
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int n_warps = static_cast<int>(blockDim.x) / kWarp;
  const int q_dim = a.n_head * a.head_dim;
  const int kv_dim = a.n_head_kv * a.head_dim;
  const float* cs = a.cos_sin + static_cast<int64_t>(i) * a.n_rot;
  const int half = a.n_rot / 2;
  for (int head = warp; head < a.n_head + a.n_head_kv; head += n_warps) {
    const bool is_q = head < a.n_head;
    float* x = is_q ? a.q + static_cast<int64_t>(i) * q_dim + head * a.head_dim
                    : a.k + static_cast<int64_t>(i) * kv_dim + (head - a.n_head) * a.head_dim;
    const float* norm = is_q ? a.q_norm : a.k_norm;
    if (norm) {
      float ss = 0.0f;
      for (int j = lane; j < a.head_dim; j += kWarp) ss = fmaf(x[j], x[j], ss);
      const float scale = rsqrtf(WarpSum(ss) / static_cast<float>(a.head_dim) + a.eps);
      __syncwarp();
      for (int j = lane; j < a.head_dim; j += kWarp) x[j] = x[j] * scale * norm[j];
      __syncwarp();
    }
    for (int p = lane; p < half; p += kWarp) {
      const int j0 = a.adjacent ? 2 * p : p;
      const int j1 = a.adjacent ? 2 * p + 1 : p + half;
      const float c = cs[2 * p];
      const float s = cs[2 * p + 1];
      const float x0 = x[j0];
      const float x1 = x[j1];
      x[j0] = x0 * c - x1 * s;
      x[j1] = x0 * s + x1 * c;
    }
  }
  __syncthreads();
  const int64_t row = static_cast<int64_t>(a.layer) * a.kv.layer_stride +
                      static_cast<int64_t>(a.slot[i]) * a.kv.kv_dim;
  float* k_dst = a.kv.k[a.seq[i]] + row;
  float* v_dst = a.kv.v[a.seq[i]] + row;
  for (int j = static_cast<int>(threadIdx.x); j < kv_dim; j += static_cast<int>(blockDim.x)) {
    k_dst[j] = a.k[static_cast<int64_t>(i) * kv_dim + j];
    v_dst[j] = a.v[static_cast<int64_t>(i) * kv_dim + j];
  }
}

// One block of kAttentionWarps warps per (token, head); lane l holds elements l, l + 32, ... of
// the head (kE of them; past head_dim none). The token's visible keys, in slot order, are cut into
// groups of kKeyGroup; warp w takes groups w, w + kAttentionWarps, ... and loads a group's rows
// together (kKeyGroup rows in flight), keeping an online softmax (running max, sum and weighted
// values); the warps' partial results are merged in warp order. Which warp sees which key depends
// on the key's index among the token's keys only, so the result does not depend on the batch.
constexpr int kAttentionWarps = 4;
constexpr int kKeyGroup = 8;

template <int kE>
__global__ void __launch_bounds__(kWarp* kAttentionWarps) AttentionKernel(AttentionArgs a) {
  const int i = static_cast<int>(blockIdx.x) / a.n_head;
  const int h = static_cast<int>(blockIdx.x) % a.n_head;
  const int warp = static_cast<int>(threadIdx.x) / kWarp;
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int kvh = h / (a.n_head / a.n_head_kv);
  const int q_dim = a.n_head * a.head_dim;
  const float* q = a.q + static_cast<int64_t>(i) * q_dim + h * a.head_dim + lane;
  // Elements of this lane: lane + 32 e for e < n_e (all kE of them unless the head is shorter).
  const int n_e = min(kE, (a.head_dim - lane + kWarp - 1) / kWarp);
  float qv[kE];
#pragma unroll
  for (int e = 0; e < kE; ++e) qv[e] = e < n_e ? q[kWarp * e] * a.scale : 0.0f;
  const int64_t base = static_cast<int64_t>(a.layer) * a.kv.layer_stride + kvh * a.head_dim + lane;
  const float* keys = a.kv.k[a.seq[i]] + base;
  const float* values = a.kv.v[a.seq[i]] + base;
  const int n_prefix = a.prefix_len[i];
  const int extra_begin = a.extra_begin[i];
  const int n_keys = n_prefix + a.extra_begin[i + 1] - extra_begin;
  float m = -INFINITY;
  float l = 0.0f;
  float acc[kE];
#pragma unroll
  for (int e = 0; e < kE; ++e) acc[e] = 0.0f;
  for (int first = warp * kKeyGroup; first < n_keys; first += kAttentionWarps * kKeyGroup) {
    int slot[kKeyGroup];
    float s[kKeyGroup];
#pragma unroll
    for (int g = 0; g < kKeyGroup; ++g) {
      const int j = first + g;
      slot[g] = j < n_prefix ? j : j < n_keys ? a.extra[extra_begin + j - n_prefix] : -1;
    }
#pragma unroll
    for (int g = 0; g < kKeyGroup; ++g) {
      float dot = 0.0f;
      if (slot[g] >= 0) {
        const float* kr = keys + static_cast<int64_t>(slot[g]) * a.kv.kv_dim;
#pragma unroll
        for (int e = 0; e < kE; ++e) {
          if (e < n_e) dot = fmaf(qv[e], kr[kWarp * e], dot);
        }
      }
      s[g] = dot;
    }
    float m_new = m;
#pragma unroll
    for (int g = 0; g < kKeyGroup; ++g) {
      s[g] = slot[g] >= 0 ? WarpSum(s[g]) : -INFINITY;
      m_new = fmaxf(m_new, s[g]);
    }
    const float correction = expf(m - m_new);
    l *= correction;
#pragma unroll
    for (int e = 0; e < kE; ++e) acc[e] *= correction;
#pragma unroll
    for (int g = 0; g < kKeyGroup; ++g) {
      if (slot[g] < 0) continue;
      const float p = expf(s[g] - m_new);
      l += p;
      const float* vr = values + static_cast<int64_t>(slot[g]) * a.kv.kv_dim;
#pragma unroll
      for (int e = 0; e < kE; ++e) {
        if (e < n_e) acc[e] = fmaf(p, vr[kWarp * e], acc[e]);
      }
    }
    m = m_new;
  }
  // Merge the warps' softmax states in warp order.
  __shared__ float state_m[kAttentionWarps];
  __shared__ float state_l[kAttentionWarps];
  __shared__ float state_acc[kAttentionWarps][kWarp * kE];
  if (lane == 0) {
    state_m[warp] = m;
    state_l[warp] = l;
  }
#pragma unroll
  for (int e = 0; e < kE; ++e) state_acc[warp][kWarp * e + lane] = acc[e];
  __syncthreads();
  if (warp != 0) return;
  float m_all = -INFINITY;
  for (int w = 0; w < kAttentionWarps; ++w) m_all = fmaxf(m_all, state_m[w]);
  float l_all = 0.0f;
  float out[kE];
#pragma unroll
  for (int e = 0; e < kE; ++e) out[e] = 0.0f;
  for (int w = 0; w < kAttentionWarps; ++w) {
    if (state_l[w] == 0.0f) continue;  // a warp that saw no key
    const float f = expf(state_m[w] - m_all);
    l_all = fmaf(state_l[w], f, l_all);
#pragma unroll
    for (int e = 0; e < kE; ++e) out[e] = fmaf(state_acc[w][kWarp * e + lane], f, out[e]);
  }
  float* o = a.out + static_cast<int64_t>(i) * q_dim + h * a.head_dim + lane;
#pragma unroll
  for (int e = 0; e < kE; ++e) {
    if (e < n_e) o[kWarp * e] = out[e] / l_all;
  }
}

__global__ void MoveKvRowsKernel(float* k, float* v, const int32_t* __restrict__ pairs, int n_pairs,
                                 int64_t layer_stride, int kv_dim) {
  float* base = (blockIdx.y == 0 ? k : v) + static_cast<int64_t>(blockIdx.x) * layer_stride;
  for (int p = 0; p < n_pairs; ++p) {
    const float* src = base + static_cast<int64_t>(pairs[2 * p]) * kv_dim;
    float* dst = base + static_cast<int64_t>(pairs[2 * p + 1]) * kv_dim;
    float value[4];
    int count = 0;
    // Read the whole row before any thread writes (rows of different slots never overlap, but
    // keep each pair's copy a copy even if a caller passed src == dst).
    for (int j = static_cast<int>(threadIdx.x); j < kv_dim && count < 4;
         j += static_cast<int>(blockDim.x))
      value[count++] = src[j];
    __syncthreads();
    count = 0;
    for (int j = static_cast<int>(threadIdx.x); j < kv_dim && count < 4;
         j += static_cast<int>(blockDim.x))
      dst[j] = value[count++];
    __syncthreads();
  }
}

}  // namespace

void SetMatMulTiling(int variant) { g_tiling = variant; }

void MatMul(const DeviceMatrix& w, const float* x, int32_t n, int32_t x_stride, float* y,
            int32_t y_stride, void* scratch) {
  if (n <= 0) return;
  // Measured on an H200 (docs/cuda.md, every tiling on the 8B and 1B shapes): one tile a block,
  // row groups over the grid, is fastest up to 64 rows; four tiles x two groups beyond.
  const int variant = g_tiling >= 0 ? g_tiling : n <= 64 ? 0 : 4;
  switch (w.format) {
    case MatrixFormat::kBf16:
      LaunchMatMul<MatrixFormat::kBf16>(w, x, n, x_stride, y, y_stride, scratch, variant);
      break;
    case MatrixFormat::kF16:
      LaunchMatMul<MatrixFormat::kF16>(w, x, n, x_stride, y, y_stride, scratch, variant);
      break;
    case MatrixFormat::kQ8:
      LaunchMatMul<MatrixFormat::kQ8>(w, x, n, x_stride, y, y_stride, scratch, variant);
      break;
  }
  CheckLaunch("matmul");
}

void RmsNorm(const float* x, const int32_t* rows, const float* w, float* out, int32_t n, int32_t d,
             float eps) {
  if (n <= 0) return;
  RmsNormKernel<<<n, 256, 0, S()>>>(x, rows, w, out, d, eps);
  CheckLaunch("rms_norm");
}

void AddBias(float* y, const float* b, int32_t n, int32_t width) {
  const int64_t count = static_cast<int64_t>(n) * width;
  if (count == 0) return;
  AddBiasKernel<<<Blocks(count, 256), 256, 0, S()>>>(y, b, count, width);
  CheckLaunch("add_bias");
}

void AddResidual(float* x, const float* proj, const float* post_norm, int32_t n, int32_t d,
                 float eps) {
  if (n <= 0) return;
  AddResidualKernel<<<n, 256, 0, S()>>>(x, proj, post_norm, d, eps);
  CheckLaunch("add_residual");
}

void GatedActivation(int act, float* gate, const float* up, int64_t count) {
  if (count == 0) return;
  GatedActivationKernel<<<Blocks(count, 256), 256, 0, S()>>>(act, gate, up, count);
  CheckLaunch("gated_activation");
}

void SoftCap(float* logits, int64_t count, float cap) {
  if (count == 0) return;
  SoftCapKernel<<<Blocks(count, 256), 256, 0, S()>>>(logits, count, cap);
  CheckLaunch("soft_cap");
}

void RotateAndStore(const RotateArgs& a) {
  if (a.n <= 0) return;
  RotateAndStoreKernel<<<a.n, 256, 0, S()>>>(a);
  CheckLaunch("rotate_and_store");
}

void Attention(const AttentionArgs& a) {
  if (a.n <= 0) return;
  const auto grid = static_cast<unsigned>(static_cast<int64_t>(a.n) * a.n_head);
  const int block = kWarp * kAttentionWarps;
  if (a.head_dim > 256)
    Fail("cuda: attention over heads of ", a.head_dim, " (at most 256 on the GPU)");
  switch ((a.head_dim + kWarp - 1) / kWarp) {
    case 1:
      AttentionKernel<1><<<grid, block, 0, S()>>>(a);
      break;
    case 2:
      AttentionKernel<2><<<grid, block, 0, S()>>>(a);
      break;
    case 3:
      AttentionKernel<3><<<grid, block, 0, S()>>>(a);
      break;
    case 4:
      AttentionKernel<4><<<grid, block, 0, S()>>>(a);
      break;
    default:
      AttentionKernel<8><<<grid, block, 0, S()>>>(a);
      break;
  }
  CheckLaunch("attention");
}

void MoveKvRows(float* k, float* v, const int32_t* pairs, int32_t n_pairs, int32_t n_layer,
                int64_t layer_stride, int32_t kv_dim) {
  if (n_pairs == 0) return;
  // 4 floats per thread, 256 threads: rows of up to 1024 floats; wider rows take more threads.
  const int threads = kv_dim <= 1024 ? 256 : 1024;
  if (kv_dim > 4 * threads) Fail("cuda: KV rows of ", kv_dim, " floats (at most 4096)");
  MoveKvRowsKernel<<<dim3(n_layer, 2), threads, 0, S()>>>(k, v, pairs, n_pairs, layer_stride,
                                                          kv_dim);
  CheckLaunch("move_kv_rows");
}

}  // namespace grove::cuda
