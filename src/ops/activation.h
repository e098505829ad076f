#pragma once

#include <cstdint>

namespace grove {

// SwiGLU: out[i] = silu(gate[i]) * up[i], silu(x) = x / (1 + exp(-x)).
void SwiGlu(const float* gate, const float* up, float* out, int64_t n);

// In-place softmax over n values (max-subtracted, so any finite logits are safe).
void Softmax(float* x, int64_t n);

}  // namespace grove
