// Matrix product of a weight matrix with N activation rows: what decides decoding speed.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "base/aligned_buffer.h"
#include "base/function_ref.h"
#include "base/thread_pool.h"
#include "io/ggml_type.h"

namespace grove {

struct KernelSet;

// A weight matrix: n_out rows of n_in elements, each row row_bytes long, row-major as GGUF stores
// it, or (grouped) regrouped 16 rows at a time in the layout of quant/packed.h, group g starting at
// g * kGroupRows * row_bytes. Only the kernel levels with a group kernel for the type compute
// grouped matrices (KernelSet::group_q8_0, ...; see PackMatrix).
struct WeightView {
  GgmlType type = GgmlType::kF32;
  const void* data = nullptr;
  int64_t n_in = 0;
  int64_t n_out = 0;
  int64_t row_bytes = 0;
  bool grouped = false;
};

// True if the kernels have a group kernel for w's type, so that packing w pays.
bool CanGroup(const KernelSet& kernels, const WeightView& w);

// Bytes PackMatrix writes for w: whole groups (n_out rounded up to kGroupRows rows).
int64_t GroupedMatrixBytes(const WeightView& w);

// Packs the rows of w into dst (GroupedMatrixBytes(w) bytes, 64-byte aligned) and returns the
// grouped view of dst. Requires HasGroupLayout(w.type) and !w.grouped. Groups are packed in
// parallel on the pool (load time only).
WeightView PackMatrix(const WeightView& w, void* dst, ThreadPool& pool);

// The grouped view of w's rows already packed at `packed` (by PackMatrix, in this process or an
// earlier one), if its first and last groups are what PackMatrix makes of w's rows now: a check
// that the bytes were packed from these rows, in this build's layout, that reads two groups, not
// the matrix. Null when they differ.
std::optional<WeightView> PackedMatrixOf(const WeightView& w, const void* packed);

// Scratch for one matmul call (e.g. activations quantized to Q8_0). Sized once at load for the
// largest (rows, n_in) the model will use, so MatMul never allocates.
class MatMulScratch {
 public:
  MatMulScratch() = default;
  MatMulScratch(int max_rows, int64_t max_n_in);
  uint8_t* bytes() { return buffer_.data(); }
  std::size_t size() const { return buffer_.size(); }
  int max_rows() const { return max_rows_; }
  int64_t max_n_in() const { return max_n_in_; }

 private:
  AlignedBuffer<uint8_t> buffer_;
  int max_rows_ = 0;
  int64_t max_n_in_ = 0;
};

// y[r * n_out + o] = sum_k W[o][k] * x[r * n_in + k] for r in [0, n_rows).
// Each output element is computed with an accumulation order that depends only on (o, k), never on
// n_rows or on the thread count, so a row's result is bit-identical alone or in a batch
// (architecture contract 2). Supported weight types: f32, f16, bf16 (float activations, FMA), q8_0,
// q4_0, q4_k and q6_k (activations quantized to 8 bits once per call into scratch, integer dot
// products). Does not allocate.
// y (n_rows, bias.size()) += bias on every row: a projection's "+ b". Nothing for an empty bias.
void AddBiasRows(std::span<const float> bias, float* y, int64_t n_rows);

void MatMul(const WeightView& w, const float* x, int n_rows, float* y, MatMulScratch& scratch,
            ThreadPool& pool);

// MatMul with the kernels of a given level instead of ActiveKernels() (tests and benchmarks compare
// levels with it; see kernels/kernel_set.h for KernelsForLevel).
void MatMulWithKernels(const KernelSet& kernels, const WeightView& w, const float* x, int n_rows,
                       float* y, MatMulScratch& scratch, ThreadPool& pool);

// One matrix of a fused matmul and where its n_rows x w.n_out results go.
struct MatMulOutput {
  WeightView w;
  float* y;
};

// True if the matrices can share one fused call: the same n_in and the same activation format
// (float rows; ActQ8 rows, which serve the rows of every block type alike; or grouped ActQ8 rows
// for grouped matrices).
bool CanFuseMatMuls(std::span<const MatMulOutput> outs);

// Several matmuls over the same input in one pool dispatch (Q, K and V; a batch of n_in x n_rows
// activations at least 2^15 elements adds one dispatch to quantize them in parallel): activations
// are prepared once and threads split the union of the output rows. Each out.y gets exactly the
// bits a separate MatMul would give. Requires CanFuseMatMuls(outs).
void MatMulFused(std::span<const MatMulOutput> outs, const float* x, int n_rows,
                 MatMulScratch& scratch, ThreadPool& pool);

// Matmuls of equal n_out over the same input in one dispatch, split by output columns: each thread
// computes one column range [o_begin, o_end) of every matrix (ranges start at multiples of 16),
// then calls epilogue(o_begin, o_end) on the same thread, e.g. SwiGLU of gate and up over those
// columns, so no barrier separates them. Bits as separate MatMul calls; requires CanFuseMatMuls.
void MatMulColumns(std::span<const MatMulOutput> outs, const float* x, int n_rows,
                   FunctionRef<void(int64_t, int64_t)> epilogue, MatMulScratch& scratch,
                   ThreadPool& pool);

}  // namespace grove
