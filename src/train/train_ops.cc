#include "train/train_ops.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/error.h"
#include "ops/activation.h"
#include "ops/norm.h"
#include "train/gemm.h"

namespace grove {

void LinearForward(const float* x, const float* w, float* y, int rows, int n_in, int n_out) {
  Sgemm(false, true, rows, n_out, n_in, 1.0f, x, n_in, w, n_in, 0.0f, y, n_out);
}

void LinearBackward(const float* x, const float* w, const float* dy, float* dx, float* dw, int rows,
                    int n_in, int n_out) {
  if (dx) Sgemm(false, false, rows, n_in, n_out, 1.0f, dy, n_out, w, n_in, 1.0f, dx, n_in);
  Sgemm(true, false, n_out, n_in, rows, 1.0f, dy, n_out, x, n_in, 1.0f, dw, n_in);
}

void RmsNormForward(const float* x, const float* w, float* y, float* rstd, int rows, int n,
                    float eps) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<int64_t>(r) * n;
    // The same sum and rounding as ops/RmsNorm, which computes y.
    double sum = 0.0;
    for (int i = 0; i < n; ++i) sum += static_cast<double>(xr[i]) * xr[i];
    rstd[r] = static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(n) + eps));
    RmsNorm(xr, w, y + static_cast<int64_t>(r) * n, n, eps);
  }
}

void RmsNormBackward(const float* x, const float* w, const float* rstd, const float* dy, float* dx,
                     float* dw, int rows, int n) {
  // y_i = w_i x_i s with s = (mean(x^2) + eps)^-1/2, ds/dx_j = -s^3 x_j / n, so
  // dx_j = s w_j dy_j - (s^3 / n) x_j sum_i w_i dy_i x_i.
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<int64_t>(r) * n;
    const float* dyr = dy + static_cast<int64_t>(r) * n;
    float* dxr = dx + static_cast<int64_t>(r) * n;
    const float s = rstd[r];
    double dot = 0.0;
    for (int i = 0; i < n; ++i) dot += static_cast<double>(w[i]) * dyr[i] * xr[i];
    const float k = static_cast<float>(dot * s * s * s / n);
    for (int i = 0; i < n; ++i) {
      dxr[i] += s * w[i] * dyr[i] - k * xr[i];
      dw[i] += dyr[i] * xr[i] * s;
    }
  }
}

std::vector<float> RopeAngleTable(const RopeParams& p, int n_positions, bool inverse) {
  std::vector<float> table(static_cast<std::size_t>(n_positions) * p.n_rot);
  for (int t = 0; t < n_positions; ++t) {
    float* cs = table.data() + static_cast<std::size_t>(t) * p.n_rot;
    RopeAngles(p, t, cs);
    if (inverse) {
      for (int i = 1; i < p.n_rot; i += 2) cs[i] = -cs[i];
    }
  }
  return table;
}

void RopeRotate(const RopeParams& p, const float* table, std::span<const int32_t> positions,
                float* x, int n_heads) {
  const int64_t width = static_cast<int64_t>(n_heads) * p.head_dim;
  for (std::size_t r = 0; r < positions.size(); ++r) {
    RopeApply(p, table + static_cast<int64_t>(positions[r]) * p.n_rot, x + r * width, n_heads);
  }
}

namespace {

// Where head h of sequence b lives: its columns of q/k/v/out (rows x n_heads * head_dim, leading
// dimension `width`) and its seq_len x seq_len block of probs.
struct HeadBlock {
  int64_t rows;   // offset of its first element in q, k, v, out
  int64_t probs;  // offset of its block in probs
  int width;
};

HeadBlock HeadAt(const AttentionShape& s, int b, int h) {
  const int width = s.n_heads * s.head_dim;
  const int64_t T = s.seq_len;
  return {static_cast<int64_t>(b) * T * width + static_cast<int64_t>(h) * s.head_dim,
          (static_cast<int64_t>(b) * s.n_heads + h) * T * T, width};
}

float ScoreScale(const AttentionShape& s) {
  return 1.0f / std::sqrt(static_cast<float>(s.head_dim));
}

}  // namespace

void CausalAttentionForward(const AttentionShape& s, const float* q, const float* k, const float* v,
                            float* probs, float* out) {
  const int T = s.seq_len;
  const float scale = ScoreScale(s);
  for (int b = 0; b < s.n_seq; ++b) {
    for (int h = 0; h < s.n_heads; ++h) {
      const auto [base, probs_base, width] = HeadAt(s, b, h);
      float* p = probs + probs_base;
      Sgemm(false, true, T, T, s.head_dim, scale, q + base, width, k + base, width, 0.0f, p, T);
      for (int i = 0; i < T; ++i) {
        float* row = p + static_cast<int64_t>(i) * T;
        Softmax(row, i + 1);
        std::fill(row + i + 1, row + T, 0.0f);
      }
      Sgemm(false, false, T, s.head_dim, T, 1.0f, p, T, v + base, width, 0.0f, out + base, width);
    }
  }
}

