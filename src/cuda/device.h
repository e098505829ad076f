// The CUDA device as grove uses it: whether one is there, its memory, one stream that every
// kernel, copy and KV-cache edit of the process is ordered on, and CUDA graphs of that stream.
//
// Plain C++ (no CUDA header): the layers above compile with the host compiler alone. A build
// without the CUDA toolkit (GROVE_CUDA off) links device_none.cc instead, where DeviceCount() is 0
// and everything else throws grove::Error saying so, so every caller has one code path.
//
// Errors of the CUDA runtime throw grove::Error naming the call and CUDA's message
// ("cuda: cudaMalloc of 17179869184 bytes: out of memory (free 12.1 GiB of 79.1 GiB)").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace grove::cuda {

struct DeviceInfo {
  std::string name;
  int major = 0;  // compute capability
  int minor = 0;
  int multiprocessors = 0;
  uint64_t total_bytes = 0;
  uint64_t free_bytes = 0;
};

// True when grove was built with the CUDA toolkit (GROVE_CUDA).
bool Built();
// CUDA devices present (0 without a CUDA build, a driver or a device). Never throws.
int DeviceCount();
// Why DeviceCount() is 0, for messages ("grove was built without CUDA", "no CUDA device: ...").
std::string NoDeviceReason();
// Device 0, which grove uses. Throws when there is none.
DeviceInfo Info();

// Device memory. Malloc throws grove::Error naming the bytes asked and the memory free.
void* Malloc(std::size_t bytes);
void Free(void* p);
// Page-locked host memory (asynchronous copies from and to it).
void* MallocHost(std::size_t bytes);
void FreeHost(void* p);

// Copies on grove's stream, asynchronous to the host. Sync() waits for everything queued.
void CopyToDevice(void* dst, const void* src, std::size_t bytes);
void CopyToHost(void* dst, const void* src, std::size_t bytes);
void CopyOnDevice(void* dst, const void* src, std::size_t bytes);
void Fill(void* dst, int value, std::size_t bytes);
void Sync();
// Throws if the last kernel launch failed (launch configuration, a fault seen at a Sync).
void CheckLaunch(const char* kernel);
// The stream (a cudaStream_t) for kernel launches (kernels.cu).
void* Stream();

// A CUDA graph of what was queued on the stream between BeginCapture and EndCapture, replayed
// with Launch. Null graphs are not launched.
void BeginCapture();
void* EndCapture();  // the instantiated graph (cudaGraphExec_t)
void Launch(void* graph);
void DestroyGraph(void* graph);

// Milliseconds between two points of the stream: Mark() records one (events are recycled).
class StreamTimer {
 public:
  StreamTimer();
  ~StreamTimer();
  StreamTimer(const StreamTimer&) = delete;
  StreamTimer& operator=(const StreamTimer&) = delete;
  void Start();
  // Waits for the stream and returns the milliseconds since Start().
  double StopMs();

 private:
  void* start_ = nullptr;
  void* stop_ = nullptr;
};

// Memory of one kind (Allocate/Release: device or page-locked host) owned by one object.
template <void* (*Allocate)(std::size_t), void (*Release)(void*)>
class OwnedMemory {
 public:
  OwnedMemory() = default;
  explicit OwnedMemory(std::size_t bytes)
      : data_(bytes ? Allocate(bytes) : nullptr), bytes_(bytes) {}
  ~OwnedMemory() { Release(data_); }
  OwnedMemory(OwnedMemory&& o) noexcept : data_(o.data_), bytes_(o.bytes_) {
    o.data_ = nullptr;
    o.bytes_ = 0;
  }
  OwnedMemory& operator=(OwnedMemory&& o) noexcept {
    if (this != &o) {
      Release(data_);
      data_ = o.data_;
      bytes_ = o.bytes_;
      o.data_ = nullptr;
      o.bytes_ = 0;
    }
    return *this;
  }
  OwnedMemory(const OwnedMemory&) = delete;
  OwnedMemory& operator=(const OwnedMemory&) = delete;
  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  std::size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

using DeviceBuffer = OwnedMemory<Malloc, Free>;
using HostBuffer = OwnedMemory<MallocHost, FreeHost>;

// Device-to-device copy bandwidth, bytes read plus bytes written per second, over a buffer of
// `bytes` copied `reps` times (the ceiling a memory-bound forward is measured against).
double MeasureCopyBandwidth(std::size_t bytes, int reps);

}  // namespace grove::cuda
