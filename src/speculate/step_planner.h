// The choice of each step's tree, in one place: a session holds one StepPlanner, asks it for the
// step's shape before drafting, tells it what was drafted, and hands it what the step did.
//
// The shape comes from, in turn:
//   - the plan: `auto` plans ask the auto planner (speculate/auto_planner.h), which measures the
//     verify cost when it can afford to and learns the acceptance and the draft cost from every
//     step; a static plan's shape may be replaced by a driver (UseShape: a scheduler shrinks
//     trees as more sequences share its forwards); other plans build their own tree (OPT-Tree);
//   - the drafter's outlook (speculate/draft_outlook.h), when it has one and a verify curve prices
//     it (the auto planner's, or SessionOptions::verify_cost under a driver's plan): a cheap step
//     is drafted as the chain its curve makes best, and a planned chain may go on with a tail.
//
// What the plan learns from is the planned part of a step's tree (a tail's nodes past it are
// another drafter's guesses), and nothing of a cheap step's chain but its verify time.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "model/model.h"
#include "speculate/draft_outlook.h"
#include "speculate/drafter.h"
#include "speculate/speculation.h"
#include "speculate/speculation_stats.h"
#include "speculate/token_tree.h"

namespace grove {

class AutoPlanner;

class StepPlanner {
 public:
  // policy: the session's, which outlives the planner (an auto plan starts from its inputs).
  // verify_cost: t(n) for a plan chosen elsewhere (SessionOptions::verify_cost), or null; it must
  // outlive the planner. max_batch: the target's, which must hold a cheap step's deepest chain for
  // the drafter's outlook to be used.
  StepPlanner(const SpeculationPolicy& policy, const VerifyCostCurve* verify_cost, Drafter& drafter,
              int32_t max_batch);
  ~StepPlanner();

  // Most nodes a step's tree may have: the plan's, or a cheap step's deepest chain.
  int32_t max_nodes() const;
  // Whether steps may be drafted as chains of the drafter's outlook (cheap steps, tails).
  bool drafts_chains() const { return outlook_ != nullptr; }

  // A generation starts: the prompt but the root is in the target's cache (root_position slots).
  void Begin(const Model& target, int32_t root_position);
  // Before a step: the auto planner measures the target's verify cost when it can afford to.
  // Returns the seconds it took (0 when it did not measure).
  double MeasureIfDue(Model& target, int32_t seq, int32_t root, int32_t root_position);
  // The shape of this step's tree (empty: a plain step), or null when the plan builds its own.
  // last_token: one token is left to generate, which no tree can make faster than a plain step.
  // Valid until the next call.
  const TokenTree* ChooseShape(bool last_token);
  // The step's tree as drafted (after ChooseShape): its planned part is kept when a tail follows.
  void Drafted(const TokenTree& tree);

  // What a verified step did, for the auto planner and the rate a tail is weighed against.
  struct Outcome {
    const TokenTree& tree;              // the verified tree (empty: a plain step)
    std::span<const int32_t> accepted;  // its accepted nodes, root to leaf
    double draft_seconds;               // in the drafter's Expand calls
    double first_draft_seconds;         // the first call's share
    int32_t draft_calls;
    double verify_seconds;  // the target forward
    double step_seconds;    // the whole step (StepTimes::total)
  };
  void Observe(const Outcome& outcome);
  // Counts the step just verified into the statistics of cheap steps and tails.
  void CountStep(const TokenTree& tree, std::size_t accepted, SpeculationStats& stats) const;

  // Replaces a static plan's tree with `shape` (at most the plan's nodes, copied; its storage is
  // reused) for the following steps; throws grove::Error for other plans. UsePlanShape returns to
  // the plan's.
  void UseShape(const TokenTree& shape);
  void UsePlanShape() { use_override_ = false; }

  // This step (after Drafted) is a cheap one: a chain of the drafter's depth.
  bool cheap_step() const { return cheap_step_; }
  // This step's tree has a tail past its planned chain of tail_from() nodes.
  bool tailed() const { return tailed_; }
  int32_t tail_from() const { return tail_from_; }
  // The planned part of this step's tree `tree` (what the plans learn from), and of its accepted
  // nodes `accepted`: the tree itself when it has no tail.
  const TokenTree& planned_tree(const TokenTree& tree) const { return tailed_ ? planned_ : tree; }
  std::span<const int32_t> planned_accepted(std::span<const int32_t> accepted) const;
  // The auto planner, for `auto` plans (null otherwise).
  const AutoPlanner* auto_planner() const { return auto_.get(); }

 private:
  // The shape the drafter's outlook makes of `shape`: a cheap step's chain, when the drafter
  // announces one and a chain is predicted faster than a plain step (else the drafter is told it
  // was declined); or a planned chain with a tail, when one is predicted to gain; or `shape`.
  const TokenTree* OutlookShape(const TokenTree* shape);
  const TokenTree* WithTail(const TokenTree* shape, const DraftOutlook& outlook,
                            const VerifyCostCurve& curve, double scale);

  const TreePlan& plan_;  // the session's policy's
  ChildDraw draw_;
  const VerifyCostCurve* verify_cost_;
  std::unique_ptr<AutoPlanner> auto_;
  StepOutlook* outlook_ = nullptr;  // the drafter's, when its cheap steps may get chains
  TokenTree shape_override_;        // UseShape
  bool use_override_ = false;
  TokenTree no_tree_;  // a plain step of the auto plan
  bool cheap_step_ = false;
  int32_t tail_from_ = 0;  // this step's planned chain's depth when a tail may follow it
  bool tailed_ = false;    // this step's tree has a tail
  TokenTree planned_;      // its planned part
  bool previous_step_plain_ = false;
  int64_t steps_ = 0;  // observed since Begin
  // The tokens and seconds of the generation's steps but its first (its rate).
  double rate_tokens_ = 0.0;
  double rate_seconds_ = 0.0;
};

}  // namespace grove
