// Gradient checks: every backward op and a whole small model against central finite differences.
// The forward runs in float, so differences use a step that keeps rounding error well below the
// tolerance, and each check compares many coordinates: a wrong sign, a missing term or a mixed-up
// transpose shows up as errors of order one.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "train/drafter_graph.h"
#include "train/gemm.h"
#include "train/parallel.h"
#include "train/train_model.h"
#include "train/train_ops.h"

namespace grove {
namespace {

std::vector<float> RandomVector(std::size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Checks d(loss)/d(x[i]) for every i in `x` against (loss(x + h e_i) - loss(x - h e_i)) / 2h.
// Returns the largest error relative to max(|analytic|, |numeric|, floor).
double MaxGradError(std::vector<float>& x, const std::vector<float>& analytic,
                    const std::function<double()>& loss, float h = 1e-2f, double floor = 1e-2) {
  double worst = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float saved = x[i];
    x[i] = saved + h;
    const double up = loss();
    x[i] = saved - h;
    const double down = loss();
    x[i] = saved;
    const double numeric = (up - down) / (2.0 * h);
    const double scale =
        std::max({std::fabs(numeric), std::fabs(static_cast<double>(analytic[i])), floor});
    worst = std::max(worst, std::fabs(numeric - analytic[i]) / scale);
  }
  return worst;
}

// A fixed random linear functional of y: loss = sum_i c_i y_i, so dloss/dy = c.
double Dot(const std::vector<float>& y, const std::vector<float>& c) {
  double s = 0.0;
  for (std::size_t i = 0; i < y.size(); ++i) s += static_cast<double>(y[i]) * c[i];
  return s;
}

constexpr double kTolerance = 2e-2;

TEST(TrainGrad, Linear) {
  const int rows = 3, n_in = 5, n_out = 4;
  auto x = RandomVector(rows * n_in, 1), w = RandomVector(n_out * n_in, 2),
       c = RandomVector(rows * n_out, 3);
  std::vector<float> y(rows * n_out), dx(x.size()), dw(w.size());
  LinearBackward(x.data(), w.data(), c.data(), dx.data(), dw.data(), rows, n_in, n_out);
  auto loss = [&] {
    LinearForward(x.data(), w.data(), y.data(), rows, n_in, n_out);
    return Dot(y, c);
  };
  EXPECT_LT(MaxGradError(x, dx, loss), kTolerance);
  EXPECT_LT(MaxGradError(w, dw, loss), kTolerance);
}

TEST(TrainGrad, GemmMatchesReferenceInEveryLayout) {
  const int m = 7, n = 5, k = 9;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      auto a = RandomVector(m * k, 4), b = RandomVector(k * n, 5);
      std::vector<float> c1(m * n, 1.0f), c2(m * n, 1.0f);
      Sgemm(ta, tb, m, n, k, 0.5f, a.data(), ta ? m : k, b.data(), tb ? k : n, 2.0f, c1.data(), n);
      SgemmReference(ta, tb, m, n, k, 0.5f, a.data(), ta ? m : k, b.data(), tb ? k : n, 2.0f,
                     c2.data(), n);
      // An independent triple loop.
      for (int i = 0; i < m; ++i) {
        for (int j = 0; j < n; ++j) {
          double s = 0.0;
          for (int p = 0; p < k; ++p)
            s += static_cast<double>(ta ? a[p * m + i] : a[i * k + p]) *
                 (tb ? b[j * k + p] : b[p * n + j]);
          const double want = 0.5 * s + 2.0;
          EXPECT_NEAR(c1[i * n + j], want, 1e-4) << ta << tb;
          EXPECT_NEAR(c2[i * n + j], want, 1e-4) << ta << tb;
        }
      }
    }
  }
}

TEST(TrainGrad, RmsNorm) {
  const int rows = 3, n = 6;
  auto x = RandomVector(rows * n, 6), w = RandomVector(n, 7), c = RandomVector(rows * n, 8);
  std::vector<float> y(x.size()), rstd(rows), dx(x.size()), dw(w.size());
  auto loss = [&] {
    RmsNormForward(x.data(), w.data(), y.data(), rstd.data(), rows, n, 1e-5f);
    return Dot(y, c);
  };
  loss();
  RmsNormBackward(x.data(), w.data(), rstd.data(), c.data(), dx.data(), dw.data(), rows, n);
  EXPECT_LT(MaxGradError(x, dx, loss, 1e-3f), kTolerance);
  EXPECT_LT(MaxGradError(w, dw, loss, 1e-3f), kTolerance);
}

