// One token of a Gated DeltaNet layer (Qwen3.5), after its input projections and before its
// output projection: the causal conv1d over the q, k and v channels, the delta-rule recurrence per
// value head, and the RMSNorm gated by silu(z). As llama.cpp computes it (src/models/qwen35.cpp,
// delta-net-base.cpp's autoregressive form):
//   y = silu(conv1d(window of the last conv_kernel inputs)), split into q, k (n_k_heads heads of
//   d_state) and v (n_v_heads heads of d_state); q and k L2-normalised per head, q / sqrt(d_state)
//   per value head h (reading key head h % n_k_heads), with beta = sigmoid(b_h) and
//   decay = exp(softplus(alpha_h + dt_bias_h) * a_h):
//     S = decay S;  S += k (beta (v - S k))^T  (S[j][i]: value j, key i);  o = S q
//   out_h = RMSNorm(o_h) * norm * silu(z_h).
// A token loop: prefill runs it once per token (the chunked form of the recurrence, which would
// let a prompt's tokens share matrix products, is a later step).
#pragma once

#include <cstdint>

namespace grove {

struct GatedDeltaNetDims {
  int32_t conv_kernel;
  int32_t d_state;
  int32_t n_k_heads;
  int32_t n_v_heads;
  float eps;  // of the L2 norms and the gated RMSNorm (attention.layer_norm_rms_epsilon)
};

struct GatedDeltaNetParams {
  const float* conv;     // (conv_dim, conv_kernel)
  const float* dt_bias;  // (n_v_heads)
  const float* a;        // (n_v_heads)
  const float* norm;     // (d_state)
};

// The state of one sequence on one layer: conv_kernel - 1 conv inputs, then the delta state.
struct GatedDeltaNetState {
  float* conv;   // (conv_kernel - 1, conv_dim): the previous inputs, oldest first
  float* delta;  // (n_v_heads, d_state, d_state)
};
struct GatedDeltaNetConstState {
  const float* conv;
  const float* delta;
};

// One token: reads the state `from` and writes the state after the token to `to`, which may be
// `from` itself (in place) or another state (a token tree's branch keeps its parent's state; out of
// place costs no copy: each element is read once and written once either way). qkv (conv_dim) is
// the projected input, overwritten as scratch; z (value_dim), b and alpha (n_v_heads) the other
// projections; out (value_dim) receives the gated, normalised output.
void GatedDeltaNetToken(const GatedDeltaNetDims& dims, const GatedDeltaNetParams& params,
                        GatedDeltaNetConstState from, GatedDeltaNetState to, float* qkv,
                        const float* z, const float* b, const float* alpha, float* out);

}  // namespace grove
