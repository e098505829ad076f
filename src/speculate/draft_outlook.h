// What a drafter whose cost and accuracy change from step to step says before a step's tree is
// chosen (an optional capability, Drafter::outlook), and the chain the controller then drafts.
//
// DrafterMixture is such a drafter: on a step where a cheap member (suffix drafting, prompt
// lookup) is confident and stands in for the draft model, a level costs microseconds instead of a
// draft forward and the guesses follow a text seen before, so the tree that tree planning chose
// for the draft model (from its acceptance and its cost per level) is the wrong one. For such a
// step the session drafts a chain of the depth that maximises expected tokens per second,
//
//   E(d) / (t(d + 1) + d c),   E(d) = 1 + sum_{k=1..d} q_1 q_2 ... q_k,
//
// t the target's verify cost (the planner's curve), c the cheap members' cost of a level, q_k the
// chance that the depth-k node of such a chain is accepted when its parent was (learnt by the
// drafter over such steps). Depth 0 is a plain step: a chain predicted to lose against it is
// declined, and the step drafts with every member the tree that was planned.
#pragma once

#include <cstdint>
#include <span>

#include "speculate/sequoia.h"

namespace grove {

// Deepest chain a cheap step drafts.
inline constexpr int32_t kMaxCheapChainDepth = 24;

struct DraftOutlook {
  bool cheap = false;          // this step drafts with cheap members alone
  double level_seconds = 0.0;  // their cost of one level
  // q_k for k = 1.. (the last one stands for every deeper k).
  std::span<const double> continue_rates;
};

class StepOutlook {
 public:
  virtual ~StepOutlook() = default;
  // Called at a step's start, before the root's Expand: what drafting this step will be.
  virtual DraftOutlook Prepare() = 0;
  // The cheap step Prepare announced is not taken: every member drafts this step.
  virtual void Decline() = 0;
};

// The chain depth in [0, max_depth] with the most expected tokens per second (0: a plain step),
// t(n) = verify_scale * verify_cost.Seconds(n); max_depth is cut to the curve's sizes.
int32_t ChooseCheapChainDepth(const DraftOutlook& outlook, const VerifyCostCurve& verify_cost,
                              double verify_scale, int32_t max_depth);

}  // namespace grove
