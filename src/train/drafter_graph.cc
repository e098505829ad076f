#include "train/drafter_graph.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "base/error.h"
#include "train/gemm.h"
#include "train/parallel.h"
#include "train/train_ops.h"

namespace grove {

ParamLayout DrafterLayout(const TrainShape& target, int32_t masks) {
  if (masks < 0 || masks > 64) Fail("train-drafter: --masks ", masks, " is not in 0..64");
  TrainShape shape = target;
  shape.n_layer = 1;
  ParamLayout layout(shape);
  layout.AddTensor("fc.weight", {2 * static_cast<int64_t>(shape.n_embd), shape.n_embd}, true);
  // Embeddings, like norm gains, are not decayed (and stay f32 in every export).
  if (masks > 0) layout.AddTensor("mask_embd.weight", {shape.n_embd, masks}, false);
  layout.FreezeEmbeddingAndHead();
  return layout;
}

int64_t FusionOffset(const ParamLayout& layout) {
  const ParamTensor* fc = layout.Find("fc.weight");
  GROVE_CHECK(fc, "not a feature drafter's layout: no fc.weight");
  return fc->offset;
}

int32_t LayoutMasks(const ParamLayout& layout) {
  const ParamTensor* m = layout.Find("mask_embd.weight");
  return m ? static_cast<int32_t>(m->shape[1]) : 0;
}

DrafterGraph::DrafterGraph(const ParamLayout& layout, int n_seq, int seq_len,
                           const DrafterGraphOptions& options, ThreadPool* pool)
    : layout_(layout),
      options_(options),
      pool_(pool),
      n_seq_(n_seq),
      seq_len_(seq_len),
      masks_(LayoutMasks(layout)),
      fc_(FusionOffset(layout)),
      mask_embd_(masks_ > 0 ? layout.Find("mask_embd.weight")->offset : -1) {
  const TrainShape& shape = layout.shape();
  if (n_seq < 1 || seq_len < 1) Fail("train: batch of ", n_seq, " x ", seq_len, " is empty");
  if (seq_len > shape.n_ctx)
    Fail("train: sequence length ", seq_len, " exceeds the context ", shape.n_ctx);
  {
    // The attention lists are indexed with int32 (and hold n_head probabilities per entry): an
    // upper bound of their length, refused before anything is built.
    const int64_t groups = masks_ + 1, L = seq_len;
    const int64_t across = options.visibility == MaskVisibility::kAcrossGroups ? groups : 1;
    const int64_t entries = int64_t{n_seq} * groups * L * (L + 1) / 2 * across;
    if (entries > std::numeric_limits<int32_t>::max()) {
      Fail("train: ", n_seq, " windows of ", seq_len, " tokens with ", masks_, " masks need up to ",
           entries, " attention entries (more than 2^31): use a smaller ", "--batch or --seq-len");
    }
  }
  rope_ = {
      .head_dim = shape.head_dim(), .n_rot = shape.head_dim(), .freq_base = shape.rope_freq_base};
  rope_table_ = RopeAngleTable(rope_, seq_len, /*inverse=*/false);
  rope_inverse_ = RopeAngleTable(rope_, seq_len, /*inverse=*/true);
  BuildRows();
  const auto R = static_cast<std::size_t>(rows());
  const std::size_t D = shape.n_embd, F = shape.n_ff, V = shape.n_vocab;
  concat_.resize(R * 2 * D);
  dconcat_.resize(R * 2 * D);
  for (auto* v : {&x_in_, &h1_, &q_, &k_, &v_, &att_, &x_mid_, &h2_, &g_, &h_f_, &d_g_, &dh_,
                  &dx_mid_, &dx_in_, &datt_, &dq_, &dk_, &dv_}) {
    v->resize(R * D);
  }
  for (auto* v : {&gate_, &up_, &act_, &dact_, &dgate_, &dup_}) v->resize(R * F);
  for (auto* v : {&rstd1_, &rstd2_, &rstd_f_}) v->resize(R);
  for (auto* v : {&logits_, &dlogits_, &teacher_rows_}) v->resize(R * V);
  probs_.resize(visible_.size() * static_cast<std::size_t>(shape.n_head));
}

void DrafterGraph::BuildRows() {
  const int L = seq_len_, real = real_rows();
  position_.assign(static_cast<std::size_t>(real), 0);
  label_row_.assign(static_cast<std::size_t>(real), 0);
  mask_of_row_.assign(static_cast<std::size_t>(real), 0);
  weight_.assign(static_cast<std::size_t>(real), 1.0f);
  first_mask_row_.assign(static_cast<std::size_t>(real), -1);
  for (int r = 0; r < real; ++r) {
    position_[static_cast<std::size_t>(r)] = r % L;
    label_row_[static_cast<std::size_t>(r)] = r;
  }
  for (int s = 0; s < n_seq_; ++s) {
    for (int t = 0; t < L; ++t) {
      for (int j = 1; j <= masks_ && t + j < L; ++j) {
        if (j == 1) first_mask_row_[static_cast<std::size_t>(s) * L + t] = rows();
        position_.push_back(t + j);
        label_row_.push_back(s * L + t + j);
        mask_of_row_.push_back(j);
        weight_.push_back(std::pow(options_.mask_decay, static_cast<float>(j)));
      }
    }
  }
  // What each row sees, in the order the interleaved sequence x_0 M(0,1..) x_1 M(1,1..) .. lists.
  const bool across = options_.visibility == MaskVisibility::kAcrossGroups;
  visible_begin_.assign(1, 0);
  for (int r = 0; r < rows(); ++r) {
    const bool is_mask = r >= real;
    const int anchor = is_mask ? label_row_[static_cast<std::size_t>(r)] -
                                     mask_of_row_[static_cast<std::size_t>(r)]
                               : r;
    const int s = anchor / L, t = anchor % L;
    for (int u = 0; u <= t; ++u) {
      visible_.push_back(s * L + u);
      const int first = first_mask_row_[static_cast<std::size_t>(s) * L + u];
      if (first < 0) continue;
      const int group = std::min(masks_, L - 1 - u);
      if (u < t && across) {
        for (int j = 0; j < group; ++j) visible_.push_back(first + j);
      } else if (u == t && is_mask) {
        for (int j = 0; j < mask_of_row_[static_cast<std::size_t>(r)]; ++j)
          visible_.push_back(first + j);
      }
    }
    visible_begin_.push_back(static_cast<int32_t>(visible_.size()));
  }
  kl_weight_.resize(weight_.size());
  for (std::size_t r = 0; r < weight_.size(); ++r) kl_weight_[r] = weight_[r] / real;
}

int DrafterGraph::MaskRow(int s, int t, int j) const {
  if (j < 1 || j > masks_ || t + j >= seq_len_) return -1;
  const int first = first_mask_row_[static_cast<std::size_t>(s) * seq_len_ + t];
  return first < 0 ? -1 : first + j - 1;
}

DrafterLoss DrafterGraph::Forward(const float* params, const int32_t* tokens, const float* features,
                                  const float* teacher_logits, const float* next_features) {
  const TrainShape& sh = layout_.shape();
  const int R = rows(), V = sh.n_vocab;
  ConcatInputs(params, tokens, features);
  LayerForward(params);
  DrafterLoss loss;
  has_loss_ = teacher_logits != nullptr && next_features != nullptr;
  if (!has_loss_) return loss;
  for (int r = 0; r < R; ++r) {
    std::memcpy(teacher_rows_.data() + static_cast<std::size_t>(r) * V,
                teacher_logits + static_cast<std::size_t>(LabelRow(r)) * V, sizeof(float) * V);
  }
  loss.kl = DistillKl(logits_.data(), teacher_rows_.data(), dlogits_.data(), R, V, pool_,
                      kl_weight_.data());
  const float lw = options_.logit_weight;
  ForEachRange(pool_, static_cast<int64_t>(dlogits_.size()), [&](int, int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) dlogits_[static_cast<std::size_t>(i)] *= lw;
  });
  loss.feature = FeatureLoss(next_features);
  loss.total = lw * loss.kl + options_.feature_weight * loss.feature;
  return loss;
}

