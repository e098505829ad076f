// Deterministic random numbers for the corpus generators (train/corpus*.h) and for the puzzles the
// tasks draw (tasks/game24_puzzles.h); it lives in tasks/, the lower layer, so both can use it.
//
// std::uniform_int_distribution and friends are implementation-defined, so a corpus drawn through
// them could change with the standard library. The corpus must be byte-identical for a seed on any
// machine, so the generators use this SplitMix64 stream and its exact helpers instead. Each
// document gets its own stream (seed, document index): documents do not depend on each other, so a
// longer corpus of the same seed starts with the same documents.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace grove {

class CorpusRng {
 public:
  CorpusRng(uint64_t seed, uint64_t stream)
      : state_(Mix(seed ^ Mix(stream + 0x9E3779B97F4A7C15ull))) {}
  // A stream that starts from a raw state (the trainer keys each tensor's stream by its name).
  static CorpusRng FromState(uint64_t state) {
    CorpusRng rng(0, 0);
    rng.state_ = state;
    return rng;
  }

  uint64_t Next() {
    state_ += 0x9E3779B97F4A7C15ull;
    return Mix(state_);
  }
  // Uniform in [0, n), n > 0 (multiply-shift: the bias is below 2^-32 for the n used here).
  uint32_t Below(uint32_t n) {
    return static_cast<uint32_t>((static_cast<unsigned __int128>(Next()) * n) >> 64);
  }
  // Uniform in [lo, hi].
  int Range(int lo, int hi) {
    return lo + static_cast<int>(Below(static_cast<uint32_t>(hi - lo + 1)));
  }
  // Uniform in [0, 1) with 53 random bits.
  double Unit() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  bool Chance(double p) { return Unit() < p; }
  // Skewed towards the front of a list: index floor(n * u^2), so the first entries of a lexicon
  // list are common and the tail rare, as in natural text (a crude Zipf law).
  uint32_t Skewed(uint32_t n) {
    const double u = Unit();
    return static_cast<uint32_t>(static_cast<double>(n) * u * u);
  }
  template <typename T>
  const T& Pick(const std::vector<T>& v) {
    return v[Below(static_cast<uint32_t>(v.size()))];
  }
  template <typename T>
  const T& PickSkewed(const std::vector<T>& v) {
    return v[Skewed(static_cast<uint32_t>(v.size()))];
  }
  template <typename T>
  void Shuffle(std::vector<T>* v) {
    for (std::size_t i = v->size(); i > 1; --i)
      std::swap((*v)[i - 1], (*v)[Below(static_cast<uint32_t>(i))]);
  }

 private:
  static uint64_t Mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t state_;
};

}  // namespace grove
