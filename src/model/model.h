// A forward context of a model of any family grove runs (family.h): the shared, immutable
// parameters (model_parameters.h: file, config, tokenizer, weights), a pool of KV-cache slots
// (kv_cache_pool.h), the preallocated state of the forward pass, and the thread pool it borrows.
// Model::Load makes the parameters and one context; Model::Create adds another context over the
// same parameters (a scheduler's concurrent drafters each forward in their own), so weights are
// held once per process.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/aligned_buffer.h"
#include "base/thread_pool.h"
#include "model/batch.h"
#include "model/config.h"
#include "model/kv_cache.h"
#include "model/kv_cache_pool.h"
#include "model/model_parameters.h"
#include "model/weights.h"
#include "ops/attention.h"
#include "ops/matmul.h"
#include "ops/rope.h"

namespace grove {

// The context a model gets when none is asked for: its training context, at most this many tokens
// (the KV cache of a 128k-context model would otherwise take gigabytes unasked).
inline constexpr int32_t kDefaultContextCap = 4096;

class GgufFile;
class Tokenizer;

inline constexpr int32_t kDefaultMaxBatch = 512;

// Where a forward context computes: the CPU kernels, or a CUDA GPU (cuda_forward.h). kAuto: the
// GPU when one is present and runs the model, else the CPU (with one warning through the log when
// a GPU is there but cannot take the model: its memory, a sliding window).
enum class ComputeDevice : uint8_t { kCpu, kCuda, kAuto };
// "cpu", "cuda", "auto"; throws grove::Error on another name.
ComputeDevice ParseComputeDevice(std::string_view name);

struct ModelOptions {
  int n_threads = 0;  // 0: all hardware threads (ignored when `pool` is given)
  // A thread pool shared with other models of the process (target and draft): one set of workers,
  // so no model's workers spin while another model computes. Null: the model creates its own.
  std::shared_ptr<ThreadPool> pool;
  int32_t n_ctx = 0;  // 0: the training context, at most kDefaultContextCap
  int32_t n_seq = 1;  // KV-cache slots (sequences held at once)
  int32_t max_batch =
      kDefaultMaxBatch;  // most tokens in one Forward; longer prompts are split by the caller
  // Regroup the matrices that the active kernels have a group kernel for (quant/packed.h) at load.
  // Off: every matrix is computed from the file's rows (tests compare the two). Read by Load and
  // FromGguf only (Create shares parameters already loaded).
  bool group_weights = true;
  // kCuda: weights, KV cache and the whole forward on the GPU; throws grove::Error naming what the
  // GPU path lacks (no device, its memory, a sliding window). kAuto: see ComputeDevice.
  ComputeDevice device = ComputeDevice::kCpu;
  // Keys and values as floats or half floats (kv_cache.h); the GPU keeps floats.
  KvCacheType cache_type = KvCacheType::kF32;
};

class CudaForward;

class Model {
 public:
  // Opens, validates and binds a GGUF model. Throws grove::Error naming the problem.
  static std::unique_ptr<Model> Load(const std::string& path, const ModelOptions& options = {});
  static std::unique_ptr<Model> FromGguf(std::unique_ptr<GgufFile> gguf,
                                         const ModelOptions& options);
  // Another forward context over parameters already loaded: its own activations, KV slots and
  // (options.pool, or a new one of options.n_threads) thread pool.
  static std::unique_ptr<Model> Create(std::shared_ptr<const ModelParameters> parameters,
                                       const ModelOptions& options);
  ~Model();

  const std::shared_ptr<const ModelParameters>& parameters() const { return parameters_; }
  const ModelConfig& config() const { return config_; }
  const GgufFile& gguf() const { return parameters_->gguf(); }
  // Null when the file carries no vocabulary.
  const Tokenizer* tokenizer() const { return parameters_->tokenizer(); }
  int32_t n_ctx() const { return n_ctx_; }
  int32_t n_seq() const { return kv_.size(); }
  int32_t max_batch() const { return max_batch_; }
  ComputeDevice device() const { return cuda_ ? ComputeDevice::kCuda : ComputeDevice::kCpu; }
  ThreadPool& pool() { return *pool_; }
  const std::shared_ptr<ThreadPool>& shared_pool() const { return pool_; }

  // The KV slots. A single-sequence caller may use slot 0 (or any) directly; drivers of many
  // sequences acquire, release and fork them.
  KvCachePool& kv() { return kv_; }
  const KvCachePool& kv() const { return kv_; }
  KvCache& cache(int32_t seq) { return kv_.cache(seq); }
  const KvCache& cache(int32_t seq) const { return kv_.cache(seq); }
  // Floats or half floats in every slot's cache (ModelOptions::cache_type).
  KvCacheType cache_type() const { return kv_.cache(0).type(); }
  // Bytes of this context's own state: activations and scratch (KV slots: kv()).
  uint64_t activation_bytes() const;

