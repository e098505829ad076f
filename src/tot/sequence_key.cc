#include "tot/sequence_key.h"

#include "base/error.h"

namespace grove {
namespace {

uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

uint64_t ThoughtSequenceKey(uint64_t seed, ThoughtPhase phase, int64_t step, int64_t state,
                            int64_t sample) {
  GROVE_CHECK(step >= 0 && step < kMaxSequenceKeyStep, "step ", step);
  GROVE_CHECK(state >= 0 && state < kMaxSequenceKeyState, "state ", state);
  GROVE_CHECK(sample >= 0 && sample < kMaxSequenceKeySample, "sample ", sample);
  const uint64_t packed = static_cast<uint64_t>(phase) << 63 | static_cast<uint64_t>(step) << 48 |
                          static_cast<uint64_t>(state) << 24 | static_cast<uint64_t>(sample);
  return Mix(Mix(seed) + packed);
}

}  // namespace grove
