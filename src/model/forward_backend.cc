#include "model/forward_backend.h"

#include "base/error.h"
#include "model/batch_layout.h"
#include "model/config.h"
#include "model/cpu_forward.h"
#include "model/cuda_forward.h"
#include "model/model_parameters.h"

namespace grove {

ComputeDevice ParseComputeDevice(std::string_view name) {
  if (name == "cpu") return ComputeDevice::kCpu;
  if (name == "cuda") return ComputeDevice::kCuda;
  if (name == "auto") return ComputeDevice::kAuto;
  Fail("device '", name, "': expected cpu, cuda or auto");
}

void CheckBackendRuns(ComputeDevice device, const ModelConfig& config, const ModelPart& part) {
  switch (device) {
    case ComputeDevice::kCpu:
      CpuForward::CheckSupported(config);
      return;
    case ComputeDevice::kCuda:
      CudaForward::CheckSupported(config);
      if (part.first_layer != 0 || part.last_layer != config.n_layer)
        Fail("cuda: a pipeline stage's layers do not run on the GPU yet");
      return;
    case ComputeDevice::kAuto:
      break;
  }
  Fail("forward: 'auto' is resolved to a device before a backend is made");
}

std::unique_ptr<ForwardBackend> MakeForwardBackend(ComputeDevice device,
                                                   const ModelParameters& parameters,
                                                   KvCachePool& kv, ThreadPool& pool,
                                                   int32_t max_batch, int32_t n_ctx,
                                                   const BatchLayout& layout) {
  CheckBackendRuns(device, parameters.config(), parameters.part());
  if (device == ComputeDevice::kCuda) {
    return std::make_unique<CudaForward>(parameters, kv, max_batch, layout.extra_capacity());
  }
  return std::make_unique<CpuForward>(parameters, kv, pool, max_batch, n_ctx);
}

}  // namespace grove
