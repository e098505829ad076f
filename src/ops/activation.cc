#include "ops/activation.h"

#include <cmath>

#include "base/error.h"
#include "kernels/kernel_set.h"

namespace grove {

void SwiGlu(const float* gate, const float* up, float* out, int64_t n) {
  ActiveKernels().silu_mul(gate, up, out, n);
}

void GatedActivation(GateActivation act, const float* gate, const float* up, float* out,
                     int64_t n) {
  const KernelSet& k = ActiveKernels();
  (act == GateActivation::kSilu ? k.silu_mul : k.gelu_mul)(gate, up, out, n);
}

void Softmax(float* x, int64_t n) {
  float max = x[0];
  for (int64_t i = 1; i < n; ++i) max = std::fmax(max, x[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

float ExpSubMax(float* x, int64_t n) {
  GROVE_CHECK(n >= 1 && n <= INT32_MAX);
  return ActiveKernels().softmax_exp(x, static_cast<int32_t>(n));
}

float SumExp(const float* x, int64_t n, float max) {
  GROVE_CHECK(n >= 0 && n <= INT32_MAX);
  return ActiveKernels().sum_exp(x, static_cast<int32_t>(n), max);
}

}  // namespace grove
