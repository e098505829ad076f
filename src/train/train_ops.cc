#include "train/train_ops.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/error.h"
#include "ops/activation.h"
#include "ops/norm.h"
#include "train/gemm.h"
#include "train/parallel.h"

namespace grove {

void LinearForward(const float* x, const float* w, float* y, int rows, int n_in, int n_out,
                   ThreadPool* pool) {
  ParallelSgemm(pool, false, true, rows, n_out, n_in, 1.0f, x, n_in, w, n_in, 0.0f, y, n_out);
}

void LinearBackward(const float* x, const float* w, const float* dy, float* dx, float* dw, int rows,
                    int n_in, int n_out, ThreadPool* pool) {
  if (dx)
    ParallelSgemm(pool, false, false, rows, n_in, n_out, 1.0f, dy, n_out, w, n_in, 1.0f, dx, n_in);
  if (dw)
    ParallelSgemm(pool, true, false, n_out, n_in, rows, 1.0f, dy, n_out, x, n_in, 1.0f, dw, n_in);
}

void RmsNormForward(const float* x, const float* w, float* y, float* rstd, int rows, int n,
                    float eps, ThreadPool* pool) {
  ForEachRange(pool, rows, [&](int, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * n;
      // The same sum and rounding as ops/RmsNorm, which computes y.
      double sum = 0.0;
      for (int i = 0; i < n; ++i) sum += static_cast<double>(xr[i]) * xr[i];
      rstd[r] = static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(n) + eps));
      RmsNorm(xr, w, y + r * n, n, eps);
    }
  });
}

void RmsNormBackward(const float* x, const float* w, const float* rstd, const float* dy, float* dx,
                     float* dw, int rows, int n, ThreadPool* pool) {
  // y_i = w_i x_i s with s = (mean(x^2) + eps)^-1/2, ds/dx_j = -s^3 x_j / n, so
  // dx_j = s w_j dy_j - (s^3 / n) x_j sum_i w_i dy_i x_i.
  ForEachRange(pool, rows, [&](int, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * n;
      const float* dyr = dy + r * n;
      float* dxr = dx + r * n;
      const float s = rstd[r];
      double dot = 0.0;
      for (int i = 0; i < n; ++i) dot += static_cast<double>(w[i]) * dyr[i] * xr[i];
      const float k = static_cast<float>(dot * s * s * s / n);
      for (int i = 0; i < n; ++i) dxr[i] += s * w[i] * dyr[i] - k * xr[i];
    }
  });
  // dw sums over rows: split by columns instead, so no two threads add into one element.
  if (!dw) return;
  ForEachRange(pool, n, [&](int, int64_t i0, int64_t i1) {
    for (int r = 0; r < rows; ++r) {
      const float* xr = x + static_cast<int64_t>(r) * n;
      const float* dyr = dy + static_cast<int64_t>(r) * n;
      const float s = rstd[r];
      for (int64_t i = i0; i < i1; ++i) dw[i] += dyr[i] * xr[i] * s;
    }
  });
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
                float* x, int n_heads, ThreadPool* pool) {
  const int64_t width = static_cast<int64_t>(n_heads) * p.head_dim;
  ForEachRange(pool, static_cast<int64_t>(positions.size()), [&](int, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      RopeApply(p, table + static_cast<int64_t>(positions[static_cast<std::size_t>(r)]) * p.n_rot,
                x + r * width, n_heads);
    }
  });
}

namespace {

// Where head h of sequence b lives: its columns of q/k/v/out (rows x n_heads * head_dim, leading
// dimension `width`) and its seq_len x seq_len block of probs.
struct HeadBlock {
  int64_t rows;   // offset of its first element in q, k, v, out
  int64_t probs;  // offset of its block in probs
  int width;
};

HeadBlock HeadAt(const AttentionShape& s, int64_t pair) {
  const int64_t b = pair / s.n_heads, h = pair % s.n_heads;
  const int width = s.n_heads * s.head_dim;
  const int64_t T = s.seq_len;
  return {b * T * width + h * s.head_dim, (b * s.n_heads + h) * T * T, width};
}

float ScoreScale(const AttentionShape& s) {
  return 1.0f / std::sqrt(static_cast<float>(s.head_dim));
}

// Zeroes rows x head_dim of a head's columns (leading dimension width).
void ZeroHeadColumns(float* x, int rows, int head_dim, int width) {
  for (int r = 0; r < rows; ++r) std::fill_n(x + static_cast<int64_t>(r) * width, head_dim, 0.0f);
}

}  // namespace

