// A fast 64-bit checksum of bytes, for telling a damaged file from the one that was written (a
// flipped bit, a block of zeros, a write cut short), not for security: anyone can make two inputs
// agree. Eight independent lanes each take a word per step (xor, rotate, one multiply), so a core
// checksums at about its memory bandwidth; a final mix spreads every lane into every bit.
// Stable across builds and machines (little-endian words, as on every CPU grove runs on).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace grove {

inline uint64_t Checksum64(const void* data, std::size_t n, uint64_t seed = 0) {
  constexpr uint64_t kOdd1 = 0x9E3779B97F4A7C15ull;  // 2^64 / golden ratio, made odd
  constexpr uint64_t kOdd2 = 0xBF58476D1CE4E5B9ull;
  constexpr int kLanes = 8;
  auto rotl = [](uint64_t x, int r) { return (x << r) | (x >> (64 - r)); };
  uint64_t lane[kLanes];
  for (int l = 0; l < kLanes; ++l) lane[l] = (seed + static_cast<uint64_t>(l) + 1) * kOdd1;
  const auto* p = static_cast<const uint8_t*>(data);
  std::size_t i = 0;
  for (; i + kLanes * 8 <= n; i += kLanes * 8) {
    for (int l = 0; l < kLanes; ++l) {
      uint64_t w;
      std::memcpy(&w, p + i + 8 * l, 8);
      lane[l] = rotl(lane[l] ^ w, 29) * kOdd2;
    }
  }
  uint64_t h = static_cast<uint64_t>(n) * kOdd1 ^ seed;
  for (int l = 0; l < kLanes; ++l) h = rotl(h ^ lane[l], 27) * kOdd1;
  for (; i < n; ++i) h = rotl(h ^ p[i], 13) * kOdd2;
  h ^= h >> 31;
  h *= kOdd2;
  h ^= h >> 29;
  h *= kOdd1;
  return h ^ (h >> 32);
}

}  // namespace grove
