// How a sequence speculates, decided once in the library for every caller (`grove run`, `grove
// bench --spec`, `grove calibrate`, the scheduler and the server): the tree plan, the
// verification rule and how children are drawn follow from what the user named, the drafter and
// the sampling parameters. Every combination that would not be lossless is refused here, with the
// reason, so no caller can assemble a lossy one.
#pragma once

#include <string>

#include "sample/sampler.h"
#include "speculate/drafter.h"
#include "speculate/tree_plan.h"
#include "speculate/verify.h"

namespace grove {

// What the user asked for, by name (CLI flags, request fields); empty names take the defaults.
struct SpeculationRequest {
  std::string plan = "auto";  // --spec
  std::string verify;         // --verify: a rule name; default: DefaultVerifyRule
  std::string draw;           // --draw: a child draw name; default: what the rule needs
};

struct SpeculationPolicy {
  TreePlan plan;
  VerifyRule rule = VerifyRule::kGreedy;
  ChildDraw draw = ChildDraw::kDeterministic;
  SamplerParams sampling;  // the target's; the draft distributions follow them (tree_builder.h)
  TreePlanInputs inputs;   // what the plan was made from (the auto planner starts from them)
};

// Throws grove::Error naming the problem: a malformed plan or name, or a lossy combination (a rule
// whose accept test assumes sampled children with top-k children, the chain rule on a branching
// tree, greedy verification at temperature > 0, a sampling rule with a drafter that guesses).
SpeculationPolicy ResolveSpeculation(const SpeculationRequest& request,
                                     const TreePlanInputs& inputs, const DrafterTraits& drafter,
                                     const SamplerParams& sampling);
inline SpeculationPolicy ResolveSpeculation(const SpeculationRequest& request,
                                            const TreePlanInputs& inputs, const Drafter& drafter,
                                            const SamplerParams& sampling) {
  return ResolveSpeculation(request, inputs, drafter.traits(), sampling);
}

}  // namespace grove
