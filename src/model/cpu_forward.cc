#include "model/cpu_forward.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "base/error.h"
#include "model/batch_layout.h"
#include "model/config.h"
#include "model/kv_cache_pool.h"
#include "model/model_parameters.h"
#include "model/recurrent_state.h"
#include "model/weights.h"
#include "ops/attention.h"
#include "ops/feed_forward.h"
#include "ops/norm.h"

namespace grove {

namespace {

// The layer kinds this backend has an op for (layer_kind.h).
constexpr MixerKind kMixers[] = {MixerKind::kAttention, MixerKind::kGatedDeltaNet};
constexpr FeedForwardKind kFeedForwards[] = {FeedForwardKind::kGated, FeedForwardKind::kExperts};

}  // namespace

void CpuForward::CheckSupported(const ModelConfig& config) {
  CheckLayerKinds(config.layer_kinds, {.mixers = kMixers, .feed_forwards = kFeedForwards}, "cpu");
}

CpuForward::CpuForward(const ModelParameters& parameters, KvCachePool& kv, ThreadPool& pool,
                       int32_t max_batch, int32_t n_ctx)
    : config_(parameters.config()),
      weights_(parameters.weights()),
      kv_(kv),
      pool_(pool),
      // Each query's scores row and its softmax sum, and a sink's logit (ops/attention.h).
      scores_per_thread_(static_cast<std::size_t>(kMaxQueryGroup) *
                         (static_cast<std::size_t>(n_ctx) + 2)) {
  CheckSupported(config_);
  const ModelConfig& c = config_;
  const auto b = static_cast<std::size_t>(max_batch);
  matmul_scratch_ =
      MatMulScratch(max_batch, std::max<int64_t>({c.n_embd, c.n_ff, c.q_dim(), c.gdn.value_dim()}));
  if (c.family->gated_attention) {
    qg_.Resize(b * 2 * c.q_dim());
    gate_q_.Resize(b * c.q_dim());
  }
  if (c.has_recurrent_layers()) {
    // The states live beside the caches, so that a fork of a sequence forks its state too.
    kv.SetRecurrentStates(std::make_shared<RecurrentStates>(
        c, weights_, parameters.part().first_layer, parameters.part().last_layer));
    recurrent_ = kv.recurrent();
    gdn_qkv_.Resize(b * c.gdn.conv_dim());
    gdn_z_.Resize(b * c.gdn.value_dim());
    gdn_beta_.Resize(b * c.gdn.n_v_heads);
    gdn_alpha_.Resize(b * c.gdn.n_v_heads);
    gdn_out_.Resize(b * c.gdn.value_dim());
  }
  if (c.n_expert > 0) {
    experts_ = ExpertScratch(max_batch, c.n_expert, c.n_expert_used, c.n_embd, c.n_ff_expert);
  }
  if (c.n_ff_shared > 0) shared_.Resize(b * c.n_embd);
  x_.Resize(b * c.n_embd);
  xb_.Resize(b * c.n_embd);
  q_.Resize(b * c.q_dim());
  k_.Resize(b * c.kv_dim());
  v_.Resize(b * c.kv_dim());
  att_.Resize(b * c.q_dim());
  gate_.Resize(b * c.n_ff);
  up_.Resize(b * c.n_ff);
  proj_.Resize(b * c.n_embd);
  scores_.Resize(static_cast<std::size_t>(pool.size()) * scores_per_thread_);
  logits_.Resize(b * c.n_vocab);
  // Fault in now the pages of the forward's state that batches of up to kPrefaultedRows rows use
  // (decoding, a draft's levels, small trees), so that most steps never pay for them in the middle
  // of decoding; larger batches fault in their pages when they first come. Zeroing all of it cost
  // a 16-token run of the bundled target a tenth of its time (issue 30).
  const std::size_t rows = std::min(b, kPrefaultedRows);
  for (AlignedBuffer<float>* f :
       {&x_, &xb_, &q_, &k_, &v_, &att_, &gate_, &up_, &proj_, &logits_, &shared_})
    f->ZeroFirst(f->size() / b * rows);
  scores_.Zero();
  experts_.Prefault(static_cast<int32_t>(rows));
  std::memset(matmul_scratch_.bytes(), 0,
              std::min(matmul_scratch_.size(), matmul_scratch_.size() / b * rows));
}

uint64_t CpuForward::activation_bytes() const {
  uint64_t n = matmul_scratch_.size() + experts_.bytes();
  for (const AlignedBuffer<float>* f :
       {&x_, &xb_, &q_, &k_, &v_, &att_, &gate_, &up_, &proj_, &scores_, &logits_, &qg_, &gate_q_,
        &gdn_qkv_, &gdn_z_, &gdn_beta_, &gdn_alpha_, &gdn_out_, &shared_}) {
    n += f->size() * sizeof(float);
  }
  return n;
}

std::span<const float> CpuForward::Run(const ForwardInput& input, int32_t first_layer,
                                       int32_t last_layer) {
  // The recurrent states were prepared with the batch (Model::PrepareBatch).
  experts_read_ = {};
  for (int32_t layer = first_layer; layer < last_layer; ++layer) Layer(input, layer);
  if (last_layer < config_.n_layer) return hidden_states(input.layout.size());
  return Logits(input);
}

std::span<const float> CpuForward::hidden_states(int32_t n) const {
  return {x_.data(), static_cast<std::size_t>(n) * config_.n_embd};
}

// One block of every family, as the equations read (family.h says which parts a family has):
//   h = x + PostNorm(Mixer(Norm(x)))
//   x = h + PostNorm(FeedForward(Norm(h)))
// The mixer is attention (cpu_attention.cc): q, k, v projected (with biases in Qwen2), each head
// of q and k normed (Qwen3, Gemma 3), rotated, attending over the cache (through the window on a
// local layer). PostNorm is Gemma 3's; the others add the sub-layer's output as it is.
void CpuForward::Layer(const ForwardInput& input, int32_t layer) {
  const ModelConfig& c = config_;
  const LayerWeights& w = weights_.layers[layer];
  const LayerKind& kind = c.layer_kinds[layer];
  const int32_t n = input.layout.size();

  RmsNormRows(x_.data(), w.attn_norm.data(), xb_.data(), n, c.n_embd, c.rms_eps, pool_);
  Mixer(input, layer, kind.mixer);
  AddResidual(w.attn_post_norm, n);

  RmsNormRows(x_.data(), w.ffn_norm.data(), xb_.data(), n, c.n_embd, c.rms_eps, pool_);
  FeedForward(w, n, kind.feed_forward);
  AddResidual(w.ffn_post_norm, n);
}

void CpuForward::Mixer(const ForwardInput& input, int32_t layer, MixerKind kind) {
  switch (kind) {
    case MixerKind::kAttention:
      return Attention(input, layer);
    case MixerKind::kGatedDeltaNet:
      return GatedDeltaNet(input, layer);
  }
}

void CpuForward::FeedForward(const LayerWeights& w, int32_t n, FeedForwardKind kind) {
  switch (kind) {
    case FeedForwardKind::kGated:
      return GatedFeedForward(w, n);
    case FeedForwardKind::kExperts:
      return ExpertFeedForward(w, n);
  }
}

void CpuForward::GatedFeedForward(const LayerWeights& w, int32_t n) {
  grove::GatedFeedForward({w.w_gate, w.w_up, w.w_down, config_.family->activation}, xb_.data(), n,
                          gate_.data(), up_.data(), proj_.data(), matmul_scratch_, pool_);
}

void CpuForward::ExpertFeedForward(const LayerWeights& w, int32_t n) {
  grove::ExpertFeedForward(w.experts, config_.family->activation, xb_.data(), n, proj_.data(),
                           experts_, matmul_scratch_, pool_);
  experts_read_.experts += experts_.last_experts_read();
  ++experts_read_.layers;
  if (w.shared_expert_gate.empty()) return;
  // The shared expert beside the routed ones (Qwen3.5-MoE, as llama.cpp's qwen35moe builder):
  // out += sigmoid(x . ffn_gate_inp_shexp) * shared(x). Each row's gate and sum read only that
  // row, and the dense feed-forward's rows do not depend on the batch, so neither does a row.
  grove::GatedFeedForward({w.w_gate, w.w_up, w.w_down, config_.family->activation}, xb_.data(), n,
                          gate_.data(), up_.data(), shared_.data(), matmul_scratch_, pool_);
  const int64_t d = config_.n_embd;
  const float* g = w.shared_expert_gate.data();
  for (int64_t r = 0; r < n; ++r) {
    const float* x = xb_.data() + r * d;
    float logit = 0.0f;
    for (int64_t i = 0; i < d; ++i) logit += x[i] * g[i];
    const float gate = 1.0f / (1.0f + std::exp(-logit));
    float* o = proj_.data() + r * d;
    const float* y = shared_.data() + r * d;
    for (int64_t i = 0; i < d; ++i) o[i] += gate * y[i];
  }
}

void CpuForward::AddResidual(const std::vector<float>& post_norm, int32_t n) {
  const std::size_t d = config_.n_embd;
  if (!post_norm.empty()) {
    RmsNormRows(proj_.data(), post_norm.data(), proj_.data(), n, config_.n_embd, config_.rms_eps,
                pool_);
  }
  for (std::size_t j = 0; j < static_cast<std::size_t>(n) * d; ++j) x_[j] += proj_[j];
}

std::span<const float> CpuForward::Logits(const ForwardInput& input) {
  // Final norm and logits only for the rows that asked: a prefill of 512 tokens computes one row.
  const ModelConfig& c = config_;
  const std::size_t row = c.n_embd;
  const int32_t n_out = input.layout.n_out();
  for (int32_t r = 0; r < n_out; ++r) {
    RmsNorm(x_.data() + static_cast<std::size_t>(input.layout.out_rows()[r]) * row,
            weights_.output_norm.data(), xb_.data() + static_cast<std::size_t>(r) * row, c.n_embd,
            c.rms_eps);
  }
  if (n_out == 0) return {};
  MatMul(weights_.output, xb_.data(), n_out, logits_.data(), matmul_scratch_, pool_);
  const std::size_t n_logits = static_cast<std::size_t>(n_out) * c.n_vocab;
  if (c.logit_softcap > 0.0f) {
    const float cap = c.logit_softcap;
    for (std::size_t j = 0; j < n_logits; ++j) logits_[j] = cap * std::tanh(logits_[j] / cap);
  }
  return {logits_.data(), n_logits};
}

}  // namespace grove
