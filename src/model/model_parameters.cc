#include "model/model_parameters.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "base/build_id.h"
#include "base/error.h"
#include "base/fnv1a.h"
#include "base/log.h"
#include "base/user_cache_directory.h"
#include "io/gguf.h"
#include "kernels/kernel_set.h"
#include "model/packed_weight_cache.h"
#include "ops/matmul.h"
#include "quant/packed.h"
#include "quant/quant.h"
#include "tokenize/tokenizer.h"

namespace grove {
namespace {

uint64_t MatrixBytes(const WeightView& w) { return static_cast<uint64_t>(w.row_bytes) * w.n_out; }

// The offset of a matrix that keeps its GGUF layout (CheckAndGroupWeights).
constexpr std::size_t kNotGrouped = static_cast<std::size_t>(-1);

std::size_t RoundUpToCacheLine(std::size_t n) {
  return (n + kCacheLine - 1) / kCacheLine * kCacheLine;
}

}  // namespace

std::shared_ptr<const ModelParameters> ModelParameters::Load(const std::string& path,
                                                             bool group_weights, ThreadPool& pool,
                                                             ModelPart part, FileBacking backing) {
  return FromGguf(GgufFile::Open(path, backing), group_weights, pool, part);
}

std::shared_ptr<const ModelParameters> ModelParameters::FromGguf(std::unique_ptr<GgufFile> gguf,
                                                                 bool group_weights,
                                                                 ThreadPool& pool, ModelPart part) {
  return std::shared_ptr<const ModelParameters>(
      new ModelParameters(std::move(gguf), group_weights, pool, part));
}

ModelParameters::~ModelParameters() {
  keeping_.reset();  // before grouped_, which it writes
}

ModelParameters::ModelParameters(std::unique_ptr<GgufFile> gguf, bool group_weights,
                                 ThreadPool& pool, ModelPart part)
    : gguf_(std::move(gguf)),
      config_(ConfigFromGguf(*gguf_)),
      part_(part),
      weights_(BindWeights(*gguf_, config_)) {
  for (const std::string& note : config_.notes) {
    Log(LogLevel::kWarn, "model: '", gguf_->name(), "': ", note);
  }
  if (part_.last_layer < 0) part_.last_layer = config_.n_layer;
  if (part_.first_layer < 0 || part_.first_layer > part_.last_layer ||
      part_.last_layer > config_.n_layer) {
    Fail("model: layers [", part_.first_layer, ", ", part_.last_layer, ") are not a part of the ",
         config_.n_layer, " of '", gguf_->name(), "'");
  }
  if (gguf_->Has("tokenizer.ggml.model")) {
    tokenizer_ = Tokenizer::FromGguf(*gguf_);
    if (tokenizer_->n_vocab() != config_.n_vocab) {
      Fail("model: tokenizer has ", tokenizer_->n_vocab(), " tokens but 'token_embd.weight' has ",
           config_.n_vocab, " rows");
    }
  }
  CheckAndGroupWeights(group_weights, pool);
  for (const WeightView* w : HeldMatrices()) weight_bytes_ += MatrixBytes(*w);
  for (int32_t i = part_.first_layer; i < part_.last_layer; ++i) {
    for (const WeightView* w : ExpertMatrices(weights_.layers[static_cast<std::size_t>(i)]))
      weight_bytes_ += MatrixBytes(*w);
  }
}

std::vector<WeightView*> ModelParameters::HeldMatrices() {
  std::vector<WeightView*> held;
  if (part_.last_layer == config_.n_layer && part_.last_layer > part_.first_layer) {
    held.push_back(&weights_.output);
  }
  for (int32_t i = part_.first_layer; i < part_.last_layer; ++i) {
    LayerWeights& l = weights_.layers[static_cast<std::size_t>(i)];
    // A Gated DeltaNet layer has no attention matrices, an attention layer no ssm_* ones.
    for (WeightView* w : LayerMatrices(l))
      if (w->data != nullptr) held.push_back(w);
    for (WeightView* w : GatedDeltaNetMatrices(l))
      if (w->data != nullptr) held.push_back(w);
  }
  return held;
}

uint64_t ModelParameters::grouped_bytes() const { return grouped_bytes_; }

std::string ModelParameters::ShapeFingerprint() const {
  Fnv1a h;
  const ModelConfig& c = config_;
  h.Mix(c.arch);
  const int64_t dims[] = {c.n_vocab,
                          c.n_embd,
                          c.n_layer,
                          c.n_head,
                          c.n_head_kv,
                          c.head_dim,
                          c.n_ff,
                          c.sliding_window,
                          c.n_local_layers(),
                          static_cast<int64_t>(gguf_->file_size())};
  h.Mix(dims, sizeof(dims));
  for (const GgufTensor& t : gguf_->tensors()) {
    h.Mix(t.name);
    const auto type = static_cast<int64_t>(t.type);
    h.Mix(&type, sizeof(type));
    h.Mix(t.shape.data(), t.shape.size() * sizeof(int64_t));
  }
  return h.Hex();
}

const std::string& ModelParameters::file_name() const { return gguf_->name(); }

std::string ModelParameters::TensorName(const void* data) const {
  const auto* p = static_cast<const uint8_t*>(data);
  for (const GgufTensor& t : gguf_->tensors()) {
    if (t.data <= p && p < t.data + t.n_bytes) return t.name;
  }
  return "?";
}

void ModelParameters::CheckScales(const WeightView& w, ThreadPool& pool) const {
  std::atomic<int64_t> bad_row{w.n_out};
  const auto* data = static_cast<const uint8_t*>(w.data);
  pool.ParallelFor(w.n_out, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end && r < bad_row.load(std::memory_order_relaxed); ++r) {
      if (FirstNonFiniteScale(w.type, data + r * w.row_bytes, w.n_in) < 0) continue;
      int64_t seen = bad_row.load();
      while (r < seen && !bad_row.compare_exchange_weak(seen, r)) {
      }
      return;
    }
  });
  const int64_t row = bad_row.load();
  if (row == w.n_out) return;
  Fail("model: tensor '", TensorName(data), "' (", GgmlTypeName(w.type), ") of '", gguf_->name(),
       "' has ", BadScaleDescription(w.type), " in block ",
       FirstNonFiniteScale(w.type, data + row * w.row_bytes, w.n_in), " of row ", row,
       ": the file is damaged");
}

