// The forward pass's kernels on a CUDA device, launched on grove's stream (device.h). Plain C++
// declarations over device pointers; kernels.cu implements them, kernels_none.cc throws.
//
// Batch invariance (docs/design.md, contract 2) holds here as on the CPU: every output of a row
// is accumulated in an order that depends only on the reduction index, never on how many rows the
// batch has or where the row sits in it. MatMul gives each weight matrix a fixed split of the
// reduction (kMatMulSplitK warps, each a fixed set of chunks, added in a fixed order) and runs the
// same tensor-core instruction sequence for one row as for 256; attention visits a token's visible
// keys in slot order. So a token's logits are bit-identical alone and inside any tree, and greedy
// speculative decoding on the GPU equals plain greedy decoding on the GPU token for token.
#pragma once

#include <cstdint>

namespace grove::cuda {

// How a matrix is held on the device (model/cuda_weights.cc uploads each GGUF type as one).
enum class MatrixFormat : uint8_t {
  kBf16,  // rows of bf16; activations enter the tensor cores as bf16
  kF16,   // rows of fp16; activations enter as fp16 (as llama.cpp's CUDA path does)
  kQ8,    // Q8_0: int8 rows permuted within each 64-element chunk (PermutedQ8Index), and one fp16
          // scale per 32 elements; each 32-element block is its own tensor-core product, scaled
};

// The reduction of every matrix product is split among this many warps (fixed: changing it
// changes bits).
inline constexpr int kMatMulSplitK = 4;
// Elements of the reduction one chunk holds (16-bit formats / Q8); rows are padded to a multiple
// of kMatMulRowAlign elements with zeros, output rows to kMatMulOutAlign.
inline constexpr int kMatMulRowAlign = 64;
inline constexpr int kMatMulOutAlign = 64;

// Where byte p of a 64-element chunk of a kQ8 row comes from: the element index in the chunk.
// Thread t of a quad holds bytes [16 t, 16 t + 16); its 4 bytes for tensor-core step m are elements
// (m / 2) * 32 + (m % 2) * 16 + 4 t + e, so each step reads one 32-element block (one scale).
constexpr int PermutedQ8Index(int p) {
  const int t = p / 16;
  const int m = (p % 16) / 4;
  const int e = p % 4;
  return (m / 2) * 32 + (m % 2) * 16 + 4 * t + e;
}

struct DeviceMatrix {
  MatrixFormat format = MatrixFormat::kBf16;
  const void* data = nullptr;    // (n_out_padded, n_in_padded) elements of the format
  const void* scales = nullptr;  // kQ8: (n_out_padded, n_in_padded / 32) fp16
  int32_t n_out = 0;
  int32_t n_in = 0;
  int32_t n_in_padded = 0;  // multiple of kMatMulRowAlign
};

// y[r][o] = sum_k x[r][k] w[o][k] for rows r < n, outputs o < w.n_out. x rows are f32 with
// x_stride floats between rows, y rows f32 with y_stride. `scratch`: device memory for the
// activations rounded to 16 bits, at least MatMulScratchBytes(w, n).
void MatMul(const DeviceMatrix& w, const float* x, int32_t n, int32_t x_stride, float* y,
            int32_t y_stride, void* scratch);
inline int64_t MatMulScratchBytes(int32_t n_in_padded, int32_t n) {
  return 2 * static_cast<int64_t>(n_in_padded) * n;
}
// Forces the tiling MatMul uses (0..5, kernels.cu; every variant gives the same bits), for timing
// them against each other. -1: chosen from the number of rows.
void SetMatMulTiling(int variant);

// out[i] = x[rows[i]] / rms(x[rows[i]]) * w for i < n (rows null: row i), d floats a row.
void RmsNorm(const float* x, const int32_t* rows, const float* w, float* out, int32_t n, int32_t d,
             float eps);
// y[i][j] += b[j], n rows of width floats.
void AddBias(float* y, const float* b, int32_t n, int32_t width);
// x[i] += post_norm ? RmsNorm(proj[i]) * post_norm : proj[i], n rows of d.
void AddResidual(float* x, const float* proj, const float* post_norm, int32_t n, int32_t d,
                 float eps);
// gate[i] = act(gate[i]) * up[i] over n_rows rows of width; act 0: silu, 1: gelu (tanh).
void GatedActivation(int act, float* gate, const float* up, int64_t count);
// logits = cap * tanh(logits / cap).
void SoftCap(float* logits, int64_t count, float cap);

// The KV cache of every sequence: keys and values of slot s of layer l of sequence q at
// k[q] + (l * n_ctx + s) * kv_dim (k and v are device arrays of n_seq device pointers).
struct KvTable {
  float* const* k = nullptr;
  float* const* v = nullptr;
  int64_t layer_stride = 0;  // n_ctx * kv_dim
  int32_t kv_dim = 0;
};

// One token per row: RMS-norms each head of q and k when q_norm is given (Qwen3), rotates the
// first n_rot dimensions of every head by the token's cos/sin pairs (cos_sin: (n, n_rot / 2)
// pairs; adjacent pairs when `adjacent`, halves otherwise), and stores k and v in slot slot[i] of
// sequence seq[i]'s cache at `layer`.
struct RotateArgs {
  float* q;
  float* k;
  const float* v;
  const float* q_norm;  // (head_dim) or null
  const float* k_norm;
  const float* cos_sin;
  const int32_t* seq;
  const int32_t* slot;
  int32_t n;
  int32_t n_head;
  int32_t n_head_kv;
  int32_t head_dim;
  int32_t n_rot;
  bool adjacent;
  float eps;
  int32_t layer;
  KvTable kv;
};
void RotateAndStore(const RotateArgs& a);

// out[i] (head h) = softmax(scale q_i k^T) v over the keys token i sees: cache slots [0,
// prefix_len[i]) then slots extra[extra_begin[i] .. extra_begin[i + 1]) (its ancestors in the
// batch or the cache, then itself), of sequence seq[i] at `layer`. head_dim 64, 128 or 256.
struct AttentionArgs {
  const float* q;  // (n, n_head * head_dim)
  float* out;      // (n, n_head * head_dim)
  const int32_t* seq;
  const int32_t* prefix_len;
  const int32_t* extra_begin;  // (n + 1)
  const int32_t* extra;
  int32_t n;
  int32_t n_head;
  int32_t n_head_kv;
  int32_t head_dim;
  float scale;
  int32_t layer;
  KvTable kv;
};
void Attention(const AttentionArgs& a);

// Moves cache rows of n_layer layers: for each pair i in order, slot src[i] to slot dst[i], as a
// loop would (Compact moves slots down, so a destination may be an earlier pair's source). k, v:
// one sequence's arrays ((n_layer, n_ctx, kv_dim) floats). pairs: device (src, dst) ints.
void MoveKvRows(float* k, float* v, const int32_t* pairs, int32_t n_pairs, int32_t n_layer,
                int64_t layer_stride, int32_t kv_dim);

}  // namespace grove::cuda
