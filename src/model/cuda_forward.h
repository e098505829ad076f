// The forward pass of one context on a CUDA GPU (forward_backend.h, ModelOptions::device = kCuda):
// Model lays out the batch on the host as for the CPU (visibility, cache slots, rotations,
// embeddings) and this runs every layer on the GPU over the weights (cuda_weights.h) and the KV
// slots of the context's pool (kv_cache.h, held on the device). One CUDA graph per batch shape
// (tokens, logits rows) is captured at its first use and replayed after, so a decode step is one
// launch.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "cuda/device.h"
#include "model/config.h"
#include "model/cuda_weights.h"
#include "model/forward_backend.h"

namespace grove {

class KvCachePool;
class ModelParameters;

class CudaForward final : public ForwardBackend {
 public:
  // Throws grove::Error naming what the GPU path does not run (sliding-window attention, a head
  // size) or the memory it lacks. `extra_capacity`: most entries of BatchLayout::extra.
  CudaForward(const ModelParameters& parameters, KvCachePool& kv, int32_t max_batch,
              int64_t extra_capacity);
  ~CudaForward() override;
  CudaForward(const CudaForward&) = delete;
  CudaForward& operator=(const CudaForward&) = delete;

  // Throws grove::Error naming why this model cannot run on the GPU: no device, or the first thing
  // of it the GPU path does not run (a layer kind, a sliding window, a width).
  static void CheckSupported(const ModelConfig& config);

  ComputeDevice device() const override { return ComputeDevice::kCuda; }
  // Every layer from the token embeddings only.
  bool runs_partial_forwards() const override { return false; }
  // Page-locked: the rows go to the GPU from here.
  float* input_rows() override { return x_host_.as<float>(); }
  // Runs every layer of the batch; returns its logits rows, (n_out, n_vocab), valid until the next
  // call.
  std::span<const float> Run(const ForwardInput& input, int32_t first_layer,
                             int32_t last_layer) override;
  // Copied from the GPU.
  std::span<const float> hidden_states(int32_t n) const override;
  uint64_t activation_bytes() const override;
  // Mixtures are refused on the GPU (CheckBackendRuns): nothing to count.
  ExpertsRead experts_read() const override { return {}; }

 private:
  // Copies the layout's arrays, the rotations and the input rows to the GPU.
  void Upload(const ForwardInput& input);
  // Queues the layers and the logits of a batch of this shape on the stream: each layer's kinds
  // (layer_kind.h), one op each.
  void Enqueue(int32_t n, int32_t n_out);
  void EnqueueMixer(const CudaLayerWeights& w, int32_t layer, int32_t n, MixerKind kind);
  void EnqueueFeedForward(const CudaLayerWeights& w, int32_t n, FeedForwardKind kind);
  void EnqueueAttention(const CudaLayerWeights& w, int32_t layer, int32_t n);
  void EnqueueGatedFeedForward(const CudaLayerWeights& w, int32_t n);
  void EnqueueLogits(int32_t n_out);
  void ReserveLogits(int32_t n_out);
  void DropGraphs();

  const ModelConfig& config_;
  std::shared_ptr<const CudaWeights> weights_;
  int32_t max_batch_;
  int64_t extra_capacity_;
  cuda::DeviceBuffer x_, xb_, q_, k_, v_, att_, gate_, up_, proj_, logits_;
  // A batch's arrays, staged in page-locked memory and copied in three transfers: the integers
  // (seq, slot, prefix_len, extra_begin, out_rows at fixed offsets, then extra), the rotations,
  // the embeddings (into x_). Device addresses stay fixed, as the graphs need.
  struct StagedInts {
    std::size_t seq, slot, prefix_len, extra_begin, out_rows, extra, ints;  // in int32s
  };
  StagedInts staged_{};
  cuda::DeviceBuffer ints_, cos_sin_;
  cuda::HostBuffer ints_host_, cos_sin_host_, x_host_;
  int32_t* DeviceInts(std::size_t offset) const { return ints_.as<int32_t>() + offset; }
  cuda::DeviceBuffer act16_;  // a product's activations rounded to 16 bits (cuda::MatMul)
  cuda::DeviceBuffer k_table_, v_table_;  // (n_seq) device pointers of each slot's cache
  cuda::KvTable kv_table_;
  cuda::HostBuffer host_logits_;  // page-locked: the graphs copy into it
  int32_t host_logits_rows_ = 0;
  mutable std::vector<float> hidden_;  // hidden_states()' copy
  bool graphs_enabled_ = true;
  std::map<std::pair<int32_t, int32_t>, void*> graphs_;  // (n, n_out) -> instantiated graph
};

}  // namespace grove
