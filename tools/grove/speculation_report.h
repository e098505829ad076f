// How the CLI prints speculative decoding: the stats line, acceptance by depth, and the time split
// of a step (draft forwards, tree building, verify forward, verification, cache work, other), so
// that where the time goes is never a guess.
#pragma once

#include <string>

#include "speculate/drafter_mixture.h"
#include "speculate/session.h"

namespace grove::cli {

// "draft fwd 14% | tree 2% | verify fwd 76% | verification 1% | cache 1% | other 6%"
std::string FormatStepSplit(const StepTimes& times);
// " d1 0.90 d2 0.88 ..."
std::string FormatAcceptanceByDepth(const SpeculationStats& stats);
// What the auto planner chose, e.g. "auto chose 5 tokens, depth 5 (predicted 2.1x); p = 0.86 0.05
// ...".
std::string FormatPlannerChoice(const SpeculativeSession& session);
// What a drafter mixture's controller saw of each member, e.g. "mixture: draft-model weight 0.81
// (first choice right 81% of 120), in 25 steps, skipped 3, 0.21 ms/call | suffix ...".
std::string FormatMixture(const std::vector<MixtureMemberStats>& members);

}  // namespace grove::cli