void ModelParameters::CheckAndGroupWeights(bool group_weights, ThreadPool& pool) {
  // A mixture's experts stay in the file's rows (nothing packs them), so they are checked on every
  // load, kept packed matrices or not. This reads every expert once: on a large mixture, the time
  // to read the file (llama.cpp checks them only with --check-tensors).
  for (int32_t i = part_.first_layer; i < part_.last_layer; ++i) {
    for (const WeightView* w : ExpertMatrices(weights_.layers[static_cast<std::size_t>(i)]))
      if (w->data != nullptr) CheckScales(*w, pool);
  }
  const KernelSet& kernels = ActiveKernels();
  std::vector<WeightView*> matrices = HeldMatrices();
  if (part_.first_layer == 0) matrices.push_back(&weights_.token_embd);
  std::vector<std::size_t> offsets(matrices.size(), kNotGrouped);
  std::size_t total = 0;
  for (std::size_t i = 0; i < matrices.size(); ++i) {
    const WeightView& w = *matrices[i];
    // The embedding is read row by row (a lookup), never multiplied: it keeps the GGUF layout.
    if (!group_weights || &w == &weights_.token_embd || !CanGroup(kernels, w)) continue;
    offsets[i] = total;
    total += RoundUpToCacheLine(static_cast<std::size_t>(GroupedMatrixBytes(w)));
  }
  grouped_bytes_ = total;
  const std::string key = total > 0 ? PackedWeightsKey(matrices, offsets) : "";
  const PackedWeightCache cache(key.empty() ? "" : UserCacheDirectory());
  // A kept file was checked (every scale) when it was packed from this very file.
  if (cache.enabled() && MapKeptPackedWeights(cache.Open(key, total), matrices, offsets, pool))
    return;
  // One buffer for every packed matrix, not one each: a matrix of a small model is under a
  // megabyte, too small for a huge page, and a 45 MB model's 57 buffers were 11,000 page faults
  // (a third of its load time, zeroing included) and TLB misses on every pass over the weights.
  grouped_.Resize(total);
  for (std::size_t i = 0; i < matrices.size(); ++i) {
    // Checked just before it is packed, so that the packing reads rows the check brought into
    // the cache rather than reading the whole file from memory twice.
    CheckScales(*matrices[i], pool);
    if (offsets[i] == kNotGrouped) continue;
    const WeightView rows = *matrices[i];
    *matrices[i] = PackMatrix(rows, grouped_.data() + offsets[i], pool);
    // The padding to the next cache line too: a kept file holds no stray bytes of this process.
    const auto packed = static_cast<std::size_t>(GroupedMatrixBytes(rows));
    std::memset(grouped_.data() + offsets[i] + packed, 0, RoundUpToCacheLine(packed) - packed);
    // A tied output matrix shares its rows with the embedding lookup, which keeps reading them.
    if (rows.data != weights_.token_embd.data) gguf_->ReleasePages(rows.data, MatrixBytes(rows));
  }
  if (cache.enabled()) {
    keeping_ = std::make_unique<PackedWeightWriter>(cache, key, grouped_.data(), total);
  }
}

