// The seam of Model::Forward: Model checks and lays out a batch (batch_layout.h), computes its
// rotations (rotary_tables.h) and writes its input rows (the token embeddings, or a pipeline
// stage's or a feature drafter's rows); then one backend runs the layers and the output head. The
// CPU backend (cpu_forward.h) computes with the kernels and ops of this machine, the CUDA backend
// (cuda_forward.h) on a GPU. Model holds no branch on the device.
//
// Each layer kind (layer_kind.h) is one op per backend. A backend checks at load that it has an
// op for every layer's kind and refuses the model naming the first it lacks, so a model never
// fails at its first forward for a layer its backend cannot run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

namespace grove {

class BatchLayout;
class KvCachePool;
class ModelParameters;
class RotaryTables;
class ThreadPool;
struct Batch;
struct ModelConfig;
struct ModelPart;

// Where a forward context computes: the CPU kernels, or a CUDA GPU (cuda_forward.h). kAuto: the
// GPU when one is present and runs the model, else the CPU (with one warning through the log when
// a GPU is there but cannot take the model: its memory, a sliding window).
enum class ComputeDevice : uint8_t { kCpu, kCuda, kAuto };
// "cpu", "cuda", "auto"; throws grove::Error on another name.
ComputeDevice ParseComputeDevice(std::string_view name);

// Rows of a context's scratch faulted in at load: one token, a draft level, a chain or small
// tree. 32 rows zeroed a megabyte of logits per model per run (32 KB a row with 8,000 tokens),
// mostly rows no run of auto's 5-8 token trees reaches: 0.5 ms of a 16-token run with a draft
// (issue 30). Larger batches fault in their rows when they first come.
inline constexpr std::size_t kPrefaultedRows = 8;

// What a mixture's layers read in one forward: the experts each of its expert layers ran (the
// union of its rows' choices), summed over those layers. Verifying n tokens costs what they read,
// not n times one token's reads. Zero for a model without experts.
struct ExpertsRead {
  int64_t experts = 0;  // summed over the layers
  int32_t layers = 0;   // expert layers the forward ran
  double per_layer() const { return layers > 0 ? static_cast<double>(experts) / layers : 0.0; }
};

// What a backend runs: the batch as Model checked and laid it out, with its rotations.
struct ForwardInput {
  const Batch& batch;
  const BatchLayout& layout;
  const RotaryTables& rotary;
};

class ForwardBackend {
 public:
  virtual ~ForwardBackend() = default;

  virtual ComputeDevice device() const = 0;
  // Whether it runs a range of the layers, and from input rows other than the token embeddings
  // (a pipeline stage, a feature drafter's fused input). Without, Model refuses such a forward.
  virtual bool runs_partial_forwards() const = 0;
  // Where Model writes a batch's input rows before Run: (max_batch, n_embd) floats.
  virtual float* input_rows() = 0;
  // Runs layers [first_layer, last_layer) of the batch over its input rows, writing each token's
  // keys and values into the slots the layout gave it (the caches hold them already). A range
  // ending at the last layer returns the logits of the rows that asked for them, in batch order,
  // (n_out, n_vocab) floats; any other returns the output rows, (n, n_embd) floats. Valid until
  // the next call.
  virtual std::span<const float> Run(const ForwardInput& input, int32_t first_layer,
                                     int32_t last_layer) = 0;
  // The residual stream after the last layer the last Run ran, before the final norm: (n, n_embd)
  // floats for its first n rows, valid until the next call.
  virtual std::span<const float> hidden_states(int32_t n) const = 0;
  // Bytes of its activations and scratch.
  virtual uint64_t activation_bytes() const = 0;
  // The experts the last Run read.
  virtual ExpertsRead experts_read() const = 0;
};

// Throws grove::Error naming why `device` cannot run layers `part` of a model of `config`: a
// layer kind it has no op for, a feature of the model it lacks, no GPU. kAuto is not a backend.
// Checked before the KV cache is allocated (on the GPU, its memory).
void CheckBackendRuns(ComputeDevice device, const ModelConfig& config, const ModelPart& part);

// The backend of `device` (kCpu or kCuda) for one forward context over `parameters`, the context's
// KV slots and thread pool, batches of up to max_batch tokens and n_ctx positions, `layout`'s
// bookkeeping. Throws grove::Error as CheckBackendRuns, or when the GPU's memory is short.
std::unique_ptr<ForwardBackend> MakeForwardBackend(ComputeDevice device,
                                                   const ModelParameters& parameters,
                                                   KvCachePool& kv, ThreadPool& pool,
                                                   int32_t max_batch, int32_t n_ctx,
                                                   const BatchLayout& layout);

}  // namespace grove