void DrafterGraph::ConcatInputs(const float* params, const int32_t* tokens, const float* features) {
  const int R = rows(), real = real_rows(), D = layout_.shape().n_embd, V = layout_.shape().n_vocab;
  const float* embd = params + layout_.token_embd();
  for (int r = 0; r < R; ++r) {
    float* row = concat_.data() + static_cast<std::size_t>(r) * 2 * D;
    if (r < real) {
      if (tokens[r] < 0 || tokens[r] >= V)
        Fail("train: token id ", tokens[r], " is outside the vocabulary of ", V);
      std::memcpy(row, embd + static_cast<int64_t>(tokens[r]) * D, sizeof(float) * D);
      std::memcpy(row + D, features + static_cast<int64_t>(r) * D, sizeof(float) * D);
    } else {
      const int j = mask_of_row_[static_cast<std::size_t>(r)];
      std::memcpy(row, params + mask_embd_ + static_cast<int64_t>(j - 1) * D, sizeof(float) * D);
      std::fill(row + D, row + 2 * D, 0.0f);
    }
  }
}

void DrafterGraph::LayerForward(const float* params) {
  const TrainShape& sh = layout_.shape();
  const int R = rows(), D = sh.n_embd, F = sh.n_ff, V = sh.n_vocab;
  const ParamLayout::Layer& w = layout_.layer(0);
  LinearForward(concat_.data(), params + fc_, x_in_.data(), R, 2 * D, D, pool_);
  RmsNormForward(x_in_.data(), params + w.attn_norm, h1_.data(), rstd1_.data(), R, D, sh.rms_eps,
                 pool_);
  LinearForward(h1_.data(), params + w.wq, q_.data(), R, D, D, pool_);
  LinearForward(h1_.data(), params + w.wk, k_.data(), R, D, D, pool_);
  LinearForward(h1_.data(), params + w.wv, v_.data(), R, D, D, pool_);
  RopeRotate(rope_, rope_table_.data(), position_, q_.data(), sh.n_head, pool_);
  RopeRotate(rope_, rope_table_.data(), position_, k_.data(), sh.n_head, pool_);
  const ListedAttentionShape att{R, sh.n_head, sh.head_dim()};
  ListedAttentionForward(att, visible_begin_, visible_, q_.data(), k_.data(), v_.data(),
                         probs_.data(), att_.data(), pool_);
  x_mid_ = x_in_;
  ParallelSgemm(pool_, false, true, R, D, D, 1.0f, att_.data(), D, params + w.wo, D, 1.0f,
                x_mid_.data(), D);
  RmsNormForward(x_mid_.data(), params + w.ffn_norm, h2_.data(), rstd2_.data(), R, D, sh.rms_eps,
                 pool_);
  LinearForward(h2_.data(), params + w.w_gate, gate_.data(), R, D, F, pool_);
  LinearForward(h2_.data(), params + w.w_up, up_.data(), R, D, F, pool_);
  SwiGluForward(gate_.data(), up_.data(), act_.data(), static_cast<int64_t>(R) * F, pool_);
  g_ = x_mid_;
  ParallelSgemm(pool_, false, true, R, D, F, 1.0f, act_.data(), F, params + w.w_down, F, 1.0f,
                g_.data(), D);
  RmsNormForward(g_.data(), params + layout_.output_norm(), h_f_.data(), rstd_f_.data(), R, D,
                 sh.rms_eps, pool_);
  LinearForward(h_f_.data(), params + layout_.output(), logits_.data(), R, D, V, pool_);
}

