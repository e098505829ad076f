#include "train/train_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "tasks/corpus_rng.h"
#include "train/gemm.h"
#include "train/parallel.h"

namespace grove {

void ValidateTrainShape(const TrainShape& s) {
  auto in_range = [](const char* what, int64_t v, int64_t lo, int64_t hi) {
    if (v < lo || v > hi) Fail("train: ", what, " ", v, " is out of range [", lo, ", ", hi, "]");
  };
  in_range("vocabulary size", s.n_vocab, 2, 1 << 20);
  in_range("width (--dim)", s.n_embd, 2, 16384);
  in_range("layers", s.n_layer, 1, 256);
  in_range("heads", s.n_head, 1, 1024);
  in_range("FFN width", s.n_ff, 1, 65536);
  in_range("context", s.n_ctx, 2, 1 << 20);
  if (s.n_embd % s.n_head != 0) Fail("train: ", s.n_head, " heads do not divide width ", s.n_embd);
  if (s.head_dim() % 2 != 0)
    Fail("train: head size ", s.head_dim(), " must be even (RoPE rotates pairs)");
  if (!(s.rms_eps > 0.0f) || !(s.rope_freq_base > 1.0f))
    Fail("train: RMS epsilon and RoPE base must be positive");
}

std::string DescribeTrainShape(const TrainShape& s) {
  return StrCat("dim ", s.n_embd, ", ", s.n_layer, " layers, ", s.n_head, " heads, FFN ", s.n_ff,
                ", vocab ", s.n_vocab, ", context ", s.n_ctx, s.tied_output ? ", tied output" : "");
}

ParamLayout::ParamLayout(const TrainShape& shape) : shape_(shape) {
  ValidateTrainShape(shape);
  const int64_t d = shape.n_embd, f = shape.n_ff, v = shape.n_vocab;
  token_embd_ = Add("token_embd.weight", {d, v}, true);
  for (int32_t i = 0; i < shape.n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    Layer l{};
    l.attn_norm = Add(p + "attn_norm.weight", {d}, false);
    l.wq = Add(p + "attn_q.weight", {d, d}, true);
    l.wk = Add(p + "attn_k.weight", {d, d}, true);
    l.wv = Add(p + "attn_v.weight", {d, d}, true);
    l.wo = Add(p + "attn_output.weight", {d, d}, true);
    l.ffn_norm = Add(p + "ffn_norm.weight", {d}, false);
    l.w_gate = Add(p + "ffn_gate.weight", {d, f}, true);
    l.w_up = Add(p + "ffn_up.weight", {d, f}, true);
    l.w_down = Add(p + "ffn_down.weight", {f, d}, true);
    layers_.push_back(l);
  }
  output_norm_ = Add("output_norm.weight", {d}, false);
  output_ = shape.tied_output ? token_embd_ : Add("output.weight", {d, v}, true);
}

int64_t ParamLayout::Add(std::string name, std::vector<int64_t> shape, bool is_matrix) {
  int64_t size = 1;
  for (int64_t n : shape) size *= n;
  const int64_t offset = total_;
  tensors_.push_back({std::move(name), std::move(shape), offset, size, is_matrix});
  total_ += size;
  return offset;
}

void ParamLayout::FreezeEmbeddingAndHead() {
  for (ParamTensor& t : tensors_) {
    if (t.offset == token_embd_ || t.offset == output_norm_ || t.offset == output_) t.frozen = true;
  }
}

bool ParamLayout::frozen(int64_t offset) const {
  for (const ParamTensor& t : tensors_) {
    if (t.offset == offset) return t.frozen;
  }
  return false;
}

const ParamTensor* ParamLayout::Find(std::string_view name) const {
  for (const ParamTensor& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

namespace {

uint64_t HashName(std::string_view s, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ (seed * 0x9E3779B97F4A7C15ull);
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  return h;
}

}  // namespace

std::vector<float> InitParams(const ParamLayout& layout, uint64_t seed) {
  std::vector<float> params(static_cast<std::size_t>(layout.total()));
  const float residual_scale = 1.0f / std::sqrt(2.0f * static_cast<float>(layout.shape().n_layer));
  for (const ParamTensor& t : layout.tensors()) {
    float* p = params.data() + t.offset;
    if (!t.is_matrix) {
      std::fill(p, p + t.size, 1.0f);
      continue;
    }
    const bool residual =
        t.name.ends_with("attn_output.weight") || t.name.ends_with("ffn_down.weight");
    const double stddev = 0.02 * (residual ? residual_scale : 1.0f);
    // Box-Muller over a SplitMix stream keyed by the tensor's name: the same seed gives the same
    // weights whatever the order tensors are created in.
    CorpusRng rng = CorpusRng::FromState(HashName(t.name, seed));
    for (int64_t i = 0; i < t.size; i += 2) {
      const double u1 = rng.Unit() + 0x1.0p-53;  // in (0, 1]: log(u1) is finite
      const double u2 = rng.Unit();
      const double r = std::sqrt(-2.0 * std::log(u1));
      p[i] = static_cast<float>(stddev * r * std::cos(2.0 * M_PI * u2));
      if (i + 1 < t.size) p[i + 1] = static_cast<float>(stddev * r * std::sin(2.0 * M_PI * u2));
    }
  }
  return params;
}

TrainGraph::TrainGraph(const ParamLayout& layout, int n_seq, int seq_len, ThreadPool* pool)
    : layout_(layout), pool_(pool), shape_(layout.shape()), n_seq_(n_seq), seq_len_(seq_len) {
  if (n_seq < 1 || seq_len < 1) Fail("train: batch of ", n_seq, " x ", seq_len, " is empty");
  if (seq_len > shape_.n_ctx)
    Fail("train: sequence length ", seq_len, " exceeds the context ", shape_.n_ctx);
  const std::size_t R = static_cast<std::size_t>(rows());
  const std::size_t D = shape_.n_embd, F = shape_.n_ff, V = shape_.n_vocab, T = seq_len;
  rope_ = {.head_dim = shape_.head_dim(),
           .n_rot = shape_.head_dim(),
           .freq_base = shape_.rope_freq_base};
  rope_table_ = RopeAngleTable(rope_, seq_len, /*inverse=*/false);
  rope_inverse_ = RopeAngleTable(rope_, seq_len, /*inverse=*/true);
  positions_.resize(R);
  for (std::size_t r = 0; r < R; ++r) positions_[r] = static_cast<int32_t>(r % T);
  tokens_.resize(R);
  acts_.resize(static_cast<std::size_t>(shape_.n_layer));
  for (LayerActs& a : acts_) {
    for (auto* v : {&a.x_in, &a.h1, &a.q, &a.k, &a.v, &a.att, &a.x_mid, &a.h2}) v->resize(R * D);
    for (auto* v : {&a.gate, &a.up, &a.act}) v->resize(R * F);
    a.rstd1.resize(R);
    a.rstd2.resize(R);
    a.probs.resize(static_cast<std::size_t>(n_seq) * shape_.n_head * T * T);
  }
  x_final_.resize(R * D);
  h_final_.resize(R * D);
  rstd_final_.resize(R);
  logits_.resize(R * V);
  dlogits_.resize(R * V);
  for (auto* v : {&dx_, &dx_mid_, &dh_, &datt_, &dq_, &dk_, &dv_}) v->resize(R * D);
  for (auto* v : {&dact_, &dgate_, &dup_}) v->resize(R * F);
  dprobs_.resize(T * T * static_cast<std::size_t>(PoolParts(pool)));
}

double TrainGraph::Forward(const float* params, const int32_t* tokens, const int32_t* targets,
                           const float* teacher_logits) {
  const int R = rows(), D = shape_.n_embd, F = shape_.n_ff, V = shape_.n_vocab;
  const AttentionShape att{n_seq_, seq_len_, shape_.n_head, shape_.head_dim()};
  for (int r = 0; r < R; ++r) {
    if (tokens[r] < 0 || tokens[r] >= V)
      Fail("train: token id ", tokens[r], " is outside the vocabulary of ", V);
    tokens_[static_cast<std::size_t>(r)] = tokens[r];
  }
  // Token embeddings into the first layer's input.
  float* x = acts_.empty() ? x_final_.data() : acts_[0].x_in.data();
  for (int r = 0; r < R; ++r) {
    std::memcpy(x + static_cast<int64_t>(r) * D,
                params + layout_.token_embd() + static_cast<int64_t>(tokens[r]) * D,
                sizeof(float) * static_cast<std::size_t>(D));
  }
  for (int i = 0; i < shape_.n_layer; ++i) {
    const ParamLayout::Layer& w = layout_.layer(i);
    LayerActs& a = acts_[static_cast<std::size_t>(i)];
    RmsNormForward(a.x_in.data(), params + w.attn_norm, a.h1.data(), a.rstd1.data(), R, D,
                   shape_.rms_eps, pool_);
    LinearForward(a.h1.data(), params + w.wq, a.q.data(), R, D, D, pool_);
    LinearForward(a.h1.data(), params + w.wk, a.k.data(), R, D, D, pool_);
    LinearForward(a.h1.data(), params + w.wv, a.v.data(), R, D, D, pool_);
    RopeRotate(rope_, rope_table_.data(), positions_, a.q.data(), shape_.n_head, pool_);
    RopeRotate(rope_, rope_table_.data(), positions_, a.k.data(), shape_.n_head, pool_);
    CausalAttentionForward(att, a.q.data(), a.k.data(), a.v.data(), a.probs.data(), a.att.data(),
                           pool_);
    a.x_mid = a.x_in;
    ParallelSgemm(pool_, false, true, R, D, D, 1.0f, a.att.data(), D, params + w.wo, D, 1.0f,
                  a.x_mid.data(), D);
    RmsNormForward(a.x_mid.data(), params + w.ffn_norm, a.h2.data(), a.rstd2.data(), R, D,
                   shape_.rms_eps, pool_);
    LinearForward(a.h2.data(), params + w.w_gate, a.gate.data(), R, D, F, pool_);
    LinearForward(a.h2.data(), params + w.w_up, a.up.data(), R, D, F, pool_);
    SwiGluForward(a.gate.data(), a.up.data(), a.act.data(), static_cast<int64_t>(R) * F, pool_);
    float* next = i + 1 < shape_.n_layer ? acts_[static_cast<std::size_t>(i) + 1].x_in.data()
                                         : x_final_.data();
    std::memcpy(next, a.x_mid.data(), sizeof(float) * a.x_mid.size());
    ParallelSgemm(pool_, false, true, R, D, F, 1.0f, a.act.data(), F, params + w.w_down, F, 1.0f,
                  next, D);
  }
  RmsNormForward(x_final_.data(), params + layout_.output_norm(), h_final_.data(),
                 rstd_final_.data(), R, D, shape_.rms_eps, pool_);
  LinearForward(h_final_.data(), params + layout_.output(), logits_.data(), R, D, V, pool_);

  has_loss_ = targets != nullptr || teacher_logits != nullptr;
  if (teacher_logits)
    return DistillKl(logits_.data(), teacher_logits, dlogits_.data(), R, V, pool_);
  if (targets) return CrossEntropy(logits_.data(), targets, dlogits_.data(), R, V, pool_);
  return 0.0;
}

void TrainGraph::Backward(const float* params, float* grads) {
  GROVE_CHECK(has_loss_, "Backward needs a Forward with targets or teacher logits");
  const int R = rows(), D = shape_.n_embd, V = shape_.n_vocab;
  auto zero = [](std::vector<float>& v) { std::fill(v.begin(), v.end(), 0.0f); };
  auto grad = [&](int64_t offset) { return layout_.frozen(offset) ? nullptr : grads + offset; };

  zero(dh_);
  LinearBackward(h_final_.data(), params + layout_.output(), dlogits_.data(), dh_.data(),
                 grad(layout_.output()), R, D, V, pool_);
  zero(dx_);
  RmsNormBackward(x_final_.data(), params + layout_.output_norm(), rstd_final_.data(), dh_.data(),
                  dx_.data(), grad(layout_.output_norm()), R, D, pool_);
  for (int i = shape_.n_layer - 1; i >= 0; --i) LayerBackward(i, params, grads);
  if (layout_.frozen(layout_.token_embd())) return;
  // Rows of one token add into one embedding row: split by columns, so no two threads collide.
  float* g_embd = grads + layout_.token_embd();
  ForEachRange(pool_, D, [&](int, int64_t j0, int64_t j1) {
    for (int r = 0; r < R; ++r) {
      float* row = g_embd + static_cast<int64_t>(tokens_[static_cast<std::size_t>(r)]) * D;
      const float* d = dx_.data() + static_cast<int64_t>(r) * D;
      for (int64_t j = j0; j < j1; ++j) row[j] += d[j];
    }
  });
}

void TrainGraph::LayerBackward(int i, const float* params, float* grads) {
  const int R = rows(), D = shape_.n_embd, F = shape_.n_ff;
  const AttentionShape att{n_seq_, seq_len_, shape_.n_head, shape_.head_dim()};
  auto zero = [](std::vector<float>& v) { std::fill(v.begin(), v.end(), 0.0f); };
  const ParamLayout::Layer& w = layout_.layer(i);
  LayerActs& a = acts_[static_cast<std::size_t>(i)];
  // x_next = x_mid + act W_down^T, with dx_ = d(x_next).
  zero(dact_);
  LinearBackward(a.act.data(), params + w.w_down, dx_.data(), dact_.data(), grads + w.w_down, R, F,
                 D, pool_);
  SwiGluBackward(a.gate.data(), a.up.data(), dact_.data(), dgate_.data(), dup_.data(),
                 static_cast<int64_t>(R) * F, pool_);
  zero(dh_);
  LinearBackward(a.h2.data(), params + w.w_gate, dgate_.data(), dh_.data(), grads + w.w_gate, R, D,
                 F, pool_);
  LinearBackward(a.h2.data(), params + w.w_up, dup_.data(), dh_.data(), grads + w.w_up, R, D, F,
                 pool_);
  dx_mid_ = dx_;
  RmsNormBackward(a.x_mid.data(), params + w.ffn_norm, a.rstd2.data(), dh_.data(), dx_mid_.data(),
                  grads + w.ffn_norm, R, D, pool_);
  // x_mid = x_in + att W_o^T.
  zero(datt_);
  LinearBackward(a.att.data(), params + w.wo, dx_mid_.data(), datt_.data(), grads + w.wo, R, D, D,
                 pool_);
  CausalAttentionBackward(att, a.q.data(), a.k.data(), a.v.data(), a.probs.data(), datt_.data(),
                          dq_.data(), dk_.data(), dv_.data(), dprobs_.data(), pool_);
  RopeRotate(rope_, rope_inverse_.data(), positions_, dq_.data(), shape_.n_head, pool_);
  RopeRotate(rope_, rope_inverse_.data(), positions_, dk_.data(), shape_.n_head, pool_);
  zero(dh_);
  LinearBackward(a.h1.data(), params + w.wq, dq_.data(), dh_.data(), grads + w.wq, R, D, D, pool_);
  LinearBackward(a.h1.data(), params + w.wk, dk_.data(), dh_.data(), grads + w.wk, R, D, D, pool_);
  LinearBackward(a.h1.data(), params + w.wv, dv_.data(), dh_.data(), grads + w.wv, R, D, D, pool_);
  dx_ = dx_mid_;
  RmsNormBackward(a.x_in.data(), params + w.attn_norm, a.rstd1.data(), dh_.data(), dx_.data(),
                  grads + w.attn_norm, R, D, pool_);
}

}  // namespace grove
