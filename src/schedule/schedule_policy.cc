#include "schedule/schedule_policy.h"

#include <string>

#include "base/error.h"

namespace grove {

std::string_view SchedulePolicyName(SchedulePolicy policy) {
  switch (policy) {
    case SchedulePolicy::kSerialAr:
      return "serial-ar";
    case SchedulePolicy::kSerialSd:
      return "serial-sd";
    case SchedulePolicy::kSeed:
      return "seed";
    case SchedulePolicy::kBatched:
      return "batched";
  }
  return "?";
}

SchedulePolicy ParseSchedulePolicy(std::string_view name) {
  std::string known;
  for (SchedulePolicy policy : kAllSchedulePolicies) {
    if (SchedulePolicyName(policy) == name) return policy;
    known += known.empty() ? "" : ", ";
    known += SchedulePolicyName(policy);
  }
  Fail("unknown scheduling policy '", name, "' (known: ", known, ")");
}

}  // namespace grove