std::string ModelParameters::PackedWeightsKey(const std::vector<WeightView*>& matrices,
                                              const std::vector<std::size_t>& offsets) const {
  const FileIdentity* file = gguf_->identity();
  if (file == nullptr) return "";  // bytes in memory (tests): nothing to key them by
  // The build decides the layout as much as kPackedLayoutVersion does (a rebuilt grove with the
  // same version may pack differently): an executable linked without a build ID keeps nothing.
  if (ExecutableBuildId().empty()) return "";
  Fnv1a layout;
  for (std::size_t i = 0; i < matrices.size(); ++i) {
    if (offsets[i] == kNotGrouped) continue;
    const WeightView& w = *matrices[i];
    const int64_t fields[] = {static_cast<int64_t>(offsets[i]), static_cast<int64_t>(w.type),
                              w.n_in, w.n_out, w.row_bytes};
    layout.Mix(fields, sizeof(fields));
  }
  return grove::PackedWeightsKey({.file = *file,
                                  .first_layer = part_.first_layer,
                                  .last_layer = part_.last_layer,
                                  .kernels = ActiveKernels().name,
                                  .layout_version = kPackedLayoutVersion,
                                  .layout = layout.value(),
                                  .build = ExecutableBuildId()});
}

void ModelParameters::StopKeepingPackedWeights() const {
  if (keeping_) keeping_->Abandon();
}

void ModelParameters::FinishKeepingPackedWeights() const {
  if (keeping_) keeping_->Finish();
}

bool ModelParameters::MapKeptPackedWeights(std::unique_ptr<KeptPackedWeights> kept,
                                           const std::vector<WeightView*>& matrices,
                                           const std::vector<std::size_t>& offsets,
                                           ThreadPool& pool) {
  if (!kept) return false;
  std::vector<WeightView> views(matrices.size());
  for (std::size_t i = 0; i < matrices.size(); ++i) {
    if (offsets[i] == kNotGrouped) continue;
    const std::optional<WeightView> view = PackedMatrixOf(*matrices[i], kept->data() + offsets[i]);
    if (!view) {
      Log(LogLevel::kWarn, "ignoring the packed weights '", kept->path(), "' (tensor '",
          TensorName(matrices[i]->data), "' differs from a fresh pack of '", gguf_->name(),
          "'); they will be packed again");
      return false;
    }
    views[i] = *view;
  }
  // Damage between the groups checked above (a flipped bit, a zeroed block): every later run would
  // compute with it, so the whole file is read once per load.
  if (!kept->ChecksumMatches(pool)) {
    Log(LogLevel::kWarn, "ignoring the packed weights '", kept->path(),
        "' (their checksum does not match: the file is damaged); they will be packed again");
    return false;
  }
  for (std::size_t i = 0; i < matrices.size(); ++i) {
    if (offsets[i] != kNotGrouped) *matrices[i] = views[i];
  }
  Log(LogLevel::kDebug, "model: '", gguf_->name(), "': packed weights from '", kept->path(), "'");
  kept_packed_ = std::move(kept);
  return true;
}

}  // namespace grove
