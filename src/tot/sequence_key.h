// The RNG keys of the search's generations (GenerationRequest::sequence).
//
// A generation's text depends on its prompt and key only, so keys derived from where the
// generation sits in the search make a run reproducible under any scheduling policy. The fields are
// packed into one 64-bit word without overlap, phase in bit 63, step in bits 48..62, state in bits
// 24..47, sample in bits 0..23:
//   key = Mix(Mix(seed) + packed)
// Mix is SplitMix64's finalizer, a bijection of 64-bit words, and adding a constant is one too, so
// two generations of one search (one seed) never share a key; Mix spreads the keys so that streams
// of nearby generations and of nearby seeds do not start alike.
#pragma once

#include <cstdint>

namespace grove {

enum class ThoughtPhase : uint32_t {
  kGenerate =
      0,  // G: proposals of next steps; state = index of the state expanded, sample = 0..n-1
  kEvaluate = 1,  // E: the value of a candidate; state = index of the candidate, sample = 0
};

// Limits of the fields (exclusive); GROVE_CHECK'd.
inline constexpr int64_t kMaxSequenceKeyStep = int64_t{1} << 15;
inline constexpr int64_t kMaxSequenceKeyState = int64_t{1} << 24;
inline constexpr int64_t kMaxSequenceKeySample = int64_t{1} << 24;

// step counts from 1 (the first expansion), state and sample from 0.
uint64_t ThoughtSequenceKey(uint64_t seed, ThoughtPhase phase, int64_t step, int64_t state,
                            int64_t sample);

}  // namespace grove