  // Runs the batch (see batch.h), appends its tokens to their sequences' caches in batch order, and
  // returns the logits of the rows that asked for them, in batch order: (n_rows, n_vocab) floats,
  // valid until the next call. Throws grove::Error, changing nothing, on a malformed batch or a
  // full cache.
  std::span<const float> Forward(const Batch& batch);

  // A pipeline stage's part of Forward (pipe/): runs layers [first_layer, last_layer) of the batch,
  // appending its tokens to this context's caches as Forward does. The first stage (first_layer
  // 0) embeds the batch's tokens, unless `hidden_in` is given: then it replaces the embeddings (a
  // feature drafter's fused input, speculate/feature_drafter.h); a later stage starts from
  // `hidden_in`, the previous stage's output for the same batch ((n, n_embd) floats). A stage
  // ending at the last layer returns the logits of the rows that asked for them, as Forward; any
  // other returns its output rows, (n, n_embd) floats. Either is valid until the next call. Forward
  // is ForwardLayers(batch, 0, n_layer, {}). Throws grove::Error, changing nothing, on a bad range
  // or a hidden_in of the wrong size.
  std::span<const float> ForwardLayers(const Batch& batch, int32_t first_layer, int32_t last_layer,
                                       std::span<const float> hidden_in);
  // The residual stream after the last layer the last forward ran, before the final norm: (n,
  // n_embd) floats for its n batch rows, valid until the next call. Free: the forward keeps it
  // anyway.
  std::span<const float> hidden_states() const;

  // Runs `tokens` as a causal chain continuing sequence `seq` at first_position, in chunks of
  // max_batch (a prompt may be longer than one batch). Returns the last token's logits, or nothing
  // when want_logits is false. `batch` is the caller's scratch, reused so repeated calls do not
  // allocate.
  std::span<const float> ForwardChain(std::span<const int32_t> tokens, int32_t first_position,
                                      int32_t seq, Batch& batch, bool want_logits);

  // One untimed forward over a few tokens, then the cache of sequence 0 is cleared: the first real
  // forward then finds the weights, its scratch and its code paged in and warm (llama.cpp warms up
  // the same way at start-up). A CLI calls it after loading; the library never does on its own.
  void WarmUp();

  // Bytes of weights read by one forward pass (for achieved-bandwidth figures).
  uint64_t weight_bytes() const { return parameters_->weight_bytes(); }
  // Bytes of matrices regrouped at load (ModelOptions::group_weights); 0 if none.
  uint64_t grouped_bytes() const { return parameters_->grouped_bytes(); }

 private:
  Model(std::shared_ptr<const ModelParameters> parameters, std::shared_ptr<ThreadPool> pool,
        const ModelOptions& options);
  // Resolves kAuto: a context on the GPU, or on the CPU when the GPU cannot take it.
  static std::unique_ptr<Model> Make(std::shared_ptr<const ModelParameters> parameters,
                                     std::shared_ptr<ThreadPool> pool, ModelOptions options);
  // Checks the batch and counts its tokens per sequence into seq_count_.
  void Validate(const Batch& batch);
  void PrepareBatch(const Batch& batch);
  // For the sliding window: the first prefix slot and extra slot each token sees on local layers;
  // throws, changing nothing, if the window layers' rings cannot hold them (kv_cache.h).
  void PrepareWindow(const Batch& batch);

  // One transformer block (model.cc): the steps below, in the order of the equations.
  void Layer(const Batch& batch, int32_t layer);
  // q_, k_, v_ = xb_ W (+ b).
  void ProjectQkv(const LayerWeights& w, int32_t n);
  // Per-head norms of q_ and k_ (Qwen3, Gemma 3), rotation, then k_ and v_ into the caches.
  void RotateAndCache(const Batch& batch, int32_t layer);
  // att_ = softmax(scale q k^T + mask) v over each token's visible keys (its window on local
  // layers).
  void Attend(const Batch& batch, int32_t layer);
  // proj_ = w_down (act(xb_ w_gate) * (xb_ w_up)).
  void FeedForward(const LayerWeights& w, int32_t n);
  // x_ += proj_, normalised first when the family norms each sub-layer's output (Gemma 3).
  void AddResidual(const std::vector<float>& post_norm, int32_t n);

