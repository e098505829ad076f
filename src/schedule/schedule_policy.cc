#include "schedule/schedule_policy.h"

#include "base/named.h"

namespace grove {

namespace {

constexpr Named<SchedulePolicy> kNames[] = {{SchedulePolicy::kSerialAr, "serial-ar"},
                                            {SchedulePolicy::kSerialSd, "serial-sd"},
                                            {SchedulePolicy::kSeed, "seed"},
                                            {SchedulePolicy::kBatched, "batched"}};

}  // namespace

std::string_view SchedulePolicyName(SchedulePolicy policy) { return NameOf(kNames, policy); }

SchedulePolicy ParseSchedulePolicy(std::string_view name) {
  return ParseNamed(kNames, name, "scheduling policy");
}

}  // namespace grove
