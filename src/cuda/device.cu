#include <cuda_runtime.h>

#include <mutex>

#include "base/error.h"
#include "cuda/device.h"

namespace grove::cuda {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

void Check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) Fail("cuda: ", what, ": ", cudaGetErrorString(e));
}

cudaStream_t TheStream() {
  static cudaStream_t stream = [] {
    cudaStream_t s = nullptr;
    Check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    return s;
  }();
  return stream;
}

}  // namespace

bool Built() { return true; }

int DeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error of a machine without a driver
    return 0;
  }
  return count;
}

std::string NoDeviceReason() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return StrCat("no CUDA device (", cudaGetErrorString(e), ")");
  }
  return count == 0 ? "no CUDA device" : "";
}

DeviceInfo Info() {
  if (DeviceCount() == 0) Fail("cuda: ", NoDeviceReason());
  cudaDeviceProp p{};
  Check(cudaGetDeviceProperties(&p, 0), "cudaGetDeviceProperties");
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  Check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  return DeviceInfo{.name = p.name,
                    .major = p.major,
                    .minor = p.minor,
                    .multiprocessors = p.multiProcessorCount,
                    .total_bytes = total_bytes,
                    .free_bytes = free_bytes};
}

void* Malloc(std::size_t bytes) {
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();
    std::size_t free_bytes = 0;
    std::size_t total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    Fail("cuda: cannot allocate ", static_cast<double>(bytes) / kGiB, " GiB on the GPU (",
         cudaGetErrorString(e), "; free ", static_cast<double>(free_bytes) / kGiB, " GiB of ",
         static_cast<double>(total_bytes) / kGiB, " GiB)");
  }
  return p;
}

void Free(void* p) {
  if (p) cudaFree(p);
}

void* MallocHost(std::size_t bytes) {
  void* p = nullptr;
  Check(cudaMallocHost(&p, bytes), "cudaMallocHost");
  return p;
}

void FreeHost(void* p) {
  if (p) cudaFreeHost(p);
}

void CopyToDevice(void* dst, const void* src, std::size_t bytes) {
  if (bytes)
    Check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, TheStream()), "copy to device");
}

void CopyToHost(void* dst, const void* src, std::size_t bytes) {
  if (bytes)
    Check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, TheStream()), "copy to host");
}

void CopyOnDevice(void* dst, const void* src, std::size_t bytes) {
  if (bytes)
    Check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, TheStream()),
          "copy on device");
}

void Fill(void* dst, int value, std::size_t bytes) {
  if (bytes) Check(cudaMemsetAsync(dst, value, bytes, TheStream()), "memset");
}

void Sync() { Check(cudaStreamSynchronize(TheStream()), "synchronize"); }

void CheckLaunch(const char* kernel) { Check(cudaGetLastError(), kernel); }

void* Stream() { return TheStream(); }

void BeginCapture() {
  Check(cudaStreamBeginCapture(TheStream(), cudaStreamCaptureModeThreadLocal), "begin capture");
}

void* EndCapture() {
  cudaGraph_t graph = nullptr;
  Check(cudaStreamEndCapture(TheStream(), &graph), "end capture");
  cudaGraphExec_t exec = nullptr;
  const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  Check(e, "graph instantiate");
  return exec;
}

void Launch(void* graph) {
  Check(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph), TheStream()), "graph launch");
}

void DestroyGraph(void* graph) {
  if (graph) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph));
}

StreamTimer::StreamTimer() {
  cudaEvent_t a = nullptr;
  cudaEvent_t b = nullptr;
  Check(cudaEventCreate(&a), "event");
  Check(cudaEventCreate(&b), "event");
  start_ = a;
  stop_ = b;
}

StreamTimer::~StreamTimer() {
  cudaEventDestroy(static_cast<cudaEvent_t>(start_));
  cudaEventDestroy(static_cast<cudaEvent_t>(stop_));
}

void StreamTimer::Start() {
  Check(cudaEventRecord(static_cast<cudaEvent_t>(start_), TheStream()), "event record");
}

double StreamTimer::StopMs() {
  Check(cudaEventRecord(static_cast<cudaEvent_t>(stop_), TheStream()), "event record");
  Check(cudaEventSynchronize(static_cast<cudaEvent_t>(stop_)), "event synchronize");
  float ms = 0.0f;
  Check(
      cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start_), static_cast<cudaEvent_t>(stop_)),
      "event time");
  return ms;
}

double MeasureCopyBandwidth(std::size_t bytes, int reps) {
  DeviceBuffer a(bytes);
  DeviceBuffer b(bytes);
  Fill(a.data(), 1, bytes);
  CopyOnDevice(b.data(), a.data(), bytes);  // warm-up
  StreamTimer timer;
  timer.Start();
  for (int i = 0; i < reps; ++i)
    CopyOnDevice(i % 2 ? a.data() : b.data(), i % 2 ? b.data() : a.data(), bytes);
  const double ms = timer.StopMs();
  return 2.0 * static_cast<double>(bytes) * reps / (ms * 1e-3);
}

}  // namespace grove::cuda
