// Matrix product of a weight matrix with N activation rows: what decides decoding speed.
#pragma once

#include <cstdint>

#include "base/aligned_buffer.h"
#include "base/thread_pool.h"
#include "io/ggml_type.h"

namespace grove {

struct KernelSet;

// A weight matrix as GGUF stores it: n_out rows of n_in elements, each row row_bytes long,
// row-major.
struct WeightView {
  GgmlType type = GgmlType::kF32;
  const void* data = nullptr;
  int64_t n_in = 0;
  int64_t n_out = 0;
  int64_t row_bytes = 0;
};

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
void MatMul(const WeightView& w, const float* x, int n_rows, float* y, MatMulScratch& scratch,
            ThreadPool& pool);

// MatMul with the kernels of a given level instead of ActiveKernels() (tests and benchmarks compare
// levels with it; see kernels/kernel_set.h for KernelsForLevel).
void MatMulWithKernels(const KernelSet& kernels, const WeightView& w, const float* x, int n_rows,
                       float* y, MatMulScratch& scratch, ThreadPool& pool);

}  // namespace grove
