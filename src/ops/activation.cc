#include "ops/activation.h"

#include <cmath>

#include "base/error.h"
#include "kernels/kernel_set.h"

namespace grove {

void SwiGlu(const float* gate, const float* up, float* out, int64_t n) {
  ActiveKernels().silu_mul(gate, up, out, n);
}

namespace {

// gpt-oss's activation as ggml-cpu computes it (ggml_swiglu_oai, alpha 1.702, limit 7), in f32 with
// expf. Scalar: it runs on a mixture's chosen experts only (a few rows of n_ff_expert), where the
// matmuls around it cost hundreds of times more.
void SwigluOai(const float* gate, const float* up, float* out, int64_t n) {
  constexpr float kAlpha = 1.702f;
  constexpr float kLimit = 7.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float x = std::fmin(gate[i], kLimit);
    const float y = std::fmax(std::fmin(up[i], kLimit), -kLimit);
    out[i] = x / (1.0f + std::exp(kAlpha * -x)) * (y + 1.0f);
  }
}

}  // namespace

void GatedActivation(GateActivation act, const float* gate, const float* up, float* out,
                     int64_t n) {
  const KernelSet& k = ActiveKernels();
  switch (act) {
    case GateActivation::kSilu:
      return k.silu_mul(gate, up, out, n);
    case GateActivation::kGeluTanh:
      return k.gelu_mul(gate, up, out, n);
    case GateActivation::kSwigluOai:
      return SwigluOai(gate, up, out, n);
  }
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
