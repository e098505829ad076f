// grove built without the CUDA toolkit (GROVE_CUDA off): no device, and every use says why.
#include "base/error.h"
#include "cuda/device.h"

namespace grove::cuda {
namespace {

[[noreturn]] void NotBuilt() { Fail("cuda: ", NoDeviceReason()); }

}  // namespace

bool Built() { return false; }
int DeviceCount() { return 0; }
std::string NoDeviceReason() {
  return "grove was built without CUDA (configure with the CUDA toolkit installed, or "
         "-DGROVE_CUDA=ON)";
}
DeviceInfo Info() { NotBuilt(); }
void* Malloc(std::size_t) { NotBuilt(); }
void Free(void*) {}
void* MallocHost(std::size_t) { NotBuilt(); }
void FreeHost(void*) {}
void CopyToDevice(void*, const void*, std::size_t) { NotBuilt(); }
void CopyToHost(void*, const void*, std::size_t) { NotBuilt(); }
void CopyOnDevice(void*, const void*, std::size_t) { NotBuilt(); }
void Fill(void*, int, std::size_t) { NotBuilt(); }
void Sync() { NotBuilt(); }
void CheckLaunch(const char*) { NotBuilt(); }
void* Stream() { NotBuilt(); }
void BeginCapture() { NotBuilt(); }
void* EndCapture() { NotBuilt(); }
void Launch(void*) { NotBuilt(); }
void DestroyGraph(void*) {}
StreamTimer::StreamTimer() { NotBuilt(); }
StreamTimer::~StreamTimer() = default;
void StreamTimer::Start() { NotBuilt(); }
double StreamTimer::StopMs() { NotBuilt(); }
double MeasureCopyBandwidth(std::size_t, int) { NotBuilt(); }

}  // namespace grove::cuda