  std::shared_ptr<const ModelParameters> parameters_;
  const ModelConfig& config_;    // parameters_->config()
  const ModelWeights& weights_;  // parameters_->weights()
  int32_t n_ctx_;
  int32_t max_batch_;
  std::shared_ptr<ThreadPool> pool_;
  KvCachePool kv_;

  // One rotation per kind of layer (Gemma 3's local layers rotate with a base of their own): its
  // parameters, and the cos/sin pairs of the positions the context holds (each computed once: sin
  // and cos in double were 2% of a draft model's forward) and of the batch's tokens. The table
  // fills as positions are first reached, not at load: the whole table of a 512-token context
  // was 0.5 ms of the target's 4 ms load and 0.4 ms of the draft's (issue 30).
  struct Rotation {
    RopeParams params;
    AlignedBuffer<float> table;  // (n_ctx, n_rot), rows [0, filled) computed
    int32_t filled = 0;
    AlignedBuffer<float> batch;  // (max_batch, n_rot)
  };
  // Computes the table's rows up to `rows` (and a few beyond, so that decoding fills it in steps).
  void FillRotationTable(Rotation& r, int32_t rows);
  std::vector<Rotation> rotations_;  // [0]: global layers; [1]: local ones, when they differ
  const Rotation& RotationOf(int32_t layer) const {
    return rotations_[config_.local_rope && config_.is_local(layer) ? 1 : 0];
  }
  // RotateAndCache's work for batch token i.
  void RotateAndCacheToken(const Batch& batch, int32_t layer, const Rotation& rotation, int64_t i);
  // Batches of at least this many tokens rotate on every thread.
  static constexpr int32_t kParallelRotateMin = 16;

  // Forward state, sized at load (the token loop never allocates). n = tokens in the batch.
  MatMulScratch matmul_scratch_;
  AlignedBuffer<float> x_;     // (max_batch, n_embd) residual stream
  AlignedBuffer<float> xb_;    // (max_batch, n_embd) normalised input of a sub-layer
  AlignedBuffer<float> q_;     // (max_batch, q_dim)
  AlignedBuffer<float> k_;     // (max_batch, kv_dim)
  AlignedBuffer<float> v_;     // (max_batch, kv_dim)
  AlignedBuffer<float> att_;   // (max_batch, q_dim) attention output
  AlignedBuffer<float> gate_;  // (max_batch, n_ff)
  AlignedBuffer<float> up_;    // (max_batch, n_ff)
  AlignedBuffer<float> proj_;  // (max_batch, n_embd) output of wo / w_down
  // Attention scores of one query group (ops/attention.h): its queries' rows of visible keys (at
  // most n_ctx each), and their softmax sums.
  std::size_t AttentionScratchPerThread() const {
    return static_cast<std::size_t>(kMaxQueryGroup) * (static_cast<std::size_t>(n_ctx_) + 1);
  }
  AlignedBuffer<float> scores_;        // (n_threads, AttentionScratchPerThread()) attention scratch
  AlignedBuffer<float> logits_;        // (max_batch, n_vocab)
  AlignedBuffer<int32_t> slot_;        // (max_batch) cache slot of each token
  AlignedBuffer<int32_t> prefix_len_;  // (max_batch) cache slots [0, prefix) each token sees
  AlignedBuffer<int32_t> visible_cache_parent_;  // (max_batch) parent slot recorded for each token
  AlignedBuffer<int32_t> visible_begin_;         // (max_batch + 1) offsets into visible_
  AlignedBuffer<int32_t> visible_;           // slots of ancestors then self, per token, increasing
  AlignedBuffer<int32_t> visible_position_;  // the position of each slot of visible_
  AlignedBuffer<int32_t> out_rows_;          // (max_batch) batch index of each logits row
  AlignedBuffer<int32_t> seq_count_;         // (n_seq) tokens of each sequence in this batch
  int64_t attention_keys_ = 0;  // keys visible to the batch's tokens, summed (one head)
  // On local layers, token i sees cache slots [window_prefix_begin_[i], prefix_len_[i]) and
  // visible_[window_extra_first_[i]] onwards of its extra slots.
  AlignedBuffer<int32_t> window_prefix_begin_;  // (max_batch)
  AlignedBuffer<int32_t> window_extra_first_;   // (max_batch)
  AlignedBuffer<int32_t> query_group_begin_;    // (max_batch + 1) first token of each query group
  int32_t n_query_groups_ = 0;
  int32_t last_batch_size_ = 0;        // rows of the last forward (hidden_states)
  std::unique_ptr<CudaForward> cuda_;  // set on the GPU: the layers run there
};

}  // namespace grove
