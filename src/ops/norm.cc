#include "ops/norm.h"

#include <cmath>

namespace grove {

void RmsNorm(const float* x, const float* weight, float* out, int64_t n, float eps) {
  // Accumulate in double: the norm of a 4096-wide row in float loses ~3 digits to cancellation-free
  // but long summation, and this costs nothing next to the matmuls.
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float scale = static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(n) + eps));
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

}  // namespace grove
