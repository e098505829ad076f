// How a scheduler orders the target's work over many sequences (scheduler.h):
//   serial-ar  one sequence after another, plain decoding (the baseline of every figure);
//   serial-sd  one sequence after another, speculative decoding;
//   seed       SEED's Algorithm 2 (arXiv 2406.18200): every sequence drafts on its own thread, a
//              finished draft waits in a first-come-first-served queue, and the target verifies one
//              sequence's tree per forward, after which that sequence drafts again;
//   batched    as seed, but each target forward verifies every tree waiting in the queue, up to a
//              node budget, in one Batch (the paper leaves batched verification to future work).
#pragma once

#include <string_view>

namespace grove {

enum class SchedulePolicy { kSerialAr, kSerialSd, kSeed, kBatched };

inline constexpr SchedulePolicy kAllSchedulePolicies[] = {
    SchedulePolicy::kSerialAr, SchedulePolicy::kSerialSd, SchedulePolicy::kSeed,
    SchedulePolicy::kBatched};

std::string_view SchedulePolicyName(SchedulePolicy policy);
// Throws grove::Error listing the known names.
SchedulePolicy ParseSchedulePolicy(std::string_view name);
inline bool IsSpeculative(SchedulePolicy policy) { return policy != SchedulePolicy::kSerialAr; }
// Drafting runs on threads of its own, concurrently with verification.
inline bool DraftsConcurrently(SchedulePolicy policy) {
  return policy == SchedulePolicy::kSeed || policy == SchedulePolicy::kBatched;
}

}  // namespace grove