TEST(TrainGrad, Rope) {
  const int heads = 2, head_dim = 4, rows = 3;
  RopeParams p{.head_dim = head_dim, .n_rot = head_dim, .freq_base = 10000.0f};
  const std::vector<float> table = RopeAngleTable(p, 8, false),
                           inverse = RopeAngleTable(p, 8, true);
  const std::vector<int32_t> positions = {0, 5, 7};
  auto x = RandomVector(rows * heads * head_dim, 9), c = RandomVector(x.size(), 10);
  std::vector<float> dx = c;
  RopeRotate(p, inverse.data(), positions, dx.data(), heads);
  auto loss = [&] {
    std::vector<float> y = x;
    RopeRotate(p, table.data(), positions, y.data(), heads);
    return Dot(y, c);
  };
  EXPECT_LT(MaxGradError(x, dx, loss, 1e-2f), kTolerance);
}

TEST(TrainGrad, CausalAttention) {
  const AttentionShape s{.n_seq = 2, .seq_len = 4, .n_heads = 2, .head_dim = 3};
  const std::size_t n = static_cast<std::size_t>(s.n_seq * s.seq_len * s.n_heads * s.head_dim);
  auto q = RandomVector(n, 11), k = RandomVector(n, 12), v = RandomVector(n, 13),
       c = RandomVector(n, 14);
  std::vector<float> probs(static_cast<std::size_t>(s.n_seq * s.n_heads * s.seq_len * s.seq_len)),
      out(n);
  std::vector<float> dq(n), dk(n), dv(n), scratch(static_cast<std::size_t>(s.seq_len * s.seq_len));
  auto loss = [&] {
    CausalAttentionForward(s, q.data(), k.data(), v.data(), probs.data(), out.data());
    return Dot(out, c);
  };
  loss();
  // Causality: probabilities above the diagonal are zero and each row sums to one.
  for (int i = 0; i < s.seq_len; ++i) {
    double sum = 0.0;
    for (int j = 0; j < s.seq_len; ++j) {
      if (j > i) {
        EXPECT_EQ(probs[i * s.seq_len + j], 0.0f);
      }
      sum += probs[i * s.seq_len + j];
    }
    EXPECT_NEAR(sum, 1.0, 1e-6);
  }
  CausalAttentionBackward(s, q.data(), k.data(), v.data(), probs.data(), c.data(), dq.data(),
                          dk.data(), dv.data(), scratch.data());
  EXPECT_LT(MaxGradError(q, dq, loss), kTolerance);
  EXPECT_LT(MaxGradError(k, dk, loss), kTolerance);
  EXPECT_LT(MaxGradError(v, dv, loss), kTolerance);
}

TEST(TrainGrad, SwiGlu) {
  auto g = RandomVector(10, 15, 2.0f), u = RandomVector(10, 16), c = RandomVector(10, 17);
  std::vector<float> out(10), dg(10), du(10);
  SwiGluBackward(g.data(), u.data(), c.data(), dg.data(), du.data(), 10);
  auto loss = [&] {
    SwiGluForward(g.data(), u.data(), out.data(), 10);
    return Dot(out, c);
  };
  EXPECT_LT(MaxGradError(g, dg, loss, 1e-3f), kTolerance);
  EXPECT_LT(MaxGradError(u, du, loss, 1e-3f), kTolerance);
}

TEST(TrainGrad, CrossEntropyAndDistillation) {
  const int rows = 3, vocab = 7;
  auto z = RandomVector(rows * vocab, 18, 2.0f), teacher = RandomVector(rows * vocab, 19, 2.0f);
  const std::vector<int32_t> targets = {0, 6, 3};
  std::vector<float> dz(z.size()), scratch(z.size());
  CrossEntropy(z.data(), targets.data(), dz.data(), rows, vocab);
  EXPECT_LT(MaxGradError(
                z, dz,
                [&] { return CrossEntropy(z.data(), targets.data(), scratch.data(), rows, vocab); },
                1e-3f),
            kTolerance);
  DistillKl(z.data(), teacher.data(), dz.data(), rows, vocab);
  EXPECT_LT(
      MaxGradError(
          z, dz, [&] { return DistillKl(z.data(), teacher.data(), scratch.data(), rows, vocab); },
          1e-3f),
      kTolerance);
  // KL of a distribution with itself is zero, and its gradient vanishes.
  EXPECT_NEAR(DistillKl(teacher.data(), teacher.data(), dz.data(), rows, vocab), 0.0, 1e-9);
  for (float g : dz) EXPECT_NEAR(g, 0.0f, 1e-7f);
}

