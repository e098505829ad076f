// A command's speculation in one call, as `grove run`, `chat`, `bench --spec`, `tot` and `serve`
// resolve it: the acceptance vector the user passed (--accept) or else the one measured for the
// models (the bundled pair's, auto's starting point), a verify-cost profile (--profile) or else
// the curves auto measures and keeps, read into the plan's inputs; then the policy the request
// names over them (speculation.h), refused there when it would not be lossless.
#pragma once

#include <cstdint>
#include <string>

#include "sample/sampler.h"
#include "speculate/drafter.h"
#include "speculate/speculation.h"
#include "speculate/tree_plan.h"

namespace grove {

struct CommandSpeculation {
  SpeculationRequest request;       // --spec, --verify, --draw
  std::string accept_file;          // --accept; empty: default_accept_file
  std::string default_accept_file;  // measured for these models (empty: none)
  std::string profile_file;         // --profile; empty: auto measures t(n) and keeps it
};

// The inputs of the command's plans, for a target that verifies up to max_tokens at once.
TreePlanInputs CommandPlanInputs(const CommandSpeculation& command, int32_t max_tokens);

// The policy, as ResolveSpeculation decides it over CommandPlanInputs. Throws grove::Error for a
// file that cannot be read or a request that is malformed or lossy.
SpeculationPolicy ResolveCommandSpeculation(const CommandSpeculation& command, int32_t max_tokens,
                                            const DrafterTraits& drafter,
                                            const SamplerParams& sampling);

}  // namespace grove
