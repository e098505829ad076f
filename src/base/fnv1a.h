// FNV-1a, 64 bits: a stable hash for fingerprints and cache keys (not for security: anyone can
// make two inputs collide). Stable across builds and machines, unlike std::hash.
#pragma once

#include <cinttypes>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace grove {

class Fnv1a {
 public:
  explicit Fnv1a(uint64_t seed = 0) : h_(kOffsetBasis ^ seed) {}

  Fnv1a& Mix(const void* data, std::size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    for (std::size_t i = 0; i < n; ++i) h_ = (h_ ^ p[i]) * kPrime;
    return *this;
  }
  Fnv1a& Mix(std::string_view s) { return Mix(s.data(), s.size()); }

  uint64_t value() const { return h_; }
  // 16 lower-case hex digits.
  std::string Hex() const {
    char buf[17];
    std::snprintf(buf, sizeof(buf), "%016" PRIx64, h_);
    return buf;
  }

 private:
  static constexpr uint64_t kOffsetBasis = 1469598103934665603ull;
  static constexpr uint64_t kPrime = 1099511628211ull;
  uint64_t h_;
};

}  // namespace grove