// Query rows [i0, i1) see keys [0, i1): each block multiplies against that prefix only, which
// skips (for seq_len 512 and blocks of 64) 44% of the dense products' work.
void CausalAttentionForward(const AttentionShape& s, const float* q, const float* k, const float* v,
                            float* probs, float* out, ThreadPool* pool) {
  const int T = s.seq_len, hd = s.head_dim;
  const float scale = ScoreScale(s);
  ForEachRange(pool, static_cast<int64_t>(s.n_seq) * s.n_heads, [&](int, int64_t p0, int64_t p1) {
    for (int64_t pair = p0; pair < p1; ++pair) {
      const auto [base, probs_base, width] = HeadAt(s, pair);
      float* p = probs + probs_base;
      for (int i0 = 0; i0 < T; i0 += kAttentionBlock) {
        const int i1 = std::min(T, i0 + kAttentionBlock);
        float* block = p + static_cast<int64_t>(i0) * T;
        Sgemm(false, true, i1 - i0, i1, hd, scale, q + base + static_cast<int64_t>(i0) * width,
              width, k + base, width, 0.0f, block, T);
        for (int i = i0; i < i1; ++i) {
          float* row = p + static_cast<int64_t>(i) * T;
          Softmax(row, i + 1);
          std::fill(row + i + 1, row + i1, 0.0f);  // keys past i1 are never read
        }
        Sgemm(false, false, i1 - i0, hd, i1, 1.0f, block, T, v + base, width, 0.0f,
              out + base + static_cast<int64_t>(i0) * width, width);
      }
    }
  });
}

void CausalAttentionBackward(const AttentionShape& s, const float* q, const float* k,
                             const float* v, const float* probs, const float* dout, float* dq,
                             float* dk, float* dv, float* scratch, ThreadPool* pool) {
  const int T = s.seq_len, hd = s.head_dim;
  const float scale = ScoreScale(s);
  ForEachRange(pool, static_cast<int64_t>(s.n_seq) * s.n_heads,
               [&](int part, int64_t p0, int64_t p1) {
                 float* dp = scratch + static_cast<int64_t>(part) * T * T;
                 for (int64_t pair = p0; pair < p1; ++pair) {
                   const auto [base, probs_base, width] = HeadAt(s, pair);
                   const float* p = probs + probs_base;
                   // dK and dV gather from every later block: they accumulate, from zero.
                   ZeroHeadColumns(dk + base, T, hd, width);
                   ZeroHeadColumns(dv + base, T, hd, width);
                   for (int i0 = 0; i0 < T; i0 += kAttentionBlock) {
                     const int i1 = std::min(T, i0 + kAttentionBlock), m = i1 - i0;
                     const int64_t row0 = static_cast<int64_t>(i0) * width;
                     const float* p_block = p + static_cast<int64_t>(i0) * T;
                     float* dp_block = dp + static_cast<int64_t>(i0) * T;
                     // dP = dO V^T; dV += P^T dO.
                     Sgemm(false, true, m, i1, hd, 1.0f, dout + base + row0, width, v + base, width,
                           0.0f, dp_block, T);
                     Sgemm(true, false, i1, hd, m, 1.0f, p_block, T, dout + base + row0, width,
                           1.0f, dv + base, width);
                     // Softmax backward: dS_ij = P_ij (dP_ij - sum_l P_il dP_il), times the score
                     // scale.
                     for (int i = i0; i < i1; ++i) {
                       const float* pr = p + static_cast<int64_t>(i) * T;
                       float* dr = dp + static_cast<int64_t>(i) * T;
                       double dot = 0.0;
                       for (int j = 0; j <= i; ++j) dot += static_cast<double>(pr[j]) * dr[j];
                       const float d = static_cast<float>(dot);
                       for (int j = 0; j <= i; ++j) dr[j] = pr[j] * (dr[j] - d) * scale;
                       std::fill(dr + i + 1, dr + i1, 0.0f);
                     }
                     // dQ = dS K; dK += dS^T Q.
                     Sgemm(false, false, m, hd, i1, 1.0f, dp_block, T, k + base, width, 0.0f,
                           dq + base + row0, width);
                     Sgemm(true, false, i1, hd, m, 1.0f, dp_block, T, q + base + row0, width, 1.0f,
                           dk + base, width);
                   }
                 }
               });
}