// Smooth L1 (β = 1) of g - f, each row weighted; its gradient into d_g_. Sums per range of rows,
// added in order.
double DrafterGraph::FeatureLoss(const float* next_features) {
  const int R = rows(), real = real_rows(), D = layout_.shape().n_embd;
  const double scale = 1.0 / (static_cast<double>(real) * D);
  std::vector<double> partial(static_cast<std::size_t>(PoolParts(pool_)), 0.0);
  ForEachRange(pool_, R, [&](int part, int64_t r0, int64_t r1) {
    double sum = 0.0;
    for (int64_t r = r0; r < r1; ++r) {
      const float wr = weight_[static_cast<std::size_t>(r)];
      const float* g = g_.data() + r * D;
      const float* f = next_features + static_cast<int64_t>(LabelRow(static_cast<int>(r))) * D;
      float* dg = d_g_.data() + r * D;
      const auto k = static_cast<float>(options_.feature_weight * wr * scale);
      double row = 0.0;
      for (int c = 0; c < D; ++c) {
        const float diff = g[c] - f[c];
        const float a = std::fabs(diff);
        row += a < 1.0f ? 0.5 * diff * diff : a - 0.5;
        dg[c] = k * std::clamp(diff, -1.0f, 1.0f);
      }
      sum += wr * row;
    }
    partial[static_cast<std::size_t>(part)] = sum;
  });
  double feature = 0.0;
  for (double s : partial) feature += s;
  return feature * scale;
}

void DrafterGraph::Backward(const float* params, float* grads) {
  GROVE_CHECK(has_loss_, "Backward needs a Forward with teacher logits and features");
  const TrainShape& sh = layout_.shape();
  const int R = rows(), D = sh.n_embd, V = sh.n_vocab;
  auto grad = [&](int64_t offset) { return layout_.frozen(offset) ? nullptr : grads + offset; };
  // Head and final norm (frozen): the gradient flows through them to g, beside the feature term's.
  std::fill(dh_.begin(), dh_.end(), 0.0f);
  LinearBackward(h_f_.data(), params + layout_.output(), dlogits_.data(), dh_.data(),
                 grad(layout_.output()), R, D, V, pool_);
  RmsNormBackward(g_.data(), params + layout_.output_norm(), rstd_f_.data(), dh_.data(),
                  d_g_.data(), grad(layout_.output_norm()), R, D, pool_);
  FfnBackward(params, grads);
  AttentionBackward(params, grads);
  FusionBackward(params, grads);
}

