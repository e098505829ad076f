// Owning, 64-byte aligned, uninitialised storage for kernels (one cache line, one AVX-512
// register).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace grove {

inline constexpr std::size_t kCacheLine = 64;

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
    std::size_t bytes = (n * sizeof(T) + kCacheLine - 1) / kCacheLine * kCacheLine;
    data_ = static_cast<T*>(std::aligned_alloc(kCacheLine, bytes));
    if (data_ == nullptr) throw std::bad_alloc();
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
