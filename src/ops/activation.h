#pragma once

#include <cstdint>

namespace grove {

// SwiGLU: out[i] = silu(gate[i]) * up[i], silu(x) = x / (1 + exp(-x)), with the active SIMD kernel
// (kernels/kernel_set.h); out may be gate.
void SwiGlu(const float* gate, const float* up, float* out, int64_t n);

// In-place softmax over n values (max-subtracted, so any finite logits are safe).
void Softmax(float* x, int64_t n);

// x[i] = exp(x[i] - max_j x[j]) in place with the active SIMD kernel, n >= 1; returns their sum
// (the softmax's denominator). The largest entry becomes exactly 1.
float ExpSubMax(float* x, int64_t n);

// sum of exp(x[i] - max) with the active SIMD kernel, x unchanged; max >= every x[i].
float SumExp(const float* x, int64_t n, float max);

}  // namespace grove
