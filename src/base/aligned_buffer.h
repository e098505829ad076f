// Owning, 64-byte aligned, uninitialised storage for kernels (one cache line, one AVX-512
// register).
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace grove {

inline constexpr std::size_t kCacheLine = 64;
inline constexpr std::size_t kHugePage = std::size_t{2} << 20;
inline constexpr std::size_t kHugeFrom = std::size_t{4} << 20;  // smaller buffers: plain pages

template <typename T>
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(std::size_t n) { Resize(n); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  AlignedBuffer(AlignedBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept {
    if (this != &other) {
      std::free(data_);
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  ~AlignedBuffer() { std::free(data_); }

  // Discards the contents. Called at load time only, never in the token loop.
  void Resize(std::size_t n) {
    std::free(data_);
    data_ = nullptr;
    size_ = n;
    if (n == 0) return;
    if (n > (static_cast<std::size_t>(-1) - kCacheLine) / sizeof(T)) throw std::bad_alloc();
    // Buffers of megabytes (packed weights, KV caches, scratch) start on a 2 MiB boundary and ask
    // for transparent huge pages: a 45 MB model's packed weights were 11,000 page faults at load,
    // and 4 KiB pages cost TLB misses on every pass over them. Where THP is off, madvise fails
    // harmlessly and the pages stay small.
    const std::size_t align = n * sizeof(T) >= kHugeFrom ? kHugePage : kCacheLine;
    std::size_t bytes = (n * sizeof(T) + align - 1) / align * align;
    data_ = static_cast<T*>(std::aligned_alloc(align, bytes));
    if (data_ == nullptr) throw std::bad_alloc();
    if (align == kHugePage) ::madvise(static_cast<void*>(data_), bytes, MADV_HUGEPAGE);
  }

  // Zeroes every element: called at load, so the pages are faulted in then and not by the first
  // forwards that reach them (which made a first generation measurably slower than later ones).
  void Zero() { ZeroFirst(size_); }
  // The same for the first min(n, size()) elements only.
  void ZeroFirst(std::size_t n) {
    if (data_ != nullptr) std::memset(static_cast<void*>(data_), 0, std::min(n, size_) * sizeof(T));
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  std::size_t size() const { return size_; }
  T& operator[](std::size_t i) { return data_[i]; }
  const T& operator[](std::size_t i) const { return data_[i]; }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace grove
