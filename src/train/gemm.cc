#include "train/gemm.h"

#include <vector>

#include "base/error.h"

#if GROVE_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace grove {

void SgemmReference(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                    int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  // i-p-j order over a row of C: the inner loop is contiguous in C and (untransposed) B, so the
  // compiler vectorises it.
  std::vector<float> row(static_cast<std::size_t>(n));
  for (int i = 0; i < m; ++i) {
    std::fill(row.begin(), row.end(), 0.0f);
    for (int p = 0; p < k; ++p) {
      const float av = trans_a ? a[static_cast<int64_t>(p) * lda + i] : a[static_cast<int64_t>(i) * lda + p];
      if (av == 0.0f) continue;
      if (!trans_b) {
        const float* brow = b + static_cast<int64_t>(p) * ldb;
        for (int j = 0; j < n; ++j) row[j] += av * brow[j];
      } else {
        for (int j = 0; j < n; ++j) row[j] += av * b[static_cast<int64_t>(j) * ldb + p];
      }
    }
    float* crow = c + static_cast<int64_t>(i) * ldc;
    for (int j = 0; j < n; ++j) crow[j] = alpha * row[j] + (beta == 0.0f ? 0.0f : beta * crow[j]);
  }
}

void Sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
           const float* b, int ldb, float beta, float* c, int ldc) {
  GROVE_CHECK(m >= 0 && n >= 0 && k >= 0);
  if (m == 0 || n == 0) return;
#if GROVE_HAVE_OPENBLAS
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#else
  SgemmReference(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#endif
}

std::string GemmBackendName() {
#if GROVE_HAVE_OPENBLAS
  return StrCat("OpenBLAS (", openblas_get_num_threads(), " threads)");
#else
  return "built-in";
#endif
}

void SetGemmThreads(int n_threads) {
#if GROVE_HAVE_OPENBLAS
  openblas_set_num_threads(n_threads);
#else
  (void)n_threads;
#endif
}

}  // namespace grove
