// Single-precision matrix products for training: C = alpha * op(A) * op(B) + beta * C, row-major.
//
// Training multiplies large f32 matrices in three layouts (X W^T forward, dY W and dY^T X
// backward), which is what a BLAS is built for: Debian's OpenBLAS reaches about 235 GFLOP/s on this
// 2-core machine for the trainer's shapes, several times grove's own inference kernels, which are
// built for quantized weights times a few rows. So grove uses OpenBLAS when CMake finds it and a
// plain built-in loop otherwise (same results up to rounding; slow, but the trainer still works).
// Both are deterministic for a given thread count: OpenBLAS splits the output, never the sum.
#pragma once

#include <string>

namespace grove {

class ThreadPool;

void Sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
           const float* b, int ldb, float beta, float* c, int ldc);

// The same product with the rows of C (or its columns, when C is wider than tall) split over the
// pool's threads, each range one single-threaded BLAS call. Null pool: one call, threaded as
// SetGemmThreads says.
void ParallelSgemm(ThreadPool* pool, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                   const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc);

// The same product by the built-in loop, whatever the build (tests compare the two).
void SgemmReference(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                    int lda, const float* b, int ldb, float beta, float* c, int ldc);

// "OpenBLAS (SkylakeX kernels)" or "built-in".
std::string GemmBackendName();

// Threads the BLAS may use (no effect on the built-in loop).
void SetGemmThreads(int n_threads);

}  // namespace grove
