#include "train/gemm.h"

#include <dlfcn.h>

#include <mutex>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "base/thread_pool.h"
#include "train/parallel.h"

namespace grove {
namespace {

// OpenBLAS is opened on first use instead of linked: a linked OpenBLAS starts its worker threads
// when the program loads, and they spin (sched_yield) beside the inference thread pool for ~0.1 s
// after every BLAS call and at start-up — on a 2-core machine that takes a core from `grove run`,
// which never multiplies with it. Only training opens it. The CBLAS enum values are fixed by the
// reference CBLAS interface.
constexpr int kCblasRowMajor = 101;
constexpr int kCblasNoTrans = 111;
constexpr int kCblasTrans = 112;

using SgemmFn = void (*)(int order, int trans_a, int trans_b, int m, int n, int k, float alpha,
                         const float* a, int lda, const float* b, int ldb, float beta, float* c,
                         int ldc);
using GetThreadsFn = int (*)();
using SetThreadsFn = void (*)(int);
using CoreNameFn = char* (*)();

struct Blas {
  SgemmFn sgemm = nullptr;
  GetThreadsFn get_threads = nullptr;
  SetThreadsFn set_threads = nullptr;
  CoreNameFn core_name = nullptr;  // optional
};

const Blas& OpenBlas() {
  static Blas blas;
  static std::once_flag once;
  std::call_once(once, [] {
#ifdef GROVE_OPENBLAS_LIBRARY
    const char* names[] = {GROVE_OPENBLAS_LIBRARY, "libopenblas.so.0"};
#else
    const char* names[] = {"libopenblas.so.0"};
#endif
    void* handle = nullptr;
    for (const char* name : names) {
      if ((handle = dlopen(name, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
    }
    if (handle == nullptr) {
      Log(LogLevel::kWarn, "train: OpenBLAS not found (", dlerror(),
          "); matrix products use the built-in loop (slow)");
      return;
    }
    Blas found{reinterpret_cast<SgemmFn>(dlsym(handle, "cblas_sgemm")),
               reinterpret_cast<GetThreadsFn>(dlsym(handle, "openblas_get_num_threads")),
               reinterpret_cast<SetThreadsFn>(dlsym(handle, "openblas_set_num_threads"))};
    if (found.sgemm == nullptr || found.get_threads == nullptr || found.set_threads == nullptr) {
      Log(LogLevel::kWarn,
          "train: the OpenBLAS library lacks cblas_sgemm or its thread functions; using the ",
          "built-in loop");
      return;
    }
    found.core_name = reinterpret_cast<CoreNameFn>(dlsym(handle, "openblas_get_corename"));
    blas = found;
  });
  return blas;
}

}  // namespace

void SgemmReference(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                    int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  // i-p-j order over a row of C: the inner loop is contiguous in C and (untransposed) B, so the
  // compiler vectorises it.
  std::vector<float> row(static_cast<std::size_t>(n));
  for (int i = 0; i < m; ++i) {
    std::fill(row.begin(), row.end(), 0.0f);
    for (int p = 0; p < k; ++p) {
      const float av =
          trans_a ? a[static_cast<int64_t>(p) * lda + i] : a[static_cast<int64_t>(i) * lda + p];
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
  if (const Blas& blas = OpenBlas(); blas.sgemm != nullptr) {
    blas.sgemm(kCblasRowMajor, trans_a ? kCblasTrans : kCblasNoTrans,
               trans_b ? kCblasTrans : kCblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  SgemmReference(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void ParallelSgemm(ThreadPool* pool, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                   const float* a, int lda, const float* b, int ldb, float beta, float* c,
                   int ldc) {
  if (PoolParts(pool) == 1) {
    Sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  if (m >= n) {
    // Rows [i0, i1) of C need rows [i0, i1) of op(A): rows of A, or columns when transposed.
    ForEachRange(pool, m, [&](int, int64_t i0, int64_t i1) {
      const float* a_part = trans_a ? a + i0 : a + i0 * lda;
      Sgemm(trans_a, trans_b, static_cast<int>(i1 - i0), n, k, alpha, a_part, lda, b, ldb, beta,
            c + i0 * ldc, ldc);
    });
  } else {
    // Columns [j0, j1) of C need columns [j0, j1) of op(B).
    ForEachRange(pool, n, [&](int, int64_t j0, int64_t j1) {
      const float* b_part = trans_b ? b + j0 * ldb : b + j0;
      Sgemm(trans_a, trans_b, m, static_cast<int>(j1 - j0), k, alpha, a, lda, b_part, ldb, beta,
            c + j0, ldc);
    });
  }
}

std::string GemmBackendName() {
  const Blas& blas = OpenBlas();
  if (blas.sgemm == nullptr) return "built-in";
  const char* core = blas.core_name != nullptr ? blas.core_name() : nullptr;
  return core != nullptr ? StrCat("OpenBLAS (", core, " kernels)") : std::string("OpenBLAS");
}

void SetGemmThreads(int n_threads) {
  if (const Blas& blas = OpenBlas(); blas.set_threads != nullptr) blas.set_threads(n_threads);
}

}  // namespace grove