void ListedAttentionForward(const ListedAttentionShape& s, std::span<const int32_t> visible_begin,
                            std::span<const int32_t> visible, const float* q, const float* k,
                            const float* v, float* probs, float* out, ThreadPool* pool) {
  const int hd = s.head_dim;
  const int64_t width = static_cast<int64_t>(s.n_heads) * hd;
  const int64_t total = visible_begin[static_cast<std::size_t>(s.rows)];
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  ForEachRange(pool, s.n_heads, [&](int, int64_t h0, int64_t h1) {
    for (int64_t h = h0; h < h1; ++h) {
      float* ph = probs + h * total;
      for (int i = 0; i < s.rows; ++i) {
        const int32_t b = visible_begin[static_cast<std::size_t>(i)];
        const int32_t n = visible_begin[static_cast<std::size_t>(i) + 1] - b;
        const float* qi = q + i * width + h * hd;
        float* p = ph + b;
        for (int32_t t = 0; t < n; ++t) {
          const float* kj = k + visible[static_cast<std::size_t>(b) + t] * width + h * hd;
          float dot = 0.0f;
          for (int c = 0; c < hd; ++c) dot += qi[c] * kj[c];
          p[t] = dot * scale;
        }
        Softmax(p, n);
        float* oi = out + i * width + h * hd;
        std::fill(oi, oi + hd, 0.0f);
        for (int32_t t = 0; t < n; ++t) {
          const float* vj = v + visible[static_cast<std::size_t>(b) + t] * width + h * hd;
          for (int c = 0; c < hd; ++c) oi[c] += p[t] * vj[c];
        }
      }
    }
  });
}

void ListedAttentionBackward(const ListedAttentionShape& s, std::span<const int32_t> visible_begin,
                             std::span<const int32_t> visible, const float* q, const float* k,
                             const float* v, const float* probs, const float* dout, float* dq,
                             float* dk, float* dv, ThreadPool* pool) {
  const int hd = s.head_dim;
  const int64_t width = static_cast<int64_t>(s.n_heads) * hd;
  const int64_t total = visible_begin[static_cast<std::size_t>(s.rows)];
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  int32_t widest = 0;
  for (int i = 0; i < s.rows; ++i) {
    widest = std::max(widest, visible_begin[static_cast<std::size_t>(i) + 1] -
                                  visible_begin[static_cast<std::size_t>(i)]);
  }
  ForEachRange(pool, s.n_heads, [&](int, int64_t h0, int64_t h1) {
    std::vector<float> ds(static_cast<std::size_t>(widest));
    for (int64_t h = h0; h < h1; ++h) {
      // Each head owns its columns of dq, dk, dv: no two threads write one element.
      for (float* g : {dq, dk, dv})
        ZeroHeadColumns(g + h * hd, s.rows, hd, static_cast<int>(width));
      const float* ph = probs + h * total;
      for (int i = 0; i < s.rows; ++i) {
        const int32_t b = visible_begin[static_cast<std::size_t>(i)];
        const int32_t n = visible_begin[static_cast<std::size_t>(i) + 1] - b;
        const float* p = ph + b;
        const float* doi = dout + i * width + h * hd;
        // dP_ij = dO_i . V_j and dV_j += P_ij dO_i; then dS = P (dP - sum P dP) scale.
        double dot = 0.0;
        for (int32_t t = 0; t < n; ++t) {
          const int64_t j = visible[static_cast<std::size_t>(b) + t];
          const float* vj = v + j * width + h * hd;
          float* dvj = dv + j * width + h * hd;
          float dp = 0.0f;
          for (int c = 0; c < hd; ++c) {
            dp += doi[c] * vj[c];
            dvj[c] += p[t] * doi[c];
          }
          ds[static_cast<std::size_t>(t)] = dp;
          dot += static_cast<double>(p[t]) * dp;
        }
        const float* qi = q + i * width + h * hd;
        float* dqi = dq + i * width + h * hd;
        for (int32_t t = 0; t < n; ++t) {
          const float g =
              p[t] * (ds[static_cast<std::size_t>(t)] - static_cast<float>(dot)) * scale;
          const int64_t j = visible[static_cast<std::size_t>(b) + t];
          const float* kj = k + j * width + h * hd;
          float* dkj = dk + j * width + h * hd;
          for (int c = 0; c < hd; ++c) {
            dqi[c] += g * kj[c];
            dkj[c] += g * qi[c];
          }
        }
      }
    }
  });
}

