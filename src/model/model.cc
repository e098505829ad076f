#include "model/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "base/log.h"
#include "cuda/device.h"
#include "io/gguf.h"
#include "kernels/kernel_set.h"
#include "model/cuda_forward.h"
#include "ops/activation.h"
#include "ops/attention.h"
#include "ops/norm.h"
#include "ops/parallel.h"
#include "quant/quant.h"
#include "tokenize/tokenizer.h"

namespace grove {
namespace {

// Row-wise work (norms) on fewer elements than this runs on the calling thread: a pool dispatch
// and its barrier (~2 us, far more on a busy machine) cost more than normalising a few rows. Each
// row is computed by the same code either way, so the choice never changes a bit.
constexpr int64_t kParallelRowsMin = 1 << 15;

// Rows of the forward's scratch faulted in at load (see the constructor): one token, a draft
// level, a chain or small tree. 32 rows zeroed a megabyte of logits per model per run (32 KB a row
// with 8,000 tokens), mostly rows no run of auto's 5-8 token trees reaches: 0.5 ms of a 16-token
// run with a draft (issue 30). Larger batches fault in their rows when they first come.
constexpr std::size_t kPrefaultedRows = 8;

// Attention's tasks are cut into this many shares of equal work (Model::Attend), which the pool's
// threads claim a few at a time: enough for 16 threads to balance, and each share's bookkeeping (a
// pass over the tasks' key counts) is nothing beside its products.
constexpr int64_t kAttentionShares = 64;

// RMSNorm of n rows of d, in parallel only when the batch is large (see kParallelRowsMin).
void RmsNormRows(const float* x, const float* weight, float* out, int32_t n, std::size_t d,
                 float eps, ThreadPool& pool) {
  auto rows = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) RmsNorm(x + i * d, weight, out + i * d, d, eps);
  };
  if (static_cast<int64_t>(n) * static_cast<int64_t>(d) < kParallelRowsMin) {
    rows(0, n);
  } else {
    pool.ParallelFor(n, rows);
  }
}

}  // namespace

