#pragma once

#include <cstdint>

namespace grove {

// The nonlinearity of a gated feed-forward: SwiGLU (silu, Llama, Qwen, Phi), GeGLU with GELU's
// tanh approximation (Gemma), or gpt-oss's clamped SwiGLU (ggml's swiglu_oai):
//   x = min(gate, 7), y = clamp(up, -7, 7), out = x * sigmoid(1.702 x) * (y + 1).
enum class GateActivation : uint8_t { kSilu, kGeluTanh, kSwigluOai };

// out[i] = act(gate[i]) * up[i] with the active SIMD kernel (kernels/kernel_set.h); out may be
// gate. silu(x) = x / (1 + exp(-x)); gelu(x) = x / 2 * (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
void GatedActivation(GateActivation act, const float* gate, const float* up, float* out, int64_t n);
void SwiGlu(const float* gate, const float* up, float* out, int64_t n);

// In-place softmax over n values (max-subtracted, so any finite logits are safe).
void Softmax(float* x, int64_t n);

// x[i] = exp(x[i] - max_j x[j]) in place with the active SIMD kernel, n >= 1; returns their sum
// (the softmax's denominator). The largest entry becomes exactly 1.
float ExpSubMax(float* x, int64_t n);

// sum of exp(x[i] - max) with the active SIMD kernel, x unchanged; max >= every x[i].
float SumExp(const float* x, int64_t n, float max);

}  // namespace grove