void SwiGluForward(const float* gate, const float* up, float* out, int64_t n, ThreadPool* pool) {
  ForEachRange(pool, n,
               [&](int, int64_t i0, int64_t i1) { SwiGlu(gate + i0, up + i0, out + i0, i1 - i0); });
}

void SwiGluBackward(const float* gate, const float* up, const float* dout, float* dgate, float* dup,
                    int64_t n, ThreadPool* pool) {
  ForEachRange(pool, n, [&](int, int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const float g = gate[i];
      const float sig = 1.0f / (1.0f + std::exp(-g));
      const float silu = g * sig;
      dup[i] = dout[i] * silu;
      dgate[i] = dout[i] * up[i] * sig * (1.0f + g * (1.0f - sig));
    }
  });
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

namespace {

// Sums f(row) over [0, rows) split over the pool, adding the ranges' partial sums in range order.
template <typename RowLoss>
double SumOverRows(ThreadPool* pool, int rows, RowLoss f) {
  std::vector<double> partial(static_cast<std::size_t>(PoolParts(pool)), 0.0);
  ForEachRange(pool, rows, [&](int part, int64_t r0, int64_t r1) {
    double sum = 0.0;
    for (int64_t r = r0; r < r1; ++r) sum += f(r);
    partial[static_cast<std::size_t>(part)] = sum;
  });
  double total = 0.0;
  for (double x : partial) total += x;
  return total;
}

}  // namespace

double CrossEntropy(const float* logits, const int32_t* targets, float* dlogits, int rows,
                    int n_vocab, ThreadPool* pool) {
  GROVE_CHECK(rows > 0);
  for (int r = 0; r < rows; ++r)
    GROVE_CHECK(targets[r] >= 0 && targets[r] < n_vocab, "target ", targets[r]);
  const double inv_rows = 1.0 / rows;
  const double total = SumOverRows(pool, rows, [&](int64_t r) {
    const float* z = logits + r * n_vocab;
    float* dz = dlogits + r * n_vocab;
    const int32_t t = targets[r];
    const double lse = LogSumExp(z, n_vocab);
    for (int i = 0; i < n_vocab; ++i) dz[i] = static_cast<float>(std::exp(z[i] - lse) * inv_rows);
    dz[t] -= static_cast<float>(inv_rows);
    return lse - z[t];
  });
  return total * inv_rows;
}

double DistillKl(const float* student_logits, const float* teacher_logits, float* dlogits, int rows,
                 int n_vocab, ThreadPool* pool, const float* row_weights) {
  GROVE_CHECK(rows > 0);
  const double mean = 1.0 / rows;
  const double total = SumOverRows(pool, rows, [&](int64_t r) {
    const double inv_rows = row_weights ? row_weights[r] : mean;
    const float* zs = student_logits + r * n_vocab;
    const float* zt = teacher_logits + r * n_vocab;
    float* dz = dlogits + r * n_vocab;
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
    return kl * inv_rows;
  });
  return total;
}

}  // namespace grove
