// What a loaded model is, apart from any forward pass: its GGUF file, config, tokenizer and weight
// bindings, with the matrices regrouped at load for the active kernels. Immutable once loaded, so
// every forward context of the process (model.h) shares one copy: a scheduler running n sequences
// with n concurrent drafters holds one target and one draft in memory, and resident memory grows by
// KV caches and activations only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/aligned_buffer.h"
#include "io/mapped_file.h"
#include "model/config.h"
#include "model/weights.h"

namespace grove {

class GgufFile;
class KeptPackedWeights;
class PackedWeightWriter;
class ThreadPool;
class Tokenizer;

// The layers [first_layer, last_layer) a process runs of a model (a pipeline stage): the
// embedding when the range starts at layer 0, the output norm and head when it ends at the last.
// Only these weights are read and regrouped; every tensor is still validated from the file's
// header, and the file is mapped whole (address space: the pages of other layers are never read).
// last_layer -1: to the last layer. The whole model by default; {0, 0}: the configuration and
// tokenizer only.
struct ModelPart {
  int32_t first_layer = 0;
  int32_t last_layer = -1;
};

class ModelParameters {
 public:
  // Opens, validates and binds a GGUF model; `pool` computes the regrouping (group_weights). Throws
  // grove::Error naming the problem.
  static std::shared_ptr<const ModelParameters> Load(const std::string& path, bool group_weights,
                                                     ThreadPool& pool, ModelPart part = {},
                                                     FileBacking backing = FileBacking::kMapped);
  static std::shared_ptr<const ModelParameters> FromGguf(std::unique_ptr<GgufFile> gguf,
                                                         bool group_weights, ThreadPool& pool,
                                                         ModelPart part = {});
  ~ModelParameters();
  ModelParameters(const ModelParameters&) = delete;
  ModelParameters& operator=(const ModelParameters&) = delete;

  const ModelConfig& config() const { return config_; }
  const GgufFile& gguf() const { return *gguf_; }
  const ModelWeights& weights() const { return weights_; }
  // Null when the file carries no vocabulary.
  const Tokenizer* tokenizer() const { return tokenizer_.get(); }
  // The layers held (last_layer resolved), and whether [first, last) is among them.
  const ModelPart& part() const { return part_; }
  bool Holds(int32_t first_layer, int32_t last_layer) const {
    return first_layer >= part_.first_layer && last_layer <= part_.last_layer;
  }
  // Bytes of weights read by one forward pass of the layers held (for achieved-bandwidth figures).
  uint64_t weight_bytes() const { return weight_bytes_; }
  // Bytes held by the matrices regrouped at load (each rounded up to a cache line); 0 if none.
  uint64_t grouped_bytes() const;
  // Whether the grouped matrices are mapped from a file an earlier run kept, not packed here.
  bool packed_weights_kept() const { return kept_packed_ != nullptr; }
  // Stops keeping the grouped matrices for later runs, if they are still being written
  // (PackedWeightWriter::Abandon): for a model about to be closed on a thread that must not wait
  // for the writes left.
  void StopKeepingPackedWeights() const;
  // Writes what is left of the grouped matrices' kept file, if it is still being written, as the
  // destructor would: for a process that ends without destroying its models.
  void FinishKeepingPackedWeights() const;
  // What a forward of this model computes, not with which values: the architecture, the attention's
  // shape (heads and window change the work without changing a tensor), every tensor's name, type
  // and shape, and the file's size; 16 hex digits.
  std::string ShapeFingerprint() const;
  // The file's name, for messages.
  const std::string& file_name() const;

 private:
  ModelParameters(std::unique_ptr<GgufFile> gguf, bool group_weights, ThreadPool& pool,
                  ModelPart part);
  // The matrices a forward of the layers held multiplies with.
  std::vector<WeightView*> HeldMatrices();
  // Refuses a matrix with a NaN or infinite block scale, naming its tensor and row: such a block
  // is NaN, and through the next layers so is every logit. Reads 2-4 bytes per block, spread over
  // the pool (about 55 ms per GB on 2 cores: every cache line is touched).
  void CheckScales(const WeightView& w, ThreadPool& pool) const;
  // The name of the tensor whose bytes hold `data`, for messages ("?" if none does).
  std::string TensorName(const void* data) const;
  // Checks every held matrix and expert, and the embedding when the first layer is held
  // (CheckScales); with group_weights packs the matrices a group kernel can compute into grouped_,
  // releasing their file pages, and keeps them for later runs (keeping_), or maps what an earlier
  // run packed of this file (model/packed_weight_cache.h), which was checked when it was packed.
  void CheckAndGroupWeights(bool group_weights, ThreadPool& pool);
  // What a kept file of these packed matrices is keyed by (model/packed_weight_cache.h): the file's
  // identity, the layers held, the kernels, the packed layout with where each matrix goes, and
  // grove's version and build; "" for a model read from memory.
  std::string PackedWeightsKey(const std::vector<WeightView*>& matrices,
                               const std::vector<std::size_t>& offsets) const;
  // Points the grouped matrices into `kept` when every one of them matches it (PackedMatrixOf) and
  // its checksum its bytes; false, with a warning, when one does not, and false for no file.
  bool MapKeptPackedWeights(std::unique_ptr<KeptPackedWeights> kept,
                            const std::vector<WeightView*>& matrices,
                            const std::vector<std::size_t>& offsets, ThreadPool& pool);

  std::unique_ptr<GgufFile> gguf_;
  ModelConfig config_;
  ModelPart part_;
  ModelWeights weights_;
  std::unique_ptr<Tokenizer> tokenizer_;
  uint64_t weight_bytes_ = 0;
  // The matrices regrouped at load, one after another (CheckAndGroupWeights), in grouped_ or, as a
  // run before this one packed them, in kept_packed_.
  AlignedBuffer<uint8_t> grouped_;
  std::unique_ptr<KeptPackedWeights> kept_packed_;
  uint64_t grouped_bytes_ = 0;
  std::unique_ptr<PackedWeightWriter> keeping_;  // writes grouped_ for later runs
};

}  // namespace grove
