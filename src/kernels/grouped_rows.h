// The activation rows of a tile in the grouped ActQ8 format (kernel_set.h), as the SIMD levels'
// group kernels read them. In an unnamed namespace, like the `static` helpers of act_block_sums.h:
// each file gets its own copy, so no copy compiled with AVX-512 flags can become the one the AVX2
// file calls (see CMakeLists.txt).
#pragma once

#include <cstdint>

#include "kernels/kernel_set.h"

namespace grove {
namespace {  // NOLINT(google-build-namespaces, cert-dcl59-cpp): one copy per file, on purpose

template <int R>
struct GroupedRows {
  const uint8_t* q[R];
  const float* d[R];
  const int32_t* neg_sums[R];
  GroupedRows(const void* x, int64_t x_stride, int64_t n_in) {
    for (int i = 0; i < R; ++i) {
      q[i] = static_cast<const uint8_t*>(x) + i * x_stride;
      d[i] = reinterpret_cast<const float*>(q[i] + ActQ8ScaleOffset(n_in));
      neg_sums[i] = reinterpret_cast<const int32_t*>(q[i] + ActQ8SumOffset(n_in));
    }
  }
};

}  // namespace
}  // namespace grove
