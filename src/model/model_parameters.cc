#include "model/model_parameters.h"

#include "base/error.h"
#include "io/gguf.h"
#include "kernels/kernel_set.h"
#include "model/tokenizer.h"
#include "ops/matmul.h"

namespace grove {
namespace {

uint64_t MatrixBytes(const WeightView& w) { return static_cast<uint64_t>(w.row_bytes) * w.n_out; }

}  // namespace

std::shared_ptr<const ModelParameters> ModelParameters::Load(const std::string& path,
                                                             bool group_weights, ThreadPool& pool) {
  return FromGguf(GgufFile::Open(path), group_weights, pool);
}

std::shared_ptr<const ModelParameters> ModelParameters::FromGguf(std::unique_ptr<GgufFile> gguf,
                                                                 bool group_weights,
                                                                 ThreadPool& pool) {
  return std::shared_ptr<const ModelParameters>(
      new ModelParameters(std::move(gguf), group_weights, pool));
}

ModelParameters::~ModelParameters() = default;

ModelParameters::ModelParameters(std::unique_ptr<GgufFile> gguf, bool group_weights,
                                 ThreadPool& pool)
    : gguf_(std::move(gguf)),
      config_(ConfigFromGguf(*gguf_)),
      weights_(BindWeights(*gguf_, config_)) {
  if (gguf_->Has("tokenizer.ggml.model")) {
    tokenizer_ = Tokenizer::FromGguf(*gguf_);
    if (tokenizer_->n_vocab() != config_.n_vocab) {
      Fail("model: tokenizer has ", tokenizer_->n_vocab(), " tokens but 'token_embd.weight' has ",
           config_.n_vocab, " rows");
    }
  }
  if (group_weights) GroupWeights(pool);
  for (const WeightView* w : ForwardMatrices(weights_)) weight_bytes_ += MatrixBytes(*w);
}

uint64_t ModelParameters::grouped_bytes() const {
  uint64_t n = 0;
  for (const AlignedBuffer<uint8_t>& b : grouped_) n += b.size();
  return n;
}

void ModelParameters::GroupWeights(ThreadPool& pool) {
  const KernelSet& kernels = ActiveKernels();
  for (WeightView* w : ForwardMatrices(weights_)) {
    if (!CanGroup(kernels, *w)) continue;
    const WeightView rows = *w;
    AlignedBuffer<uint8_t>& buffer =
        grouped_.emplace_back(static_cast<std::size_t>(GroupedMatrixBytes(rows)));
    *w = PackMatrix(rows, buffer.data(), pool);
    // A tied output matrix shares its rows with the embedding lookup, which keeps reading them.
    if (rows.data != weights_.token_embd.data) gguf_->ReleasePages(rows.data, MatrixBytes(rows));
  }
}

}  // namespace grove
