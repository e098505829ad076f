// grove built without the CUDA toolkit: the kernels are never reached (no device is reported, so
// no CUDA forward is made); each says so if called.
#include "base/error.h"
#include "cuda/device.h"
#include "cuda/kernels.h"

namespace grove::cuda {
namespace {

[[noreturn]] void NotBuilt() { Fail("cuda: ", NoDeviceReason()); }

}  // namespace

void MatMul(const DeviceMatrix&, const float*, int32_t, int32_t, float*, int32_t, void*) {
  NotBuilt();
}
void SetMatMulTiling(int) {}
void RmsNorm(const float*, const int32_t*, const float*, float*, int32_t, int32_t, float) {
  NotBuilt();
}
void AddBias(float*, const float*, int32_t, int32_t) { NotBuilt(); }
void AddResidual(float*, const float*, const float*, int32_t, int32_t, float) { NotBuilt(); }
void GatedActivation(int, float*, const float*, int64_t) { NotBuilt(); }
void SoftCap(float*, int64_t, float) { NotBuilt(); }
void RotateAndStore(const RotateArgs&) { NotBuilt(); }
void Attention(const AttentionArgs&) { NotBuilt(); }
void MoveKvRows(float*, float*, const int32_t*, int32_t, int32_t, int64_t, int32_t) { NotBuilt(); }

}  // namespace grove::cuda