// The whole model, every parameter tensor, tied and untied output, cross-entropy and distillation.
void CheckWholeModel(bool tied, bool distill) {
  const TrainShape shape{.n_vocab = 11,
                         .n_embd = 8,
                         .n_layer = 2,
                         .n_head = 2,
                         .n_ff = 12,
                         .n_ctx = 8,
                         .tied_output = tied};
  const ParamLayout layout(shape);
  std::vector<float> params = InitParams(layout, 3);
  // 4x the 0.02 initialisation, so every path carries gradient well above float rounding, yet the
  // loss stays smooth enough at the difference step (at 10x, attention saturates and central
  // differences themselves go wrong).
  for (float& p : params) p *= 4.0f;
  TrainGraph graph(layout, /*n_seq=*/2, /*seq_len=*/5);
  const std::vector<int32_t> tokens = {1, 4, 2, 9, 0, 3, 3, 10, 7, 5};
  const std::vector<int32_t> targets = {4, 2, 9, 0, 6, 3, 10, 7, 5, 1};
  const std::vector<float> teacher = RandomVector(10 * 11, 20, 2.0f);
  const float* t = distill ? teacher.data() : nullptr;
  std::vector<float> grads(params.size());
  graph.Forward(params.data(), tokens.data(), targets.data(), t);
  graph.Backward(params.data(), grads.data());
  auto loss = [&] { return graph.Forward(params.data(), tokens.data(), targets.data(), t); };
  for (const ParamTensor& tensor : layout.tensors()) {
    std::vector<float> x(params.begin() + tensor.offset,
                         params.begin() + tensor.offset + tensor.size);
    std::vector<float> g(grads.begin() + tensor.offset,
                         grads.begin() + tensor.offset + tensor.size);
    auto tensor_loss = [&] {
      std::copy(x.begin(), x.end(), params.begin() + tensor.offset);
      return loss();
    };
    // Errors are measured against the tensor's largest gradient, so tiny coordinates do not need
    // more precision than float differences give, and the check is never vacuous.
    double largest = 0.0;
    for (float v : g) largest = std::max(largest, std::fabs(static_cast<double>(v)));
    ASSERT_GT(largest, 1e-3) << tensor.name << ": gradient too small to check";
    EXPECT_LT(MaxGradError(x, g, tensor_loss, 1e-3f, 0.1 * largest), 5e-2)
        << tensor.name << " max |g| " << largest;
    std::copy(x.begin(), x.end(), params.begin() + tensor.offset);
  }
}

TEST(TrainGrad, WholeModelTiedCrossEntropy) { CheckWholeModel(true, false); }
TEST(TrainGrad, WholeModelUntiedDistillation) { CheckWholeModel(false, true); }

// The feature drafters' graph: its fusion matrix, layer and mask embeddings against both losses
// together (KL of the logits and smooth L1 of the output to the feature), with the embedding, final
// norm and head frozen: they get no gradient at all. Autoregressive (K = 0), parallel with
// group-wise masks, and the ablation whose masks are seen across groups.
void CheckDrafterGraph(int32_t masks, MaskVisibility visibility) {
  const TrainShape target{
      .n_vocab = 11, .n_embd = 8, .n_layer = 3, .n_head = 2, .n_ff = 12, .n_ctx = 8};
  const ParamLayout layout = DrafterLayout(target, masks);
  std::vector<float> params = InitParams(layout, 5);
  for (float& p : params) p *= 4.0f;
  DrafterGraph graph(layout, /*n_seq=*/2, /*seq_len=*/4,
                     {.visibility = visibility, .logit_weight = 0.3f, .feature_weight = 1.0f});
  const std::vector<int32_t> tokens = {1, 4, 2, 9, 0, 3, 3, 10};
  const std::vector<float> features = RandomVector(8 * 8, 30, 1.0f);
  // Features near and far from the output, so both branches of the smooth L1 carry gradient.
  const std::vector<float> next = RandomVector(8 * 8, 31, 1.5f);
  const std::vector<float> teacher = RandomVector(8 * 11, 32, 2.0f);
  auto loss = [&] {
    return graph.Forward(params.data(), tokens.data(), features.data(), teacher.data(), next.data())
        .total;
  };
  std::vector<float> grads(params.size());
  loss();
  graph.Backward(params.data(), grads.data());
  for (const ParamTensor& tensor : layout.tensors()) {
    std::vector<float> x(params.begin() + tensor.offset,
                         params.begin() + tensor.offset + tensor.size);
    std::vector<float> g(grads.begin() + tensor.offset,
                         grads.begin() + tensor.offset + tensor.size);
    double largest = 0.0;
    for (float v : g) largest = std::max(largest, std::fabs(static_cast<double>(v)));
    if (tensor.frozen) {
      EXPECT_EQ(largest, 0.0) << tensor.name << " is frozen but has a gradient";
      continue;
    }
    auto tensor_loss = [&] {
      std::copy(x.begin(), x.end(), params.begin() + tensor.offset);
      return loss();
    };
    ASSERT_GT(largest, 1e-3) << tensor.name << ": gradient too small to check";
    EXPECT_LT(MaxGradError(x, g, tensor_loss, 1e-3f, 0.1 * largest), 5e-2)
        << tensor.name << " max |g| " << largest;
    std::copy(x.begin(), x.end(), params.begin() + tensor.offset);
  }
}

