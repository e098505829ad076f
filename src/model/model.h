// A forward context of a model of any family grove runs (family.h): the shared, immutable
// parameters (model_parameters.h: file, config, tokenizer, weights), a pool of KV-cache slots
// (kv_cache_pool.h), the bookkeeping that lays out each batch (batch_layout.h, rotary_tables.h),
// the backend that runs its layers on the CPU or a GPU (forward_backend.h) with the preallocated
// state of the forward pass, and the thread pool it borrows.
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

#include "base/thread_pool.h"
#include "model/batch.h"
#include "model/batch_layout.h"
#include "model/config.h"
#include "model/forward_backend.h"
#include "model/kv_cache.h"
#include "model/kv_cache_pool.h"
#include "model/model_parameters.h"
#include "model/rotary_tables.h"
#include "model/weights.h"

namespace grove {

// The context a model gets when none is asked for: its training context, at most this many tokens
// (the KV cache of a 128k-context model would otherwise take gigabytes unasked).
inline constexpr int32_t kDefaultContextCap = 4096;

class GgufFile;
class Tokenizer;

inline constexpr int32_t kDefaultMaxBatch = 512;

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
  // The file's pages, or a copy read at load for a file that may be rewritten while it is in use
  // (io/mapped_file.h). Read by Load only.
  FileBacking file_backing = FileBacking::kMapped;
};

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
  ComputeDevice device() const { return backend_->device(); }
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
  // The experts a mixture's layers read in the last forward (forward_backend.h); zero without.
  ExpertsRead experts_read() const { return backend_->experts_read(); }

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
  // Writes the batch's input rows into the backend's: the token embeddings (scaled where the
  // family scales them), or `hidden_in`.
  void WriteInputRows(const Batch& batch, std::span<const float> hidden_in);

  std::shared_ptr<const ModelParameters> parameters_;
  const ModelConfig& config_;    // parameters_->config()
  const ModelWeights& weights_;  // parameters_->weights()
  int32_t n_ctx_;
  int32_t max_batch_;
  std::shared_ptr<ThreadPool> pool_;
  KvCachePool kv_;
  BatchLayout layout_;
  RotaryTables rotary_;
  std::unique_ptr<ForwardBackend> backend_;
  int32_t last_batch_size_ = 0;  // rows of the last forward (hidden_states)
};

}  // namespace grove
