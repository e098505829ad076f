// Counter-based random numbers (Philox-4x32-10, Salmon et al., SC'11). A draw is a pure function of
// (seed, sequence, position, draw index), so sampling gives the same tokens whatever the threading,
// batch composition or order in which sequences are processed (contract 4).
#pragma once

#include <array>
#include <cstdint>

namespace grove {

class CounterRng {
 public:
  explicit CounterRng(uint64_t seed)
      : key_{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)} {}

  // Four independent 32-bit words for one counter value.
  std::array<uint32_t, 4> Bits(uint64_t sequence, uint64_t position, uint32_t draw) const {
    std::array<uint32_t, 4> ctr = {
        static_cast<uint32_t>(position), static_cast<uint32_t>(position >> 32),
        static_cast<uint32_t>(sequence), draw ^ static_cast<uint32_t>(sequence >> 32)};
    std::array<uint32_t, 2> key = key_;
    for (int round = 0; round < 10; ++round) {
      const uint64_t p0 = uint64_t{0xD2511F53} * ctr[0];
      const uint64_t p1 = uint64_t{0xCD9E8D57} * ctr[2];
      ctr = {static_cast<uint32_t>(p1 >> 32) ^ ctr[1] ^ key[0], static_cast<uint32_t>(p1),
             static_cast<uint32_t>(p0 >> 32) ^ ctr[3] ^ key[1], static_cast<uint32_t>(p0)};
      key[0] += 0x9E3779B9;
      key[1] += 0xBB67AE85;
    }
    return ctr;
  }

  // Uniform in [0, 1) with 53 random bits.
  double Uniform(uint64_t sequence, uint64_t position, uint32_t draw) const {
    std::array<uint32_t, 4> b = Bits(sequence, position, draw);
    const uint64_t bits = (uint64_t{b[0]} << 21) ^ (uint64_t{b[1]} >> 11);
    return static_cast<double>(bits & ((uint64_t{1} << 53) - 1)) * 0x1.0p-53;
  }

 private:
  std::array<uint32_t, 2> key_;
};

}  // namespace grove
