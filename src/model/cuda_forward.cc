#include "model/cuda_forward.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "cuda/kernels.h"
#include "model/batch_layout.h"
#include "model/kv_cache_pool.h"
#include "model/model_parameters.h"
#include "model/rotary_tables.h"

namespace grove {
namespace {

// Graphs kept per context: a decode step, a few tree sizes and prompt chunks. Shapes past it run
// without a graph (launch by launch), which gives the same bits.
constexpr std::size_t kMaxGraphs = 64;

std::size_t Floats(int64_t n) { return static_cast<std::size_t>(n) * sizeof(float); }

// The layer kinds this backend has an op for (layer_kind.h).
constexpr MixerKind kMixers[] = {MixerKind::kAttention};
constexpr FeedForwardKind kFeedForwards[] = {FeedForwardKind::kGated};

}  // namespace

void CudaForward::CheckSupported(const ModelConfig& c) {
  // What the model needs comes before whether a GPU is there, so that a model the GPU path cannot
  // run (a hybrid file) is named as such on any machine.
  CheckLayerKinds(c.layer_kinds, {.mixers = kMixers, .feed_forwards = kFeedForwards}, "cuda");
  if (c.family->gated_attention) {
    Fail("cuda: the gated attention of '", c.arch,
         "' is not on the GPU yet; run it on the CPU (--device cpu)");
  }
  if (c.family->attention_sinks || c.family->output_bias ||
      c.family->activation == GateActivation::kSwigluOai) {
    Fail("cuda: the attention sinks, output bias and clamped SwiGLU of '", c.arch,
         "' are not on the GPU yet; run it on the CPU (--device cpu)");
  }
  if (cuda::DeviceCount() == 0) Fail("cuda: ", cuda::NoDeviceReason());
  const std::string what = StrCat(c.arch, " model");
  if (c.sliding_window > 0 || c.local_rope) {
    Fail("cuda: sliding-window attention (", c.arch,
         ") is not on the GPU yet; run it on the CPU (--device cpu)");
  }
  if (c.head_dim > 256) Fail("cuda: heads of ", c.head_dim, " dimensions (at most 256 on the GPU)");
  if (c.n_embd % 4 != 0 || c.n_ff % 4 != 0 || c.q_dim() % 4 != 0 || c.kv_dim() > 4096 ||
      c.n_rot % 2 != 0) {
    Fail("cuda: the ", what, "'s widths (", c.n_embd, ", ", c.n_ff, ", ", c.kv_dim(),
         ") are not ones the GPU kernels take");
  }
}

CudaForward::CudaForward(const ModelParameters& parameters, KvCachePool& kv, int32_t max_batch,
                         int64_t extra_capacity)
    : config_(parameters.config()), max_batch_(max_batch), extra_capacity_(extra_capacity) {
  CheckSupported(config_);
  weights_ = UploadWeights(parameters);
  const ModelConfig& c = config_;
  const int64_t b = max_batch;
  x_ = cuda::DeviceBuffer(Floats(b * c.n_embd));
  xb_ = cuda::DeviceBuffer(Floats(b * c.n_embd));
  q_ = cuda::DeviceBuffer(Floats(b * c.q_dim()));
  k_ = cuda::DeviceBuffer(Floats(b * c.kv_dim()));
  v_ = cuda::DeviceBuffer(Floats(b * c.kv_dim()));
  att_ = cuda::DeviceBuffer(Floats(b * c.q_dim()));
  gate_ = cuda::DeviceBuffer(Floats(b * c.n_ff));
  up_ = cuda::DeviceBuffer(Floats(b * c.n_ff));
  proj_ = cuda::DeviceBuffer(Floats(b * c.n_embd));
  logits_ = cuda::DeviceBuffer(Floats(b * c.n_vocab));
  const auto ub = static_cast<std::size_t>(b);
  staged_.seq = 0;
  staged_.slot = ub;
  staged_.prefix_len = 2 * ub;
  staged_.extra_begin = 3 * ub;
  staged_.out_rows = 4 * ub + 1;
  staged_.extra = 5 * ub + 1;
  staged_.ints = staged_.extra + static_cast<std::size_t>(extra_capacity);
  ints_ = cuda::DeviceBuffer(sizeof(int32_t) * staged_.ints);
  ints_host_ = cuda::HostBuffer(sizeof(int32_t) * staged_.ints);
  cos_sin_ = cuda::DeviceBuffer(Floats(b * std::max(c.n_rot, 2)));
  cos_sin_host_ = cuda::HostBuffer(cos_sin_.bytes());
  x_host_ = cuda::HostBuffer(x_.bytes());
  const int32_t widest = std::max({c.n_embd, c.n_ff, c.q_dim()});
  const auto padded = static_cast<int32_t>((widest + cuda::kMatMulRowAlign - 1) /
                                           cuda::kMatMulRowAlign * cuda::kMatMulRowAlign);
  act16_ =
      cuda::DeviceBuffer(static_cast<std::size_t>(cuda::MatMulScratchBytes(padded, max_batch)));
  std::vector<float*> keys;
  std::vector<float*> values;
  for (int32_t s = 0; s < kv.size(); ++s) {
    keys.push_back(kv.cache(s).device_keys());
    values.push_back(kv.cache(s).device_values());
  }
  k_table_ = cuda::DeviceBuffer(sizeof(float*) * keys.size());
  v_table_ = cuda::DeviceBuffer(sizeof(float*) * values.size());
  cuda::CopyToDevice(k_table_.data(), keys.data(), k_table_.bytes());
  cuda::CopyToDevice(v_table_.data(), values.data(), v_table_.bytes());
  cuda::Sync();
  kv_table_ = cuda::KvTable{.k = k_table_.as<float* const>(),
                            .v = v_table_.as<float* const>(),
                            .layer_stride = static_cast<int64_t>(kv.cache(0).n_ctx()) * c.kv_dim(),
                            .kv_dim = c.kv_dim()};
  // GROVE_CUDA_GRAPHS=0 launches kernel by kernel (same bits; for profilers and debugging).
  const char* graphs = std::getenv("GROVE_CUDA_GRAPHS");
  graphs_enabled_ = graphs == nullptr || std::strcmp(graphs, "0") != 0;
  // GROVE_CUDA_MATMUL=0..5 forces one tiling of the matrix products (cuda/kernels.h; the same
  // bits, for timing them against each other).
  if (const char* tiling = std::getenv("GROVE_CUDA_MATMUL"))
    cuda::SetMatMulTiling(std::atoi(tiling));
}

CudaForward::~CudaForward() { DropGraphs(); }

void CudaForward::DropGraphs() {
  for (auto& [shape, graph] : graphs_) cuda::DestroyGraph(graph);
  graphs_.clear();
}

void CudaForward::ReserveLogits(int32_t n_out) {
  if (n_out <= host_logits_rows_) return;
  // The graphs copy into this buffer: a new one invalidates them.
  DropGraphs();
  int32_t rows = 1;
  while (rows < n_out) rows *= 2;
  rows = std::min(rows, max_batch_);
  host_logits_ = cuda::HostBuffer(Floats(int64_t{rows} * config_.n_vocab));
  host_logits_rows_ = rows;
}

uint64_t CudaForward::activation_bytes() const {
  uint64_t n = act16_.bytes() + ints_.bytes() + cos_sin_.bytes() + ints_host_.bytes() +
               cos_sin_host_.bytes() + x_host_.bytes() + host_logits_.bytes();
  for (const cuda::DeviceBuffer* b :
       {&x_, &xb_, &q_, &k_, &v_, &att_, &gate_, &up_, &proj_, &logits_})
    n += b->bytes();
  return n;
}

void CudaForward::Upload(const ForwardInput& input) {
  const BatchLayout& layout = input.layout;
  const int32_t n = layout.size();
  // The previous forward ended with a Sync, so the staging buffers are free.
  auto* ints = ints_host_.as<int32_t>();
  const auto un = static_cast<std::size_t>(n);
  const auto n_extra = static_cast<std::size_t>(layout.extra_begin()[n]);
  std::memcpy(ints + staged_.seq, input.batch.seq_ids.data(), sizeof(int32_t) * un);
  std::memcpy(ints + staged_.slot, layout.slot(), sizeof(int32_t) * un);
  std::memcpy(ints + staged_.prefix_len, layout.prefix_len(), sizeof(int32_t) * un);
  std::memcpy(ints + staged_.extra_begin, layout.extra_begin(), sizeof(int32_t) * (un + 1));
  std::memcpy(ints + staged_.out_rows, layout.out_rows(),
              sizeof(int32_t) * static_cast<std::size_t>(layout.n_out()));
  std::memcpy(ints + staged_.extra, layout.extra(), sizeof(int32_t) * n_extra);
  cuda::CopyToDevice(ints_.data(), ints, sizeof(int32_t) * (staged_.extra + n_extra));
  const std::size_t rot_bytes = Floats(int64_t{n} * config_.n_rot);
  std::memcpy(cos_sin_host_.as<float>(), input.rotary.batch_rows(0), rot_bytes);
  cuda::CopyToDevice(cos_sin_.data(), cos_sin_host_.as<float>(), rot_bytes);
  cuda::CopyToDevice(x_.data(), x_host_.as<float>(), Floats(int64_t{n} * config_.n_embd));
}

std::span<const float> CudaForward::Run(const ForwardInput& input, int32_t first_layer,
                                        int32_t last_layer) {
  const int32_t n = input.layout.size();
  const int32_t n_out = input.layout.n_out();
  GROVE_CHECK(first_layer == 0 && last_layer == config_.n_layer);
  GROVE_CHECK(n >= 1 && n <= max_batch_ && input.layout.extra_begin()[n] <= extra_capacity_);
  ReserveLogits(std::max(n_out, 1));
  Upload(input);
  const std::pair<int32_t, int32_t> shape{n, n_out};
  auto found = graphs_.find(shape);
  if (found != graphs_.end()) {
    cuda::Launch(found->second);
  } else if (graphs_enabled_ && graphs_.size() < kMaxGraphs) {
    cuda::BeginCapture();
    try {
      Enqueue(n, n_out);
    } catch (...) {
      cuda::EndCapture();
      throw;
    }
    void* graph = cuda::EndCapture();
    graphs_[shape] = graph;
    cuda::Launch(graph);
  } else {
    Enqueue(n, n_out);
  }
  cuda::Sync();
  return {host_logits_.as<float>(), static_cast<std::size_t>(n_out) * config_.n_vocab};
}

std::span<const float> CudaForward::hidden_states(int32_t n) const {
  hidden_.resize(static_cast<std::size_t>(n) * config_.n_embd);
  cuda::CopyToHost(hidden_.data(), x_.data(), Floats(int64_t{n} * config_.n_embd));
  cuda::Sync();
  return hidden_;
}

void CudaForward::Enqueue(int32_t n, int32_t n_out) {
  const ModelConfig& c = config_;
  for (int32_t layer = 0; layer < c.n_layer; ++layer) {
    const CudaLayerWeights& w = weights_->layers[static_cast<std::size_t>(layer)];
    const LayerKind& kind = c.layer_kinds[static_cast<std::size_t>(layer)];
    cuda::RmsNorm(x_.as<float>(), nullptr, w.attn_norm, xb_.as<float>(), n, c.n_embd, c.rms_eps);
    EnqueueMixer(w, layer, n, kind.mixer);
    cuda::AddResidual(x_.as<float>(), proj_.as<float>(), w.attn_post_norm, n, c.n_embd, c.rms_eps);
    cuda::RmsNorm(x_.as<float>(), nullptr, w.ffn_norm, xb_.as<float>(), n, c.n_embd, c.rms_eps);
    EnqueueFeedForward(w, n, kind.feed_forward);
    cuda::AddResidual(x_.as<float>(), proj_.as<float>(), w.ffn_post_norm, n, c.n_embd, c.rms_eps);
  }
  if (n_out > 0) EnqueueLogits(n_out);
}

void CudaForward::EnqueueMixer(const CudaLayerWeights& w, int32_t layer, int32_t n,
                               MixerKind kind) {
  switch (kind) {
    case MixerKind::kAttention:
      return EnqueueAttention(w, layer, n);
    case MixerKind::kGatedDeltaNet:
      // Refused at load (CheckSupported: kMixers lacks it), so never reached.
      Fail("cuda: a Gated DeltaNet layer has no op on this backend");
  }
}

void CudaForward::EnqueueFeedForward(const CudaLayerWeights& w, int32_t n, FeedForwardKind kind) {
  switch (kind) {
    case FeedForwardKind::kGated:
      return EnqueueGatedFeedForward(w, n);
    case FeedForwardKind::kExperts:
      // Refused at load (CheckSupported: kFeedForwards lacks it), so never reached.
      Fail("cuda: a mixture of experts has no op on this backend");
  }
}

void CudaForward::EnqueueAttention(const CudaLayerWeights& w, int32_t layer, int32_t n) {
  const ModelConfig& c = config_;
  float* xb = xb_.as<float>();
  float* q = q_.as<float>();
  float* k = k_.as<float>();
  float* v = v_.as<float>();
  void* scratch = act16_.data();
  cuda::MatMul(w.wq, xb, n, c.n_embd, q, c.q_dim(), scratch);
  cuda::MatMul(w.wk, xb, n, c.n_embd, k, c.kv_dim(), scratch);
  cuda::MatMul(w.wv, xb, n, c.n_embd, v, c.kv_dim(), scratch);
  if (w.bq) cuda::AddBias(q, w.bq, n, c.q_dim());
  if (w.bk) cuda::AddBias(k, w.bk, n, c.kv_dim());
  if (w.bv) cuda::AddBias(v, w.bv, n, c.kv_dim());
  cuda::RotateAndStore({.q = q,
                        .k = k,
                        .v = v,
                        .q_norm = w.q_norm,
                        .k_norm = w.k_norm,
                        .cos_sin = cos_sin_.as<float>(),
                        .seq = DeviceInts(staged_.seq),
                        .slot = DeviceInts(staged_.slot),
                        .n = n,
                        .n_head = c.n_head,
                        .n_head_kv = c.n_head_kv,
                        .head_dim = c.head_dim,
                        .n_rot = c.n_rot,
                        .adjacent = c.family->rope == RopePairing::kAdjacent,
                        .eps = c.rms_eps,
                        .layer = layer,
                        .kv = kv_table_});
  cuda::Attention({.q = q,
                   .out = att_.as<float>(),
                   .seq = DeviceInts(staged_.seq),
                   .prefix_len = DeviceInts(staged_.prefix_len),
                   .extra_begin = DeviceInts(staged_.extra_begin),
                   .extra = DeviceInts(staged_.extra),
                   .n = n,
                   .n_head = c.n_head,
                   .n_head_kv = c.n_head_kv,
                   .head_dim = c.head_dim,
                   .scale = c.query_scale,
                   .layer = layer,
                   .kv = kv_table_});
  cuda::MatMul(w.wo, att_.as<float>(), n, c.q_dim(), proj_.as<float>(), c.n_embd, scratch);
}

void CudaForward::EnqueueGatedFeedForward(const CudaLayerWeights& w, int32_t n) {
  const ModelConfig& c = config_;
  float* xb = xb_.as<float>();
  float* gate = gate_.as<float>();
  float* up = up_.as<float>();
  void* scratch = act16_.data();
  cuda::MatMul(w.w_gate, xb, n, c.n_embd, gate, c.n_ff, scratch);
  cuda::MatMul(w.w_up, xb, n, c.n_embd, up, c.n_ff, scratch);
  cuda::GatedActivation(c.family->activation == GateActivation::kSilu ? 0 : 1, gate, up,
                        int64_t{n} * c.n_ff);
  cuda::MatMul(w.w_down, gate, n, c.n_ff, proj_.as<float>(), c.n_embd, scratch);
}

void CudaForward::EnqueueLogits(int32_t n_out) {
  const ModelConfig& c = config_;
  float* logits = logits_.as<float>();
  cuda::RmsNorm(x_.as<float>(), DeviceInts(staged_.out_rows), weights_->output_norm,
                xb_.as<float>(), n_out, c.n_embd, c.rms_eps);
  cuda::MatMul(weights_->output, xb_.as<float>(), n_out, c.n_embd, logits, c.n_vocab,
               act16_.data());
  if (c.logit_softcap > 0.0f) cuda::SoftCap(logits, int64_t{n_out} * c.n_vocab, c.logit_softcap);
  cuda::CopyToHost(host_logits_.as<float>(), logits, Floats(int64_t{n_out} * c.n_vocab));
}

}  // namespace grove