void CausalAttentionBackward(const AttentionShape& s, const float* q, const float* k,
                             const float* v, const float* probs, const float* dout, float* dq,
                             float* dk, float* dv, float* scratch) {
  const int T = s.seq_len;
  const float scale = ScoreScale(s);
  for (int b = 0; b < s.n_seq; ++b) {
    for (int h = 0; h < s.n_heads; ++h) {
      const auto [base, probs_base, width] = HeadAt(s, b, h);
      const float* p = probs + probs_base;
      float* dp = scratch;
      // dP = dO V^T; dV = P^T dO.
      Sgemm(false, true, T, T, s.head_dim, 1.0f, dout + base, width, v + base, width, 0.0f, dp, T);
      Sgemm(true, false, T, s.head_dim, T, 1.0f, p, T, dout + base, width, 0.0f, dv + base, width);
      // Softmax backward: dS_ij = P_ij (dP_ij - sum_l P_il dP_il), times the score scale.
      for (int i = 0; i < T; ++i) {
        const float* pr = p + static_cast<int64_t>(i) * T;
        float* dr = dp + static_cast<int64_t>(i) * T;
        double dot = 0.0;
        for (int j = 0; j <= i; ++j) dot += static_cast<double>(pr[j]) * dr[j];
        const float d = static_cast<float>(dot);
        for (int j = 0; j <= i; ++j) dr[j] = pr[j] * (dr[j] - d) * scale;
        std::fill(dr + i + 1, dr + T, 0.0f);
      }
      // dQ = dS K; dK = dS^T Q.
      Sgemm(false, false, T, s.head_dim, T, 1.0f, dp, T, k + base, width, 0.0f, dq + base, width);
      Sgemm(true, false, T, s.head_dim, T, 1.0f, dp, T, q + base, width, 0.0f, dk + base, width);
    }
  }
}

void SwiGluForward(const float* gate, const float* up, float* out, int64_t n) {
  SwiGlu(gate, up, out, n);
}

void SwiGluBackward(const float* gate, const float* up, const float* dout, float* dgate, float* dup,
                    int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    const float sig = 1.0f / (1.0f + std::exp(-g));
    const float silu = g * sig;
    dup[i] = dout[i] * silu;
    dgate[i] = dout[i] * up[i] * sig * (1.0f + g * (1.0f - sig));
  }
}

namespace {

// log(sum(exp(z))) of one row, in double.
double LogSumExp(const float* z, int n) {
  float max = z[0];
  for (int i = 1; i < n; ++i) max = std::max(max, z[i]);
  double sum = 0.0;
  for (int i = 0; i < n; ++i) sum += std::exp(static_cast<double>(z[i]) - max);
  return max + std::log(sum);
}

}  // namespace

double CrossEntropy(const float* logits, const int32_t* targets, float* dlogits, int rows,
                    int n_vocab) {
  GROVE_CHECK(rows > 0);
  double total = 0.0;
  const double inv_rows = 1.0 / rows;
  for (int r = 0; r < rows; ++r) {
    const float* z = logits + static_cast<int64_t>(r) * n_vocab;
    float* dz = dlogits + static_cast<int64_t>(r) * n_vocab;
    const int32_t t = targets[r];
    GROVE_CHECK(t >= 0 && t < n_vocab, "target ", t);
    const double lse = LogSumExp(z, n_vocab);
    total += lse - z[t];
    for (int i = 0; i < n_vocab; ++i) dz[i] = static_cast<float>(std::exp(z[i] - lse) * inv_rows);
    dz[t] -= static_cast<float>(inv_rows);
  }
  return total * inv_rows;
}

double DistillKl(const float* student_logits, const float* teacher_logits, float* dlogits, int rows,
                 int n_vocab) {
  GROVE_CHECK(rows > 0);
  double total = 0.0;
  const double inv_rows = 1.0 / rows;
  for (int r = 0; r < rows; ++r) {
    const float* zs = student_logits + static_cast<int64_t>(r) * n_vocab;
    const float* zt = teacher_logits + static_cast<int64_t>(r) * n_vocab;
    float* dz = dlogits + static_cast<int64_t>(r) * n_vocab;
    const double lse_s = LogSumExp(zs, n_vocab);
    const double lse_t = LogSumExp(zt, n_vocab);
    double kl = 0.0;
    for (int i = 0; i < n_vocab; ++i) {
      const double log_pt = zt[i] - lse_t;
      const double log_ps = zs[i] - lse_s;
      const double pt = std::exp(log_pt);
      if (pt > 0.0) kl += pt * (log_pt - log_ps);
      dz[i] = static_cast<float>((std::exp(log_ps) - pt) * inv_rows);
    }
    total += kl;
  }
  return total * inv_rows;
}

}  // namespace grove
