// What a drafter whose cost and accuracy change from step to step says before a step's tree is
// chosen (an optional capability, Drafter::outlook), and the chain the controller then drafts.
//
// DrafterMixture is such a drafter: on a step where a cheap member (suffix drafting, prompt
// lookup) is confident and stands in for the draft model, a level costs microseconds instead of a
// draft forward and the guesses follow a text seen before, so the tree that tree planning chose
// for the draft model (from its acceptance and its cost per level) is the wrong one. For such a
// step the step planner (speculate/step_planner.h) drafts a chain of the depth that maximises
// expected tokens per second,
//
//   E(d) / (t(d + 1) + d c),   E(d) = 1 + sum_{k=1..d} q_1 q_2 ... q_k,
//
// t the target's verify cost (the planner's curve), c the cheap members' cost of a level, q_k the
// chance that the depth-k node of such a chain is accepted when its parent was (learnt by the
// drafter over such steps). Depth 0 is a plain step: a chain predicted to lose against it is
// declined, and the step drafts with every member the tree that was planned. So is a chain
// predicted to lose against the steps the drafter's dear members drafted where the cheap ones were
// as confident (when it has a record of them: T tokens from n verified nodes and s seconds of
// drafting on average, a rate of T / (t(n + 1) + s)).
//
// On the other steps, when the planned tree is a chain (the draft model's, with the cheap
// members' guesses merged in), the chain may go on past its planned depth with a tail: nodes the
// cheap members alone propose, each only where one of them is confident at its parent (its first
// choice takes at least half of its row) and its first choices were the chain's tokens from the
// root on (it is copying this very text), so a tail ends where the text stops repeating. A tail
// node costs the cheap members' microseconds and one more verified row, which on a CPU is far from
// free (a row of the base target is about 6% of a plain step). The step planner lets the tail grow
// to the length T that maximises the tokens it adds less those the time it takes would have given,
//
//   sum_{k=1..T} Q_k  -  R (t(D + 1 + T) - t(D + 1) + T c),
//
// D the planned chain's depth, Q_k the chance that the k-th tail node, when proposed, is accepted
// (learnt by the drafter over such steps, as the chance a tail node is accepted when its parent
// was: Q_k is the product of the first k; Q_1 includes the chance that the whole planned chain was
// accepted), R the tokens per second the session's recent steps gave. Where copying pays (a
// repeated or edited text) Q_k stays high and the tail long; where the cheap members are confident
// and wrong (another problem's numbers) it falls, and the tail goes.
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
  // For a cheap step: what the dear members' steps gave where the cheap ones were as confident,
  // on average (tokens: accepted nodes + 1; nodes: verified); dear_tokens 0: no record.
  double dear_tokens = 0.0;
  double dear_nodes = 0.0;
  double dear_draft_seconds = 0.0;
  // For a tail (any step): the cheap members' cost of one level and Q_k for k = 1.. (the last one
  // stands for every later k); empty when no member is cheap. The rates are the drafter's buffers,
  // valid until its next Prepare.
  double tail_level_seconds = 0.0;
  std::span<const double> tail_rates;
};

class StepOutlook {
 public:
  virtual ~StepOutlook() = default;
  // Called at a step's start, before the root's Expand: what drafting this step will be.
  virtual DraftOutlook Prepare() = 0;
  // The cheap step Prepare announced is not taken: every member drafts this step.
  virtual void Decline() = 0;
  // This step's tree is a chain of the planned depth `planned_nodes` and a tail: the drafter's
  // rows below that depth propose only the cheap members' confident guesses (an empty row ends
  // the chain).
  virtual void DraftTail(int32_t planned_nodes) = 0;
};

// The chain depth in [0, max_depth] with the most expected tokens per second, 0 where none is
// faster than a plain step or the dear steps' record (the file comment),
// t(n) = verify_scale * verify_cost.Seconds(n); max_depth is cut to the curve's sizes.
int32_t ChooseCheapChainDepth(const DraftOutlook& outlook, const VerifyCostCurve& verify_cost,
                              double verify_scale, int32_t max_depth);

// The tail length in [0, max_nodes - planned_nodes] with the largest net gain (the file comment)
// for a planned chain of `planned_nodes`, given the session's recent `tokens_per_second`; 0 for
// no tail. Cut to the curve's sizes.
int32_t ChooseTailLength(const DraftOutlook& outlook, const VerifyCostCurve& verify_cost,
                         double verify_scale, int32_t planned_nodes, double tokens_per_second,
                         int32_t max_nodes);

}  // namespace grove