TEST(TrainGrad, FeatureDrafterEveryTrainedTensor) {
  CheckDrafterGraph(0, MaskVisibility::kGroupWise);
}
TEST(TrainGrad, ParallelDrafterEveryTrainedTensor) {
  CheckDrafterGraph(2, MaskVisibility::kGroupWise);
}
TEST(TrainGrad, ParallelDrafterAcrossGroupsAblation) {
  CheckDrafterGraph(2, MaskVisibility::kAcrossGroups);
}

// Attention over listed keys: a random visibility structure (each row sees itself and a random
// subset of the others), q, k and v against finite differences.
TEST(TrainGrad, ListedAttention) {
  const ListedAttentionShape s{.rows = 5, .n_heads = 2, .head_dim = 4};
  std::vector<int32_t> begin = {0}, visible;
  std::mt19937 rng(9);
  for (int i = 0; i < s.rows; ++i) {
    for (int j = 0; j < s.rows; ++j) {
      if (j == i || rng() % 2) visible.push_back(j);
    }
    begin.push_back(static_cast<int32_t>(visible.size()));
  }
  const std::size_t n = static_cast<std::size_t>(s.rows) * s.n_heads * s.head_dim;
  std::vector<float> q = RandomVector(n, 1), k = RandomVector(n, 2), v = RandomVector(n, 3);
  const std::vector<float> c = RandomVector(n, 4);
  std::vector<float> probs(visible.size() * s.n_heads), out(n);
  auto loss = [&] {
    ListedAttentionForward(s, begin, visible, q.data(), k.data(), v.data(), probs.data(),
                           out.data());
    return Dot(out, c);
  };
  loss();
  std::vector<float> dq(n), dk(n), dv(n);
  ListedAttentionBackward(s, begin, visible, q.data(), k.data(), v.data(), probs.data(), c.data(),
                          dq.data(), dk.data(), dv.data());
  EXPECT_LT(MaxGradError(q, dq, loss), kTolerance);
  EXPECT_LT(MaxGradError(k, dk, loss), kTolerance);
  EXPECT_LT(MaxGradError(v, dv, loss), kTolerance);
}

// The products split over a pool: every layout, split by rows (C taller than wide) and by columns.
TEST(TrainParallel, SplitProductsMatchTheReference) {
  ThreadPool pool(3);
  for (const auto& [m, n] : {std::pair{37, 11}, std::pair{5, 29}}) {
    const int k = 13;
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        auto a = RandomVector(static_cast<std::size_t>(m * k), 31),
             b = RandomVector(static_cast<std::size_t>(k * n), 32),
             c = RandomVector(static_cast<std::size_t>(m * n), 33);
        std::vector<float> want = c;
        const int lda = ta ? m : k, ldb = tb ? k : n;
        SgemmReference(ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, 1.0f, want.data(), n);
        ParallelSgemm(&pool, ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, 1.0f, c.data(),
                      n);
        for (std::size_t i = 0; i < c.size(); ++i)
          ASSERT_NEAR(c[i], want[i], 1e-4) << m << "x" << n << " ta " << ta << " tb " << tb;
      }
    }
  }
}