// g = x_mid + act W_down^T, act = SwiGLU(h2 W_gate^T, h2 W_up^T), h2 = norm(x_mid): from d_g_
// into dx_mid_.
void DrafterGraph::FfnBackward(const float* params, float* grads) {
  const TrainShape& sh = layout_.shape();
  const int R = rows(), D = sh.n_embd, F = sh.n_ff;
  const ParamLayout::Layer& w = layout_.layer(0);
  std::fill(dact_.begin(), dact_.end(), 0.0f);
  LinearBackward(act_.data(), params + w.w_down, d_g_.data(), dact_.data(), grads + w.w_down, R, F,
                 D, pool_);
  SwiGluBackward(gate_.data(), up_.data(), dact_.data(), dgate_.data(), dup_.data(),
                 static_cast<int64_t>(R) * F, pool_);
  std::fill(dh_.begin(), dh_.end(), 0.0f);
  LinearBackward(h2_.data(), params + w.w_gate, dgate_.data(), dh_.data(), grads + w.w_gate, R, D,
                 F, pool_);
  LinearBackward(h2_.data(), params + w.w_up, dup_.data(), dh_.data(), grads + w.w_up, R, D, F,
                 pool_);
  dx_mid_ = d_g_;
  RmsNormBackward(x_mid_.data(), params + w.ffn_norm, rstd2_.data(), dh_.data(), dx_mid_.data(),
                  grads + w.ffn_norm, R, D, pool_);
}

// x_mid = x_in + att W_o^T, att over the rotated q, k of h1 = norm(x_in): from dx_mid_ into dx_in_.
void DrafterGraph::AttentionBackward(const float* params, float* grads) {
  const TrainShape& sh = layout_.shape();
  const int R = rows(), D = sh.n_embd;
  const ParamLayout::Layer& w = layout_.layer(0);
  std::fill(datt_.begin(), datt_.end(), 0.0f);
  LinearBackward(att_.data(), params + w.wo, dx_mid_.data(), datt_.data(), grads + w.wo, R, D, D,
                 pool_);
  const ListedAttentionShape att{R, sh.n_head, sh.head_dim()};
  ListedAttentionBackward(att, visible_begin_, visible_, q_.data(), k_.data(), v_.data(),
                          probs_.data(), datt_.data(), dq_.data(), dk_.data(), dv_.data(), pool_);
  RopeRotate(rope_, rope_inverse_.data(), position_, dq_.data(), sh.n_head, pool_);
  RopeRotate(rope_, rope_inverse_.data(), position_, dk_.data(), sh.n_head, pool_);
  std::fill(dh_.begin(), dh_.end(), 0.0f);
  LinearBackward(h1_.data(), params + w.wq, dq_.data(), dh_.data(), grads + w.wq, R, D, D, pool_);
  LinearBackward(h1_.data(), params + w.wk, dk_.data(), dh_.data(), grads + w.wk, R, D, D, pool_);
  LinearBackward(h1_.data(), params + w.wv, dv_.data(), dh_.data(), grads + w.wv, R, D, D, pool_);
  dx_in_ = dx_mid_;
  RmsNormBackward(x_in_.data(), params + w.attn_norm, rstd1_.data(), dh_.data(), dx_in_.data(),
                  grads + w.attn_norm, R, D, pool_);
}

// x_in = concat fc^T: the fusion matrix, and through it the mask embeddings (the token embeddings
// are frozen and the features are data).
void DrafterGraph::FusionBackward(const float* params, float* grads) {
  const int R = rows(), real = real_rows(), D = layout_.shape().n_embd;
  const int masked = R - real;
  if (masked > 0) {
    float* dc = dconcat_.data() + static_cast<std::size_t>(real) * 2 * D;
    std::fill(dc, dc + static_cast<std::size_t>(masked) * 2 * D, 0.0f);
    LinearBackward(concat_.data() + static_cast<std::size_t>(real) * 2 * D, params + fc_,
                   dx_in_.data() + static_cast<std::size_t>(real) * D, dc, nullptr, masked, 2 * D,
                   D, pool_);
    // Rows of one mask add into one embedding row: split by columns.
    float* dm = grads + mask_embd_;
    ForEachRange(pool_, D, [&](int, int64_t c0, int64_t c1) {
      for (int r = real; r < R; ++r) {
        float* row = dm + static_cast<int64_t>(mask_of_row_[static_cast<std::size_t>(r)] - 1) * D;
        const float* d = dconcat_.data() + static_cast<std::size_t>(r) * 2 * D;
        for (int64_t c = c0; c < c1; ++c) row[c] += d[c];
      }
    });
  }
  LinearBackward(concat_.data(), params + fc_, dx_in_.data(), nullptr, grads + fc_, R, 2 * D, D,
                 pool_);
}

}  // namespace grove
