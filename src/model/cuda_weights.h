// A model's parameters on the GPU: every matrix a forward multiplies with, in the layout of
// cuda/kernels.h, and the norms and biases as f32. Uploaded once per ModelParameters and shared
// by every forward context of them (a scheduler's lanes, a draft made again after a swap).
//
// BF16, F16 and Q8_0 matrices keep their bytes (Q8_0's quants permuted within each 64-element
// chunk, its scales beside them); every other type grove reads is expanded to F16 row by row
// (docs/cuda.md: Q4_K and Q6_K have no kernel of their own yet), with a warning naming the types.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cuda/device.h"
#include "cuda/kernels.h"

namespace grove {

class ModelParameters;

struct CudaLayerWeights {
  cuda::DeviceMatrix wq, wk, wv, wo, w_gate, w_up, w_down;
  const float* attn_norm = nullptr;
  const float* ffn_norm = nullptr;
  const float* bq = nullptr;  // null where the family has none
  const float* bk = nullptr;
  const float* bv = nullptr;
  const float* q_norm = nullptr;
  const float* k_norm = nullptr;
  const float* attn_post_norm = nullptr;
  const float* ffn_post_norm = nullptr;
};

struct CudaWeights {
  std::vector<CudaLayerWeights> layers;
  cuda::DeviceMatrix output;
  const float* output_norm = nullptr;
  uint64_t bytes = 0;  // device memory held
  std::vector<cuda::DeviceBuffer> buffers;
};

// The parameters' weights on the GPU: uploaded at the first call, shared while any caller holds
// them. Throws grove::Error when the GPU's free memory cannot hold them (naming both sizes).
std::shared_ptr<const CudaWeights> UploadWeights(const ModelParameters& parameters);

}  // namespace grove