namespace {

std::shared_ptr<ThreadPool> PoolFor(const ModelOptions& options) {
  return options.pool ? options.pool : std::make_shared<ThreadPool>(options.n_threads);
}

int32_t CheckedMaxBatch(const ModelOptions& options) {
  if (options.max_batch < 1 || options.max_batch > 8192)
    Fail("model: max_batch ", options.max_batch, " out of range 1..8192");
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
  if (shape.on_device) {
    // Checked before the cache takes GPU memory.
    CudaForward::CheckSupported(c);
    if (part.first_layer != 0 || part.last_layer != c.n_layer)
      Fail("cuda: a pipeline stage's layers do not run on the GPU yet");
  }
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
  return FromGguf(GgufFile::Open(path), options);
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

ComputeDevice ParseComputeDevice(std::string_view name) {
  if (name == "cpu") return ComputeDevice::kCpu;
  if (name == "cuda") return ComputeDevice::kCuda;
  if (name == "auto") return ComputeDevice::kAuto;
  Fail("device '", name, "': expected cpu, cuda or auto");
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
                                            options.device, options.cache_type)) {
  if (options.n_ctx < 0) Fail("model: context size ", options.n_ctx, " is negative");
  GROVE_CHECK(config_.query_scale > 0.0f, "the config's query scale was not set");
  const ModelConfig& c = config_;
  // LongRoPE's factors: the long ones when this context is longer than the one the model was
  // first trained for (as llama.cpp chooses, by the context of one sequence).
  const ModelWeights& w = weights_;
  const std::vector<float>& factors = !w.rope_freq_factors.empty() ? w.rope_freq_factors
                                      : n_ctx_ > c.rope_orig_ctx   ? w.rope_factors_long
                                                                   : w.rope_factors_short;
  const RopeParams global{.head_dim = c.head_dim,
                          .n_rot = c.n_rot,
                          .freq_base = c.rope.freq_base,
                          .freq_scale = c.rope.freq_scale,
                          .freq_factors = factors.empty() ? nullptr : factors.data(),
                          .pairing = c.family->rope,
                          .attn_factor = c.rope_attn_factor};
  rotations_.resize(c.local_rope ? 2 : 1);
  rotations_[0].params = global;
  if (c.local_rope) {
    rotations_[1].params = global;
    rotations_[1].params.freq_base = c.rope_local.freq_base;
    rotations_[1].params.freq_scale = c.rope_local.freq_scale;
  }
  for (Rotation& r : rotations_) {
    r.table.Resize(static_cast<std::size_t>(n_ctx_) * c.n_rot);
    r.batch.Resize(static_cast<std::size_t>(max_batch_) * c.n_rot);
    r.batch.ZeroFirst(kPrefaultedRows * c.n_rot);
  }

  const std::size_t b = max_batch_;
  matmul_scratch_ = MatMulScratch(max_batch_, std::max<int64_t>({c.n_embd, c.n_ff, c.q_dim()}));
  x_.Resize(b * c.n_embd);
  xb_.Resize(b * c.n_embd);
  q_.Resize(b * c.q_dim());
  k_.Resize(b * c.kv_dim());
  v_.Resize(b * c.kv_dim());
  att_.Resize(b * c.q_dim());
  gate_.Resize(b * c.n_ff);
  up_.Resize(b * c.n_ff);
  proj_.Resize(b * c.n_embd);
  scores_.Resize(static_cast<std::size_t>(pool_->size()) * AttentionScratchPerThread());
  logits_.Resize(b * c.n_vocab);
  slot_.Resize(b);
  prefix_len_.Resize(b);
  visible_begin_.Resize(b + 1);
  // Batch ancestors of every token (a chain of max_batch at most), plus speculative cache ancestors
  // (a draft tree expanded level by level: rarely more than a few dozen deep).
  visible_.Resize(b * (b + 1) / 2 + b * 256);
  visible_position_.Resize(visible_.size());
  visible_cache_parent_.Resize(b);
  out_rows_.Resize(b);
  query_group_begin_.Resize(b + 1);
  window_prefix_begin_.Resize(b);
  window_extra_first_.Resize(b);
  // Fault in now the pages of the forward's state that batches of up to kPrefaultedRows rows use
  // (decoding, a draft's levels, small trees), so that most steps never pay for them in the middle
  // of decoding; larger batches fault in their pages when they first come. Zeroing all of it cost
  // a 16-token run of the bundled target a tenth of its time (issue 30).
  const std::size_t rows = std::min(b, kPrefaultedRows);
  for (AlignedBuffer<float>* f : {&x_, &xb_, &q_, &k_, &v_, &att_, &gate_, &up_, &proj_, &logits_})
    f->ZeroFirst(f->size() / b * rows);
  if (options.device == ComputeDevice::kCuda) {
    cuda_ = std::make_unique<CudaForward>(*parameters_, kv_, max_batch_,
                                          static_cast<int64_t>(visible_.size()));
  }
  scores_.Zero();
  std::memset(matmul_scratch_.bytes(), 0,
              std::min(matmul_scratch_.size(), matmul_scratch_.size() / b * rows));
  seq_count_.Resize(static_cast<std::size_t>(kv_.size()));
}

uint64_t Model::activation_bytes() const {
  uint64_t n = matmul_scratch_.size();
  for (const AlignedBuffer<float>* f :
       {&x_, &xb_, &q_, &k_, &v_, &att_, &gate_, &up_, &proj_, &scores_, &logits_}) {
    n += f->size() * sizeof(float);
  }
  for (const Rotation& r : rotations_) n += (r.table.size() + r.batch.size()) * sizeof(float);
  for (const AlignedBuffer<int32_t>* b :
       {&slot_, &prefix_len_, &visible_cache_parent_, &visible_begin_, &visible_, &out_rows_,
        &seq_count_, &query_group_begin_, &window_prefix_begin_, &window_extra_first_,
        &visible_position_}) {
    n += b->size() * sizeof(int32_t);
  }
  return n;
}

void Model::Validate(const Batch& batch) {
  const int32_t n = batch.size();
  if (n == 0) Fail("forward: empty batch");
  if (n > max_batch_) Fail("forward: batch of ", n, " tokens exceeds max_batch ", max_batch_);
  if (batch.positions.size() != batch.tokens.size() ||
      batch.seq_ids.size() != batch.tokens.size() || batch.parents.size() != batch.tokens.size() ||
      batch.logits.size() != batch.tokens.size() ||
      batch.cache_parents.size() != batch.tokens.size()) {
    Fail("forward: batch arrays differ in length");
  }
  std::fill(seq_count_.data(), seq_count_.data() + static_cast<std::size_t>(kv_.size()), 0);
  for (int32_t i = 0; i < n; ++i) {
    if (batch.tokens[i] < 0 || batch.tokens[i] >= config_.n_vocab) {
      Fail("forward: token ", batch.tokens[i], " at batch index ", i,
           " is outside the vocabulary (", config_.n_vocab, ")");
    }
    const int32_t seq = batch.seq_ids[i];
    if (seq < 0 || seq >= n_seq()) Fail("forward: sequence id ", seq, " outside 0..", n_seq() - 1);
    const int32_t parent = batch.parents[i];
    if (parent >= i || parent < -1)
      Fail("forward: token ", i, " has parent ", parent, " (must be earlier)");
    if (parent >= 0 && batch.seq_ids[parent] != seq) {
      Fail("forward: token ", i, " and its parent ", parent, " belong to different sequences");
    }
    if (batch.positions[i] < 0) Fail("forward: token ", i, " has negative position");
    // The sliding window finds a token's keys by position along its ancestors, which therefore
    // must come before it.
    if (config_.sliding_window > 0 && parent >= 0 &&
        batch.positions[i] <= batch.positions[parent]) {
      Fail("forward: token ", i, " at position ", batch.positions[i],
           " does not follow its parent's position ", batch.positions[parent]);
    }
    const int32_t cp = batch.cache_parents[i];
    const KvCache& cache = kv_.cache(seq);
    if (parent == -1 && cp != Batch::kContinueCache && (cp < 0 || cp >= cache.length())) {
      Fail("forward: token ", i, " continues cache slot ", cp, " but sequence ", seq, " holds ",
           cache.length(), " slots");
    }
    const int32_t anchor = cp == Batch::kContinueCache ? cache.length() - 1 : cp;
    if (config_.sliding_window > 0 && parent == -1 && anchor >= 0 &&
        batch.positions[i] <= cache.position(anchor)) {
      Fail("forward: token ", i, " at position ", batch.positions[i],
           " does not follow the position ", cache.position(anchor), " of cache slot ", anchor,
           " it continues");
    }
    ++seq_count_[seq];
  }
  for (int32_t s = 0; s < n_seq(); ++s) {
    if (kv_.cache(s).length() + seq_count_[s] > n_ctx_) {
      Fail("forward: context full: sequence ", s, " holds ", kv_.cache(s).length(),
           " tokens and the batch adds ", seq_count_[s], ", but the context is ", n_ctx_,
           " tokens");
    }
  }
}

void Model::PrepareBatch(const Batch& batch) {
  const int32_t n = batch.size();
  // Slots: a sequence's batch tokens take the next free slots of its cache in batch order.
  std::fill(seq_count_.data(), seq_count_.data() + static_cast<std::size_t>(kv_.size()), 0);
  for (int32_t i = 0; i < n; ++i) {
    const int32_t seq = batch.seq_ids[i];
    slot_[i] = kv_.cache(seq).length() + seq_count_[seq]++;
  }
  // What each token sees: cache slots [0, prefix_len_[i]), then visible_ (increasing slots): the
  // speculative cache ancestors its chain continues from, its batch ancestors (root first), itself.
  int32_t offset = 0;
  attention_keys_ = 0;
  const int32_t capacity = static_cast<int32_t>(visible_.size());
  for (int32_t i = 0; i < n; ++i) {
    const KvCache& cache = kv_.cache(batch.seq_ids[i]);
    int32_t root = i;
    int32_t depth = 1;
    for (; batch.parents[root] >= 0; root = batch.parents[root]) ++depth;
    const int32_t cp = batch.cache_parents[root];
    int32_t anchor = cp == Batch::kContinueCache ? cache.length() - 1 : cp;
    int32_t n_spec = 0;
    for (int32_t s = anchor; s >= cache.chain_length(); s = cache.parent(s)) ++n_spec;
    if (offset + n_spec + depth > capacity) {
      Fail("forward: token ", i, " continues a speculative chain of ", n_spec,
           " cached tokens, more than the batch bookkeeping holds (", capacity, ")");
    }
    visible_cache_parent_[i] = batch.parents[i] >= 0 ? slot_[batch.parents[i]] : anchor;
    visible_begin_[i] = offset;
    int32_t k = offset + n_spec + depth;
    for (int32_t j = i; j >= 0; j = batch.parents[j]) {
      visible_position_[--k] = batch.positions[j];
      visible_[k] = slot_[j];
    }
    for (; anchor >= cache.chain_length(); anchor = cache.parent(anchor)) {
      visible_position_[--k] = cache.position(anchor);
      visible_[k] = anchor;
    }
    prefix_len_[i] = anchor + 1;
    offset += n_spec + depth;
    attention_keys_ += prefix_len_[i] + n_spec + depth;
  }
  visible_begin_[n] = offset;
  // Query groups for attention: consecutive tokens of one sequence that see the same committed
  // prefix (a tree's nodes, a prompt chunk), at most kMaxQueryGroup each.
  n_query_groups_ = 0;
  for (int32_t i = 0; i < n; ++i) {
    const int32_t first = n_query_groups_ > 0 ? query_group_begin_[n_query_groups_ - 1] : -1;
    if (first < 0 || i - first >= kMaxQueryGroup || batch.seq_ids[i] != batch.seq_ids[first] ||
        prefix_len_[i] != prefix_len_[first]) {
      query_group_begin_[n_query_groups_++] = i;
    }
  }
  query_group_begin_[n_query_groups_] = n;
  PrepareWindow(batch);
  // Rotations from the table of every position the context can hold; positions past it are
  // computed.
  const std::size_t n_rot = static_cast<std::size_t>(config_.n_rot);
  for (Rotation& r : rotations_) {
    for (int32_t i = 0; i < n; ++i) {
      float* cs = r.batch.data() + i * n_rot;
      if (batch.positions[i] < n_ctx_) {
        FillRotationTable(r, batch.positions[i] + 1);
        std::memcpy(cs, r.table.data() + batch.positions[i] * n_rot, n_rot * sizeof(float));
      } else {
        RopeAngles(r.params, batch.positions[i], cs);
      }
    }
  }
}

void Model::FillRotationTable(Rotation& r, int32_t rows) {
  if (rows <= r.filled) return;
  constexpr int32_t kRowsPerFill = 64;
  const int32_t end = std::min(n_ctx_, std::max(rows, r.filled + kRowsPerFill));
  const auto n_rot = static_cast<std::size_t>(config_.n_rot);
  for (int32_t pos = r.filled; pos < end; ++pos) {
    RopeAngles(r.params, pos, r.table.data() + static_cast<std::size_t>(pos) * n_rot);
  }
  r.filled = end;
}

void Model::PrepareWindow(const Batch& batch) {
  const int32_t window = config_.sliding_window;
  if (window == 0) return;
  for (int32_t i = 0; i < batch.size(); ++i) {
    const KvCache& cache = kv_.cache(batch.seq_ids[i]);
    // Visible: keys at positions > p - window. Positions grow along every chain of ancestors, so
    // the visible keys of the prefix are its last ones, and those of the extra slots too.
    const int64_t oldest = static_cast<int64_t>(batch.positions[i]) - window;
    int32_t lo = 0;
    int32_t hi = prefix_len_[i];
    while (lo < hi) {
      const int32_t mid = lo + (hi - lo) / 2;
      if (cache.position(mid) > oldest) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    window_prefix_begin_[i] = lo;
    int32_t e = visible_begin_[i];
    while (e < visible_begin_[i + 1] - 1 && visible_position_[e] <= oldest) ++e;
    window_extra_first_[i] = e;
    // The ring layers hold the rows of the last ring_rows slots: the oldest this token reads must
    // still be there and stay there while the batch writes its own.
    const int32_t oldest_slot = lo < prefix_len_[i] ? lo : visible_[e];
    const int32_t ring = cache.ring_rows();
    if (ring > 0 && oldest_slot < cache.valid_from()) {
      Fail("forward: token ", i, " of sequence ", batch.seq_ids[i], " reads slot ", oldest_slot,
           " of the sliding window, which the window layers' ring of ", ring,
           " rows no longer holds (held: from slot ", cache.valid_from(),
           "): a cache rewound that far must be computed again");
    }
    const int32_t newest = cache.length() + seq_count_[batch.seq_ids[i]];
    if (ring > 0 && newest - oldest_slot > ring) {
      Fail("forward: token ", i, " of sequence ", batch.seq_ids[i], " reads slot ", oldest_slot,
           " while the batch writes up to slot ", newest - 1, ": more than the ", ring,
           " rows of the sliding-window ring (the window, and twice max_batch for a batch and "
           "the speculative slots of a tree); a smaller batch or tree, or a larger max_batch, "
           "fits");
    }
  }
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
  Validate(batch);
  const int32_t n = batch.size();
  const std::size_t row = c.n_embd;
  const std::size_t expected = static_cast<std::size_t>(n) * row;
  const bool embed = first_layer == 0 && hidden_in.empty();
  if (cuda_ && (!embed || last_layer != c.n_layer)) {
    Fail(
        "forward: on the GPU a forward runs every layer from the token embeddings (a pipeline "
        "stage or a feature drafter's fused input runs on the CPU)");
  }
  if (!embed && hidden_in.size() != expected) {
    Fail("forward: a stage from layer ", first_layer, " takes ", expected,
         " hidden floats for a batch of ", n, ", not ", hidden_in.size());
  }
  PrepareBatch(batch);
  for (int32_t s = 0; s < n_seq(); ++s) kv_.cache(s).Append(seq_count_[s]);
  for (int32_t i = 0; i < n; ++i) {
    kv_.cache(batch.seq_ids[i]).SetSlot(slot_[i], batch.positions[i], visible_cache_parent_[i]);
  }
  last_batch_size_ = n;

  if (embed) {
    for (int32_t i = 0; i < n; ++i) {
      const auto* token_row =
          static_cast<const uint8_t*>(weights_.token_embd.data) +
          static_cast<std::size_t>(batch.tokens[i]) * weights_.token_embd.row_bytes;
      float* x = x_.data() + static_cast<std::size_t>(i) * row;
      DequantizeRow(weights_.token_embd.type, token_row, x, c.n_embd);
      if (c.embedding_scale != 1.0f) {
        for (std::size_t j = 0; j < row; ++j) x[j] *= c.embedding_scale;
      }
    }
  } else {
    std::memcpy(x_.data(), hidden_in.data(), hidden_in.size() * sizeof(float));
  }
  if (cuda_) {
    int32_t n_out = 0;
    for (int32_t i = 0; i < n; ++i) {
      if (batch.logits[i]) out_rows_[n_out++] = i;
    }
    return cuda_->Run({.n = n,
                       .embeddings = x_.data(),
                       .cos_sin = rotations_[0].batch.data(),
                       .seq = batch.seq_ids.data(),
                       .slot = slot_.data(),
                       .prefix_len = prefix_len_.data(),
                       .extra_begin = visible_begin_.data(),
                       .extra = visible_.data(),
                       .out_rows = out_rows_.data(),
                       .n_out = n_out});
  }
  for (int32_t layer = first_layer; layer < last_layer; ++layer) Layer(batch, layer);
  if (last_layer < c.n_layer) return hidden_states();

  // Final norm and logits only for the rows that asked: a prefill of 512 tokens computes one row.
  int32_t n_out = 0;
  for (int32_t i = 0; i < n; ++i) {
    if (!batch.logits[i]) continue;
    RmsNorm(x_.data() + static_cast<std::size_t>(i) * row, weights_.output_norm.data(),
            xb_.data() + static_cast<std::size_t>(n_out) * row, c.n_embd, c.rms_eps);
    out_rows_[n_out++] = i;
  }
  if (n_out == 0) return {};
  MatMul(weights_.output, xb_.data(), n_out, logits_.data(), matmul_scratch_, *pool_);
  const std::size_t n_logits = static_cast<std::size_t>(n_out) * c.n_vocab;
  if (c.logit_softcap > 0.0f) {
    const float cap = c.logit_softcap;
    for (std::size_t j = 0; j < n_logits; ++j) logits_[j] = cap * std::tanh(logits_[j] / cap);
  }
  return {logits_.data(), n_logits};
}

std::span<const float> Model::hidden_states() const {
  if (cuda_) return cuda_->Hidden(last_batch_size_);
  return {x_.data(), static_cast<std::size_t>(last_batch_size_) * config_.n_embd};
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

// One block of every family, as the equations read (family.h says which parts a family has):
//   h = x + PostNorm(Attention(Norm(x)))
//   x = h + PostNorm(FeedForward(Norm(h)))
// Attention projects q, k, v (with biases in Qwen2), norms each head of q and k (Qwen3, Gemma 3),
// rotates them, and attends over the cache (through the window on a local layer). PostNorm is
// Gemma 3's; the others add the sub-layer's output as it is.
void Model::Layer(const Batch& batch, int32_t layer) {
  const ModelConfig& c = config_;
  const LayerWeights& w = weights_.layers[layer];
  const int32_t n = batch.size();

  RmsNormRows(x_.data(), w.attn_norm.data(), xb_.data(), n, c.n_embd, c.rms_eps, *pool_);
  ProjectQkv(w, n);
  RotateAndCache(batch, layer);
  Attend(batch, layer);
  MatMul(w.wo, att_.data(), n, proj_.data(), matmul_scratch_, *pool_);
  AddResidual(w.attn_post_norm, n);

  RmsNormRows(x_.data(), w.ffn_norm.data(), xb_.data(), n, c.n_embd, c.rms_eps, *pool_);
  FeedForward(w, n);
  AddResidual(w.ffn_post_norm, n);
}

void Model::ProjectQkv(const LayerWeights& w, int32_t n) {
  // Q, K and V read the same normalised rows: one dispatch, activations quantized once (see
  // MatMulFused).
  const MatMulOutput qkv[] = {{w.wq, q_.data()}, {w.wk, k_.data()}, {w.wv, v_.data()}};
  if (CanFuseMatMuls(qkv)) {
    MatMulFused(qkv, xb_.data(), n, matmul_scratch_, *pool_);
  } else {
    for (const MatMulOutput& out : qkv)
      MatMul(out.w, xb_.data(), n, out.y, matmul_scratch_, *pool_);
  }
  const std::pair<const std::vector<float>*, float*> biases[] = {
      {&w.bq, q_.data()}, {&w.bk, k_.data()}, {&w.bv, v_.data()}};
  for (const auto& [bias, y] : biases) {
    const std::size_t width = bias->size();
    for (std::size_t i = 0; i < width * static_cast<std::size_t>(n); ++i)
      y[i] += (*bias)[i % width];
  }
}

void Model::RotateAndCache(const Batch& batch, int32_t layer) {
  const Rotation& rotation = RotationOf(layer);
  // Tokens are independent (each writes its own cache slot): a prompt's are spread over the
  // threads; a few tokens stay on the calling thread, where a dispatch would cost more.
  auto rotate = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) RotateAndCacheToken(batch, layer, rotation, i);
  };
  if (batch.size() >= kParallelRotateMin) {
    pool_->ParallelFor(batch.size(), rotate);
  } else {
    rotate(0, batch.size());
  }
}

void Model::RotateAndCacheToken(const Batch& batch, int32_t layer, const Rotation& rotation,
                                int64_t i) {
  const ModelConfig& c = config_;
  const LayerWeights& w = weights_.layers[layer];
  const std::size_t q_dim = c.q_dim();
  const std::size_t kv_dim = c.kv_dim();
  const std::size_t head = c.head_dim;
  float* q = q_.data() + i * q_dim;
  float* k = k_.data() + i * kv_dim;
  if (!w.q_norm.empty()) {
    for (std::size_t h = 0; h < q_dim; h += head)
      RmsNorm(q + h, w.q_norm.data(), q + h, head, c.rms_eps);
    for (std::size_t h = 0; h < kv_dim; h += head)
      RmsNorm(k + h, w.k_norm.data(), k + h, head, c.rms_eps);
  }
  const float* cs = rotation.batch.data() + static_cast<std::size_t>(i) * c.n_rot;
  RopeApply(rotation.params, cs, q, c.n_head);
  RopeApply(rotation.params, cs, k, c.n_head_kv);
  KvCache& cache = kv_.cache(batch.seq_ids[i]);
  const float* v = v_.data() + i * kv_dim;
  if (cache.type() == KvCacheType::kF16) {
    const ToF16Fn to_f16 = ActiveKernels().to_f16;
    to_f16(k, cache.key_f16(layer, slot_[i]), static_cast<int64_t>(kv_dim));
    to_f16(v, cache.value_f16(layer, slot_[i]), static_cast<int64_t>(kv_dim));
  } else {
    std::memcpy(cache.key(layer, slot_[i]), k, sizeof(float) * kv_dim);
    std::memcpy(cache.value(layer, slot_[i]), v, sizeof(float) * kv_dim);
  }
}

void Model::Attend(const Batch& batch, int32_t layer) {
  const ModelConfig& c = config_;
  const int32_t q_dim = c.q_dim();
  const int32_t kv_dim = c.kv_dim();
  const int32_t group = c.n_head / c.n_head_kv;
  const bool local = c.is_local(layer);
  // One task per (query group, head): a group's queries read their shared prefix together
  // (ops/attention.h), each with the bits it would get alone.
  const int64_t n_tasks = static_cast<int64_t>(n_query_groups_) * c.n_head;
  // Scores and weighted sum: two multiply-adds per visible key and head element (an upper bound on
  // a local layer).
  const int64_t attention_macs = 2 * attention_keys_ * c.n_head * c.head_dim;
  // The tasks are cut into kAttentionShares shares of equal keys, not of equal counts: a prompt's
  // later query groups see more of it (causal), so equal counts gave the last thread about three
  // quarters of a 512-token prompt's attention at 2 threads. A task's cost is its group's visible
  // keys; it belongs to the share that holds the middle of its span. The pool's threads claim the
  // shares as they are free (base/thread_pool.h), so a thread the system descheduled holds up no
  // layer: with the tasks split by thread, one barrier a layer waited for it. Which thread runs a
  // task changes no bit. attention_keys_ (PrepareBatch) is the sum of every group's keys.
  auto group_keys = [&](int32_t group) {
    int64_t keys = 0;
    for (int32_t i = query_group_begin_[group]; i < query_group_begin_[group + 1]; ++i) {
      keys += prefix_len_[i] + visible_begin_[i + 1] - visible_begin_[i];
    }
    return keys;
  };
  const auto shares = [&](int64_t share_begin, int64_t share_end, int thread) {
    float* scores = scores_.data() + static_cast<std::size_t>(thread) * AttentionScratchPerThread();
    int64_t before = 0;  // keys of the tasks before this one
    int64_t keys = 0;    // of the current group (each of its tasks, one per head, reads them)
    for (int64_t task = 0; task < n_tasks; ++task) {
      if (task % c.n_head == 0) keys = group_keys(static_cast<int32_t>(task / c.n_head));
      const int64_t middle = 2 * before + keys;  // twice the middle of the task's span
      before += keys;
      const int64_t share = middle * kAttentionShares / (2 * attention_keys_ * c.n_head + 1);
      if (share < share_begin || share >= share_end) continue;
      const int32_t first = query_group_begin_[task / c.n_head];
      const int32_t n_q = query_group_begin_[task / c.n_head + 1] - first;
      const int32_t h = static_cast<int32_t>(task % c.n_head);
      const int32_t g = h / group;
      const KvCache& cache = kv_.cache(batch.seq_ids[first]);
      const std::size_t head = static_cast<std::size_t>(h) * c.head_dim;
      const std::size_t group_at = static_cast<std::size_t>(g) * c.head_dim;
      const bool f16 = cache.type() == KvCacheType::kF16;
      const QueryGroup queries{
          .q = q_.data() + static_cast<std::size_t>(first) * q_dim + head,
          .q_stride = q_dim,
          .n_q = n_q,
          .keys = f16 ? nullptr : cache.key(layer, 0) + group_at,
          .values = f16 ? nullptr : cache.value(layer, 0) + group_at,
          .row_stride = kv_dim,
          .n_prefix = prefix_len_[first],
          .extra_begin = visible_begin_.data() + first,
          .extra = visible_.data(),
          .head_dim = c.head_dim,
          .scale = c.query_scale,
          .out = att_.data() + static_cast<std::size_t>(first) * q_dim + head,
          .out_stride = q_dim,
          .prefix_begin = local ? window_prefix_begin_.data() + first : nullptr,
          .extra_first = local ? window_extra_first_.data() + first : nullptr,
          .ring = cache.ring_rows(layer),
          .keys_f16 = f16 ? cache.key_f16(layer, 0) + group_at : nullptr,
          .values_f16 = f16 ? cache.value_f16(layer, 0) + group_at : nullptr,
      };
      AttendQueries(queries, scores);
    }
  };
  ParallelForWorkWithThread(*pool_, kAttentionShares, attention_macs, shares);
}

void Model::FeedForward(const LayerWeights& w, int32_t n) {
  const ModelConfig& c = config_;
  const GateActivation act = c.family->activation;
  // Small batches (decode, short chains): gate, up and the activation in one dispatch; each thread
  // computes the same columns of gate and up, then the activation over them (elementwise, so a
  // column range gives the bits of whole rows). Larger batches keep separate gate/up matmuls and a
  // row-split activation: on TinyLlama Q8_0 at n = 16 and 64 (2 threads) the column-fused form
  // gained nothing measurable and may have lost a few percent (within this machine's run-to-run
  // noise); the barriers it saves are ~2 us against milliseconds of matmul per layer there. The
  // bits are the same either way.
  const std::size_t ff = c.n_ff;
  auto activate = [&](int64_t o_begin, int64_t o_end) {
    for (std::size_t i = 0; i < static_cast<std::size_t>(n); ++i) {
      float* gate = gate_.data() + i * ff + o_begin;
      GatedActivation(act, gate, up_.data() + i * ff + o_begin, gate, o_end - o_begin);
    }
  };
  const MatMulOutput gate_up[] = {{w.w_gate, gate_.data()}, {w.w_up, up_.data()}};
  if (static_cast<int64_t>(n) * c.n_ff < kParallelRowsMin && CanFuseMatMuls(gate_up)) {
    MatMulColumns(gate_up, xb_.data(), n, activate, matmul_scratch_, *pool_);
  } else {
    for (const MatMulOutput& out : gate_up)
      MatMul(out.w, xb_.data(), n, out.y, matmul_scratch_, *pool_);
    ParallelForWork(*pool_, n, static_cast<int64_t>(n) * c.n_ff, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        GatedActivation(act, gate_.data() + i * ff, up_.data() + i * ff, gate_.data() + i * ff,
                        c.n_ff);
      }
    });
  }
  MatMul(w.w_down, gate_.data(), n, proj_.data(), matmul_scratch_, *pool_);
}

void Model::AddResidual(const std::vector<float>& post_norm, int32_t n) {
  const std::size_t d = config_.n_embd;
  if (!post_norm.empty()) {
    RmsNormRows(proj_.data(), post_norm.data(), proj_.data(), n, d, config_.rms_eps, *pool_);
  }
  for (std::size_t j = 0; j < static_cast<std::size_t>(n) * d; ++j) x_[j] += proj_[j];
}

}  // namespace grove
