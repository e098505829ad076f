// The auto planner: which tree (or none) it picks from the verify cost, the draft cost and the
// acceptance it has seen; how its estimates move with what steps report; the probes it makes while
// plain decoding wins.
#include "speculate/auto_planner.h"

#include <gtest/gtest.h>

#include "speculate/tree_plan.h"

namespace grove {
namespace {

TreePlan AutoPlan(int32_t max_tokens = 16) {
  return ParseTreePlan("auto:" + std::to_string(max_tokens), TreePlanInputs{.max_tokens = 64});
}

// A planner that needs no model: the verify curve and the acceptance come from the inputs.
AutoPlanner Planner(std::vector<std::pair<int32_t, double>> curve, std::vector<double> acceptance,
                    double draft_seconds) {
  TreePlanInputs inputs{.acceptance = std::move(acceptance),
                        .verify_cost = VerifyCostCurve(std::move(curve)),
                        .draft_seconds_per_level = draft_seconds,
                        .max_tokens = 64};
  return AutoPlanner(AutoPlan(), inputs);  // with a profile it plans at once
}

// A chain of n nodes, as the planner's trees are filled (tokens do not matter to it).
TokenTree Chain(int32_t n) {
  TokenTree tree;
  for (int32_t v = 0; v < n; ++v) tree.AddChild(v - 1, 1, 0.5f);
  return tree;
}

TEST(AutoPlanner, CheapVerificationAndAGoodDraftGiveADeepTree) {
  // Verifying 16 tokens costs what one does; drafting a level a tenth of it; the draft's first
  // guess is right 90% of the time.
  AutoPlanner planner = Planner({{1, 1e-3}, {16, 1e-3}}, {0.9, 0.05}, 1e-4);
  EXPECT_GT(planner.choice().size, 4);
  EXPECT_GT(planner.choice().depth, 3);
  EXPECT_FALSE(planner.NextShape().empty());
  EXPECT_GT(planner.choice().speedup, 2.0);
}

TEST(AutoPlanner, CostlyVerificationChoosesPlainDecodingAndProbes) {
  // Every verified token costs a whole step: no tree can pay for itself.
  AutoPlanner planner = Planner({{1, 1e-3}, {16, 16e-3}}, {0.6, 0.1}, 1e-4);
  EXPECT_EQ(planner.choice().size, 1);
  // Plain steps, then a probe of one drafted token. A probe is guessed to cost a draft level and
  // one more verified token, 1.1 ms, and probes take at most 2% of the plain steps' time: one
  // every 55 steps.
  auto next_probe = [&] {
    for (int32_t step = 0; step < 2000; ++step) {
      const TokenTree& shape = planner.NextShape();
      if (!shape.empty()) {
        EXPECT_EQ(shape.size(), 1);
        return step;
      }
      planner.Observe({.tree = shape,
                       .accepted = {},
                       .draft_seconds = 0,
                       .first_draft_seconds = 0,
                       .draft_calls = 0,
                       .verify_seconds = 1e-3,
                       .drafter_caught_up = false});
    }
    return -1;
  };
  EXPECT_EQ(next_probe(), 54);
  // A probe that costs 5 ms more than a plain step (a drafter catching up on a long backlog) makes
  // the next ones rarer.
  const TokenTree probe = Chain(1);
  planner.Observe({.tree = probe,
                   .accepted = {},
                   .draft_seconds = 5e-3,
                   .first_draft_seconds = 5e-3,
                   .draft_calls = 1,
                   .verify_seconds = 1e-3,
                   .drafter_caught_up = true});
  EXPECT_GT(next_probe(), 54);
}

TEST(AutoPlanner, RejectedDraftsTurnItToPlainDecoding) {
  // Verification is cheap but not free; a good prior says speculate.
  AutoPlanner planner = Planner({{1, 1e-3}, {2, 1.2e-3}, {16, 4e-3}}, {0.9}, 1e-4);
  ASSERT_GT(planner.choice().size, 1);
  // Then the target rejects every draft token: the acceptance estimate falls, and within a few
  // replans the planner stops speculating.
  const TokenTree chain = Chain(4);
  for (int32_t step = 0; step < 200; ++step) {
    const TokenTree& shape = planner.NextShape();
    const TokenTree& tree = shape.empty() ? shape : chain;
    planner.Observe({.tree = tree,
                     .accepted = {},
                     .draft_seconds = tree.empty() ? 0 : 4e-4,
                     .first_draft_seconds = tree.empty() ? 0 : 1e-4,
                     .draft_calls = tree.empty() ? 0 : 4,
                     .verify_seconds = 1e-3,
                     .drafter_caught_up = false});
  }
  EXPECT_LT(planner.acceptance()[0], 0.5);  // from the prior 0.9 (probes keep observing)
  EXPECT_EQ(planner.choice().size, 1);
}

TEST(AutoPlanner, EstimatesFollowWhatStepsReport) {
  AutoPlanner planner = Planner({{1, 1e-3}, {16, 2e-3}}, {0.5}, 1e-4);
  const TokenTree chain = Chain(3);
  const int32_t accepted[] = {0, 1};
  for (int32_t step = 0; step < 200; ++step) {
    // Every step: two of three accepted (rank-1 children), a draft level of 0.3 ms (the first
    // call catches up and costs 1 ms, which must not count), verification at twice the curve.
    planner.Observe({.tree = chain,
                     .accepted = accepted,
                     .draft_seconds = 1e-3 + 2 * 3e-4,
                     .first_draft_seconds = 1e-3,
                     .draft_calls = 3,
                     .verify_seconds = 2 * VerifyCostCurve({{1, 1e-3}, {16, 2e-3}}).Seconds(4),
                     .drafter_caught_up = true});
    planner.NextShape();
  }
  EXPECT_NEAR(planner.draft_seconds_per_level(), 3e-4, 1e-6);
  EXPECT_NEAR(planner.verify_cost_scale(), 2.0, 1e-3);
  // Rank 1 tried 3 times per step (root, node 0, node 1), accepted twice.
  EXPECT_NEAR(planner.acceptance()[0], 2.0 / 3.0, 0.02);
}

}  // namespace
}  // namespace grove
