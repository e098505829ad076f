// The forward pass on the CPU (forward_backend.h): every layer of every family grove runs, as one
// short layer function over the ops of this machine's kernels (ops/, kernels/), the output head,
// and the activations and scratch they need, sized at load so that the token loop never
// allocates. Threading is decided in the ops (ops/parallel.h), never here.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/aligned_buffer.h"
#include "model/forward_backend.h"
#include "model/layer_kind.h"
#include "ops/experts.h"
#include "ops/matmul.h"

namespace grove {

class RecurrentStates;
struct LayerWeights;
struct ModelWeights;

class CpuForward final : public ForwardBackend {
 public:
  CpuForward(const ModelParameters& parameters, KvCachePool& kv, ThreadPool& pool,
             int32_t max_batch, int32_t n_ctx);

  // Throws grove::Error naming the first layer whose kind this backend has no op for.
  static void CheckSupported(const ModelConfig& config);

  ComputeDevice device() const override { return ComputeDevice::kCpu; }
  bool runs_partial_forwards() const override { return true; }
  float* input_rows() override { return x_.data(); }
  std::span<const float> Run(const ForwardInput& input, int32_t first_layer,
                             int32_t last_layer) override;
  std::span<const float> hidden_states(int32_t n) const override;
  uint64_t activation_bytes() const override;
  ExpertsRead experts_read() const override { return experts_read_; }

 private:
  // One block of every family, as the equations read (cpu_forward.cc).
  void Layer(const ForwardInput& input, int32_t layer);
  // The layer kinds (layer_kind.h), each from xb_ (the normalised input) into proj_.
  void Mixer(const ForwardInput& input, int32_t layer, MixerKind kind);
  void FeedForward(const LayerWeights& w, int32_t n, FeedForwardKind kind);
  void Attention(const ForwardInput& input, int32_t layer);  // cpu_attention.cc
  void GatedFeedForward(const LayerWeights& w, int32_t n);
  // Gated DeltaNet (cpu_gated_delta_net.cc): the projections, each token through its sequence's
  // recurrent state in batch order, the output projection.
  void GatedDeltaNet(const ForwardInput& input, int32_t layer);
  // Gated attention (Qwen3.5): splits the joint query-gate projection (qg_) into q_ and gate_q_,
  // and multiplies the attention output by sigmoid(gate_q_).
  void SplitQueryGate(int32_t n);
  void GateAttentionOutput(int32_t n);
  void ExpertFeedForward(const LayerWeights& w, int32_t n);
  // x_ += proj_, normalised first when the family norms each sub-layer's output (Gemma 3).
  void AddResidual(const std::vector<float>& post_norm, int32_t n);
  // The final norm and the output head over the rows that want logits.
  std::span<const float> Logits(const ForwardInput& input);

  // Attention's steps (cpu_attention.cc).
  // q_, k_, v_ = xb_ W (+ b).
  void ProjectQkv(const LayerWeights& w, int32_t n);
  // Per-head norms of q_ and k_ (Qwen3, Gemma 3), rotation, then k_ and v_ into the caches.
  void RotateAndCache(const ForwardInput& input, int32_t layer);
  void RotateAndCacheToken(const ForwardInput& input, int32_t layer, int64_t i);
  // att_ = softmax(scale q k^T + mask) v over each token's visible keys (its window on local
  // layers).
  void Attend(const ForwardInput& input, int32_t layer);

  const ModelConfig& config_;
  const ModelWeights& weights_;
  KvCachePool& kv_;
  ThreadPool& pool_;

  // Forward state, sized at load. n = tokens in the batch.
  MatMulScratch matmul_scratch_;
  AlignedBuffer<float> x_;       // (max_batch, n_embd) residual stream
  AlignedBuffer<float> xb_;      // (max_batch, n_embd) normalised input of a sub-layer
  AlignedBuffer<float> q_;       // (max_batch, q_dim)
  AlignedBuffer<float> k_;       // (max_batch, kv_dim)
  AlignedBuffer<float> v_;       // (max_batch, kv_dim)
  AlignedBuffer<float> att_;     // (max_batch, q_dim) attention output
  AlignedBuffer<float> gate_;    // (max_batch, n_ff)
  AlignedBuffer<float> up_;      // (max_batch, n_ff)
  AlignedBuffer<float> proj_;    // (max_batch, n_embd) output of wo / w_down
  AlignedBuffer<float> logits_;  // (max_batch, n_vocab)
  // A mixture's shared expert (family shared_expert): its output rows, before its gate.
  AlignedBuffer<float> shared_;  // (max_batch, n_embd)
  // Gated attention (family.gated_attention): (max_batch, 2 q_dim) and (max_batch, q_dim).
  AlignedBuffer<float> qg_;
  AlignedBuffer<float> gate_q_;
  // Gated DeltaNet (family.gated_delta_net): per token its q-k-v channels, z, beta and alpha
  // inputs and output; and the recurrent state of each sequence.
  AlignedBuffer<float> gdn_qkv_;          // (max_batch, conv_dim)
  AlignedBuffer<float> gdn_z_;            // (max_batch, value_dim)
  AlignedBuffer<float> gdn_beta_;         // (max_batch, n_v_heads)
  AlignedBuffer<float> gdn_alpha_;        // (max_batch, n_v_heads)
  AlignedBuffer<float> gdn_out_;          // (max_batch, value_dim)
  RecurrentStates* recurrent_ = nullptr;  // kv_'s, when the model has recurrent layers
  ExpertScratch experts_;     // a mixture's routing and grouped rows (empty without experts)
  ExpertsRead experts_read_;  // by the last Run
  // Attention scores of one query group (ops/attention.h) per pool thread: its queries' rows of
  // visible keys (at most n_ctx each), and their softmax sums.
  std::size_t scores_per_thread_;
  AlignedBuffer<float> scores_;  // (pool threads, scores_per_thread_)
};

}  // namespace grove