// Attention by blocks of query rows (several blocks, the last one partial), with and without a
// pool, against dense attention computed here in double: outputs and all three gradients.
TEST(TrainParallel, BlockedAttentionMatchesDenseAttention) {
  const AttentionShape s{
      .n_seq = 2, .seq_len = 2 * kAttentionBlock + 7, .n_heads = 3, .head_dim = 4};
  const int T = s.seq_len, hd = s.head_dim, width = s.n_heads * hd;
  const std::size_t n = static_cast<std::size_t>(s.n_seq) * T * width;
  auto q = RandomVector(n, 41), k = RandomVector(n, 42), v = RandomVector(n, 43),
       dout = RandomVector(n, 44);
  // Dense reference: out = softmax(QK^T/sqrt(d) masked) V and its gradients.
  std::vector<double> out_ref(n), dq_ref(n), dk_ref(n), dv_ref(n);
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  for (int b = 0; b < s.n_seq; ++b) {
    for (int h = 0; h < s.n_heads; ++h) {
      auto at = [&](int t, int d) {
        return (static_cast<std::size_t>(b) * T + t) * width + h * hd + d;
      };
      for (int i = 0; i < T; ++i) {
        std::vector<double> p(static_cast<std::size_t>(i) + 1), dp(p.size());
        double max = -1e300, sum = 0.0;
        for (int j = 0; j <= i; ++j) {
          double z = 0.0;
          for (int d = 0; d < hd; ++d) z += static_cast<double>(q[at(i, d)]) * k[at(j, d)];
          p[j] = z * scale;
          max = std::max(max, p[j]);
        }
        for (double& x : p) sum += (x = std::exp(x - max));
        for (double& x : p) x /= sum;
        double dot = 0.0;
        for (int j = 0; j <= i; ++j) {
          for (int d = 0; d < hd; ++d) {
            out_ref[at(i, d)] += p[j] * v[at(j, d)];
            dv_ref[at(j, d)] += p[j] * dout[at(i, d)];
            dp[j] += static_cast<double>(dout[at(i, d)]) * v[at(j, d)];
          }
          dot += p[j] * dp[j];
        }
        for (int j = 0; j <= i; ++j) {
          const double ds = p[j] * (dp[j] - dot) * scale;
          for (int d = 0; d < hd; ++d) {
            dq_ref[at(i, d)] += ds * k[at(j, d)];
            dk_ref[at(j, d)] += ds * q[at(i, d)];
          }
        }
      }
    }
  }
  ThreadPool pool(2);
  for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
    std::vector<float> probs(static_cast<std::size_t>(s.n_seq * s.n_heads) * T * T), out(n), dq(n),
        dk(n), dv(n), scratch(static_cast<std::size_t>(PoolParts(p)) * T * T);
    CausalAttentionForward(s, q.data(), k.data(), v.data(), probs.data(), out.data(), p);
    CausalAttentionBackward(s, q.data(), k.data(), v.data(), probs.data(), dout.data(), dq.data(),
                            dk.data(), dv.data(), scratch.data(), p);
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_NEAR(out[i], out_ref[i], 1e-4) << "out " << i << (p ? " pool" : "");
      ASSERT_NEAR(dq[i], dq_ref[i], 1e-4) << "dq " << i << (p ? " pool" : "");
      ASSERT_NEAR(dk[i], dk_ref[i], 1e-4) << "dk " << i << (p ? " pool" : "");
      ASSERT_NEAR(dv[i], dv_ref[i], 1e-4) << "dv " << i << (p ? " pool" : "");
    }
  }
}

// A whole step with a pool equals the step without one, up to the products' rounding: loss and
// every gradient, with sequences longer than an attention block.
TEST(TrainParallel, PoolGivesTheSameLossAndGradients) {
  const TrainShape shape{
      .n_vocab = 23, .n_embd = 16, .n_layer = 2, .n_head = 2, .n_ff = 24, .n_ctx = 96};
  const ParamLayout layout(shape);
  std::vector<float> params = InitParams(layout, 5);
  for (float& p : params) p *= 4.0f;
  const int n_seq = 3, seq_len = kAttentionBlock + 20;
  std::vector<int32_t> tokens(static_cast<std::size_t>(n_seq * seq_len)), targets(tokens.size());
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<int32_t>((i * 7 + 3) % 23);
    targets[i] = static_cast<int32_t>((i * 5 + 1) % 23);
  }
  ThreadPool pool(3);
  TrainGraph serial(layout, n_seq, seq_len), parallel(layout, n_seq, seq_len, &pool);
  std::vector<float> g_serial(params.size()), g_parallel(params.size());
  const double l_serial = serial.Forward(params.data(), tokens.data(), targets.data());
  serial.Backward(params.data(), g_serial.data());
  const double l_parallel = parallel.Forward(params.data(), tokens.data(), targets.data());
  parallel.Backward(params.data(), g_parallel.data());
  EXPECT_NEAR(l_parallel, l_serial, 1e-6 * std::fabs(l_serial));
  double largest = 0.0;
  for (float g : g_serial) largest = std::max(largest, std::fabs(static_cast<double>(g)));
  ASSERT_GT(largest, 1e-3);
  for (std::size_t i = 0; i < params.size(); ++i)
    ASSERT_NEAR(g_parallel[i], g_serial[i], 1e-4 * largest) << "parameter " << i;
}

}  // namespace
}  // namespace grove
