#include "ops/gated_delta_net.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ops/norm.h"

namespace grove {
namespace {

float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
float Silu(float x) { return x * Sigmoid(x); }
// As ggml's softplus: the identity past 20, where log(1 + e^x) rounds to x.
float Softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// x / sqrt(|x|^2 + eps), as llama.cpp's build_gdn_l2_norm (an RMSNorm of eps / n, scaled).
void L2Normalize(float* x, int32_t n, float eps) {
  double sum = 0.0;
  for (int32_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float scale = 1.0f / std::sqrt(static_cast<float>(sum) + eps);
  for (int32_t i = 0; i < n; ++i) x[i] *= scale;
}

}  // namespace

void GatedDeltaNetToken(const GatedDeltaNetDims& d, const GatedDeltaNetParams& p,
                        GatedDeltaNetConstState from, GatedDeltaNetState to, float* qkv,
                        const float* z, const float* b, const float* alpha, float* out) {
  const int32_t key_dim = d.d_state * d.n_k_heads;
  const int32_t conv_dim = 2 * key_dim + d.d_state * d.n_v_heads;
  const int32_t taps = d.conv_kernel;
  // Causal conv1d of each channel over its last `taps` inputs, then the window moves on (read
  // before written, so `to` may be `from`).
  for (int32_t c = 0; c < conv_dim; ++c) {
    const float* w = p.conv + static_cast<std::size_t>(c) * taps;
    float y = 0.0f;
    for (int32_t t = 0; t + 1 < taps; ++t)
      y += from.conv[static_cast<std::size_t>(t) * conv_dim + c] * w[t];
    y += qkv[c] * w[taps - 1];
    if (taps > 1) {
      for (int32_t t = 0; t + 2 < taps; ++t) {
        to.conv[static_cast<std::size_t>(t) * conv_dim + c] =
            from.conv[static_cast<std::size_t>(t + 1) * conv_dim + c];
      }
      to.conv[static_cast<std::size_t>(taps - 2) * conv_dim + c] = qkv[c];
    }
    qkv[c] = Silu(y);
  }
  float* q = qkv;
  float* k = qkv + key_dim;
  const float* v = qkv + 2 * key_dim;
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(d.d_state));
  for (int32_t h = 0; h < d.n_k_heads; ++h) {
    L2Normalize(q + static_cast<std::size_t>(h) * d.d_state, d.d_state, d.eps);
    L2Normalize(k + static_cast<std::size_t>(h) * d.d_state, d.d_state, d.eps);
  }
  for (int32_t i = 0; i < key_dim; ++i) q[i] *= q_scale;
  const std::size_t n = d.d_state;
  for (int32_t h = 0; h < d.n_v_heads; ++h) {
    const float* kh = k + static_cast<std::size_t>(h % d.n_k_heads) * n;
    const float* qh = q + static_cast<std::size_t>(h % d.n_k_heads) * n;
    const float* vh = v + static_cast<std::size_t>(h) * n;
    const float* s_from = from.delta + static_cast<std::size_t>(h) * n * n;
    float* s = to.delta + static_cast<std::size_t>(h) * n * n;
    float* o = out + static_cast<std::size_t>(h) * n;
    const float beta = Sigmoid(b[h]);
    const float decay = std::exp(Softplus(alpha[h] + p.dt_bias[h]) * p.a[h]);
    for (std::size_t j = 0; j < n; ++j) {
      const float* row_from = s_from + j * n;
      float* row = s + j * n;
      float sk = 0.0f;
      for (std::size_t i = 0; i < n; ++i) {
        row[i] = row_from[i] * decay;
        sk += row[i] * kh[i];
      }
      const float delta = beta * (vh[j] - sk);
      float sq = 0.0f;
      for (std::size_t i = 0; i < n; ++i) {
        row[i] += kh[i] * delta;
        sq += row[i] * qh[i];
      }
      o[j] = sq;
    }
    RmsNorm(o, p.norm, o, d.d_state, d.eps);
    const float* zh = z + static_cast<std::size_t>(h) * n;
    for (std::size_t j = 0; j < n; ++j) o[j] *= Silu(zh[j]);
  }
}

}  // namespace grove
