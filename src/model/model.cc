#include "model/model.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "base/log.h"
#include "cuda/device.h"
#include "io/gguf.h"
#include "model/recurrent_state.h"
#include "quant/quant.h"
#include "tokenize/tokenizer.h"

namespace grove {
namespace {

std::shared_ptr<ThreadPool> PoolFor(const ModelOptions& options) {
  return options.pool ? options.pool : std::make_shared<ThreadPool>(options.n_threads);
}

int32_t CheckedMaxBatch(const ModelOptions& options) {
  if (options.max_batch < 1 || options.max_batch > kMaxForwardTokens)
    Fail("model: max_batch ", options.max_batch, " out of range 1..", kMaxForwardTokens);
  return options.max_batch;
}

int32_t CheckedSlots(const ModelOptions& options) {
  if (options.n_seq < 1 || options.n_seq > 1024)
    Fail("model: n_seq ", options.n_seq, " out of range 1..1024");
  return options.n_seq;
}

// The context: the model's own (at most kDefaultContextCap) by default; never more than it was
// trained for, where RoPE positions it has not seen give noise, and before the KV cache of that
// size is allocated.
int32_t CheckedContext(const ModelOptions& options, const ModelConfig& config) {
  if (options.n_ctx > config.n_ctx_train) {
    Fail("model: context size ", options.n_ctx, " is larger than the model's context of ",
         config.n_ctx_train, " tokens");
  }
  return options.n_ctx > 0 ? options.n_ctx : std::min(config.n_ctx_train, kDefaultContextCap);
}

// Every layer's keys for the context, but a sliding-window layer's for its window only: a ring of
// the window, a batch (max_batch tokens are written before any attends) and as many speculative
// slots again (the draft levels of a tree held in the cache). PrepareBatch checks every batch
// against it.
KvCacheShape CacheShape(const ModelConfig& c, const ModelPart& part, int32_t n_ctx,
                        int32_t max_batch, ComputeDevice device, KvCacheType type) {
  KvCacheShape shape{.n_layer = part.last_layer - part.first_layer,
                     .n_ctx = n_ctx,
                     .kv_dim = c.kv_dim(),
                     .first_layer = part.first_layer,
                     .on_device = device == ComputeDevice::kCuda,
                     .type = type};
  // Checked before the cache takes memory (on the GPU, its own).
  CheckBackendRuns(device, c, part);
  bool any_local = false;
  for (int32_t l = part.first_layer; l < part.last_layer; ++l) any_local |= c.is_local(l);
  if (any_local) {
    for (int32_t l = part.first_layer; l < part.last_layer; ++l)
      shape.ring_layers.push_back(c.is_local(l) ? 1 : 0);
    shape.window = c.sliding_window;
    shape.ring_rows = static_cast<int32_t>(
        std::min<int64_t>(n_ctx, int64_t{c.sliding_window} + 2 * int64_t{max_batch}));
  }
  return shape;
}

}  // namespace

std::unique_ptr<Model> Model::Load(const std::string& path, const ModelOptions& options) {
  return FromGguf(GgufFile::Open(path, options.file_backing), options);
}

std::unique_ptr<Model> Model::FromGguf(std::unique_ptr<GgufFile> gguf,
                                       const ModelOptions& options) {
  std::shared_ptr<ThreadPool> pool = PoolFor(options);
  auto parameters = ModelParameters::FromGguf(std::move(gguf), options.group_weights, *pool);
  return Make(std::move(parameters), std::move(pool), options);
}

std::unique_ptr<Model> Model::Create(std::shared_ptr<const ModelParameters> parameters,
                                     const ModelOptions& options) {
  GROVE_CHECK(parameters != nullptr);
  return Make(std::move(parameters), PoolFor(options), options);
}

std::unique_ptr<Model> Model::Make(std::shared_ptr<const ModelParameters> parameters,
                                   std::shared_ptr<ThreadPool> pool, ModelOptions options) {
  if (options.device == ComputeDevice::kAuto) {
    if (cuda::DeviceCount() == 0) {
      options.device = ComputeDevice::kCpu;
    } else {
      try {
        options.device = ComputeDevice::kCuda;
        return std::unique_ptr<Model>(new Model(parameters, pool, options));
      } catch (const Error& e) {
        Log(LogLevel::kWarn, parameters->file_name(), ": running on the CPU: ", e.what());
        options.device = ComputeDevice::kCpu;
      }
    }
  }
  return std::unique_ptr<Model>(new Model(std::move(parameters), std::move(pool), options));
}

Model::~Model() = default;

Model::Model(std::shared_ptr<const ModelParameters> parameters, std::shared_ptr<ThreadPool> pool,
             const ModelOptions& options)
    : parameters_(std::move(parameters)),
      config_(parameters_->config()),
      weights_(parameters_->weights()),
      n_ctx_(CheckedContext(options, config_)),
      max_batch_(CheckedMaxBatch(options)),
      pool_(std::move(pool)),
      kv_(CheckedSlots(options), CacheShape(config_, parameters_->part(), n_ctx_, max_batch_,
                                            options.device, options.cache_type)),
      layout_(max_batch_, kv_.size()),
      rotary_(config_, weights_, n_ctx_, max_batch_) {
  if (options.n_ctx < 0) Fail("model: context size ", options.n_ctx, " is negative");
  GROVE_CHECK(config_.query_scale > 0.0f, "the config's query scale was not set");
  backend_ =
      MakeForwardBackend(options.device, *parameters_, kv_, *pool_, max_batch_, n_ctx_, layout_);
}

uint64_t Model::activation_bytes() const {
  return backend_->activation_bytes() + layout_.bytes() + rotary_.bytes();
}

std::span<const float> Model::Forward(const Batch& batch) {
  return ForwardLayers(batch, 0, config_.n_layer, {});
}

std::span<const float> Model::ForwardLayers(const Batch& batch, int32_t first_layer,
                                            int32_t last_layer, std::span<const float> hidden_in) {
  const ModelConfig& c = config_;
  if (first_layer < 0 || first_layer >= last_layer || last_layer > c.n_layer) {
    Fail("forward: layers [", first_layer, ", ", last_layer, ") are not a range of the model's ",
         c.n_layer);
  }
  if (!parameters_->Holds(first_layer, last_layer)) {
    Fail("forward: layers [", first_layer, ", ", last_layer,
         ") are not loaded: this process holds [", parameters_->part().first_layer, ", ",
         parameters_->part().last_layer, ")");
  }
  layout_.Check(batch, kv_, c, n_ctx_);
  const bool embed = first_layer == 0 && hidden_in.empty();
  if (!backend_->runs_partial_forwards() && (!embed || last_layer != c.n_layer)) {
    Fail(
        "forward: on the GPU a forward runs every layer from the token embeddings (a pipeline "
        "stage or a feature drafter's fused input runs on the CPU)");
  }
  const std::size_t expected = static_cast<std::size_t>(batch.size()) * c.n_embd;
  if (!embed && hidden_in.size() != expected) {
    Fail("forward: a stage from layer ", first_layer, " takes ", expected,
         " hidden floats for a batch of ", batch.size(), ", not ", hidden_in.size());
  }
  layout_.Prepare(batch, kv_, c.sliding_window);
  // Every sequence's recurrent state must reach the slot the batch continues (committed, rewound,
  // or a pending tree node's), checked before any cache changes.
  if (RecurrentStates* states = kv_.recurrent()) states->Prepare(batch, kv_);
  rotary_.Prepare(batch.positions);
  layout_.Append(batch, kv_);
  last_batch_size_ = batch.size();
  WriteInputRows(batch, hidden_in);
  return backend_->Run({.batch = batch, .layout = layout_, .rotary = rotary_}, first_layer,
                       last_layer);
}

void Model::WriteInputRows(const Batch& batch, std::span<const float> hidden_in) {
  float* rows = backend_->input_rows();
  if (!hidden_in.empty()) {
    std::memcpy(rows, hidden_in.data(), hidden_in.size() * sizeof(float));
    return;
  }
  const std::size_t row = config_.n_embd;
  for (int32_t i = 0; i < batch.size(); ++i) {
    const auto* token_row =
        static_cast<const uint8_t*>(weights_.token_embd.data) +
        static_cast<std::size_t>(batch.tokens[i]) * weights_.token_embd.row_bytes;
    float* x = rows + static_cast<std::size_t>(i) * row;
    DequantizeRow(weights_.token_embd.type, token_row, x, config_.n_embd);
    if (config_.embedding_scale != 1.0f) {
      for (std::size_t j = 0; j < row; ++j) x[j] *= config_.embedding_scale;
    }
  }
}

std::span<const float> Model::hidden_states() const {
  return backend_->hidden_states(last_batch_size_);
}

void Model::WarmUp() {
  constexpr int32_t kWarmUpTokens = 8;
  Batch batch;
  const std::vector<int32_t> tokens(
      static_cast<std::size_t>(std::min({kWarmUpTokens, max_batch_, n_ctx_})), 0);
  kv_.cache(0).Clear();
  ForwardChain(tokens, 0, 0, batch, /*want_logits=*/true);
  kv_.cache(0).Clear();
}

std::span<const float> Model::ForwardChain(std::span<const int32_t> tokens, int32_t first_position,
                                           int32_t seq, Batch& batch, bool want_logits) {
  std::span<const float> logits;
  for (std::size_t begin = 0; begin < tokens.size(); begin += max_batch_) {
    const std::size_t end = std::min(tokens.size(), begin + static_cast<std::size_t>(max_batch_));
    batch.Clear();
    batch.AddChain(tokens.subspan(begin, end - begin), first_position + static_cast<int32_t>(begin),
                   seq);
    if (!want_logits) batch.logits.back() = 0;
    logits = Forward(batch);
  }
  return logits;
}

}  // namespace grove
