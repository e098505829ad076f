// The step planner (speculate/step_planner.h): which shape a step's tree takes (the plan's, a
// driver's, a cheap step's chain, a planned chain with a tail), what the plans learn from (the
// planned part), and what it counts.
#include "speculate/step_planner.h"

#include <gtest/gtest.h>

#include <vector>

#include "base/error.h"
#include "speculate/draft_outlook.h"
#include "speculate/tree_plan.h"

namespace grove {
namespace {

// A drafter that only says what its steps will be: cheap ones with a given level cost and
// continue rates, or dear ones that a tail may follow.
class OutlookDrafter : public Drafter, public StepOutlook {
 public:
  OutlookDrafter() { Offer({.outlook = this}); }
  std::string_view name() const override { return "outlook"; }
  int32_t n_vocab() const override { return 8; }
  bool deterministic() const override { return true; }
  void Begin(std::span<const int32_t>) override {}
  std::span<const float> Expand(const TokenTree&, std::span<const int32_t>) override { return {}; }
  void Commit(const TokenTree&, std::span<const int32_t>, int32_t) override {}
  void Reserve(int32_t, int32_t) override {}
  bool HasRoomFor(int32_t) const override { return true; }

  DraftOutlook Prepare() override {
    ++prepared;
    DraftOutlook outlook{.cheap = cheap, .level_seconds = 1e-6, .continue_rates = rates};
    outlook.tail_level_seconds = 1e-6;
    outlook.tail_rates = tail_rates;
    return outlook;
  }
  void Decline() override { ++declined; }
  void DraftTail(int32_t planned_nodes) override { tail_from = planned_nodes; }

  bool cheap = false;
  std::vector<double> rates = {0.9};
  std::vector<double> tail_rates;
  int prepared = 0;
  int declined = 0;
  int32_t tail_from = 0;
};

SpeculationPolicy StaticPolicy(const std::string& plan) {
  SpeculationPolicy policy;
  policy.plan = ParseTreePlan(plan, {});
  return policy;
}

// A verify cost that grows slowly: chains of the cheap members' guesses pay.
const VerifyCostCurve kFlatCurve({{1, 1e-3}, {32, 1.2e-3}});

// A chain of `n` nodes of tokens 1..n.
TokenTree Chain(int32_t n) {
  TokenTree tree;
  for (int32_t v = 0; v < n; ++v) tree.AddChild(v - 1, v + 1, 1.0f);
  return tree;
}

TEST(StepPlanner, AStaticPlanBuildsItsOwnTreeUnlessADriverGivesOne) {
  const SpeculationPolicy policy = StaticPolicy("chain:4");
  OutlookDrafter drafter;
  StepPlanner planner(policy, nullptr, drafter, 64);
  EXPECT_FALSE(planner.drafts_chains()) << "no curve prices a chain";
  EXPECT_EQ(planner.max_nodes(), 4);
  EXPECT_EQ(planner.ChooseShape(false), nullptr);
  const TokenTree shape = Chain(2);
  planner.UseShape(shape);
  const TokenTree* chosen = planner.ChooseShape(false);
  ASSERT_NE(chosen, nullptr);
  EXPECT_EQ(chosen->size(), 2);
  planner.UsePlanShape();
  EXPECT_EQ(planner.ChooseShape(false), nullptr);
  EXPECT_THROW(planner.UseShape(Chain(5)), Error) << "more nodes than the plan's";
  EXPECT_EQ(drafter.prepared, 0);
}

TEST(StepPlanner, OnlyAStaticPlansTreeCanBeReplaced) {
  const SpeculationPolicy policy = StaticPolicy("auto");
  OutlookDrafter drafter;
  StepPlanner planner(policy, nullptr, drafter, 64);
  EXPECT_NE(planner.auto_planner(), nullptr);
  EXPECT_THROW(planner.UseShape(Chain(2)), Error);
}

TEST(StepPlanner, ACheapStepIsDraftedAsTheChainItsCurveMakesBestAndCounted) {
  const SpeculationPolicy policy = StaticPolicy("chain:4");
  OutlookDrafter drafter;
  drafter.cheap = true;
  StepPlanner planner(policy, &kFlatCurve, drafter, 64);
  ASSERT_TRUE(planner.drafts_chains());
  EXPECT_EQ(planner.max_nodes(), kMaxCheapChainDepth);
  planner.UseShape(policy.plan.shape);  // as a scheduler gives it: a shape, outlooks apply
  const TokenTree* chosen = planner.ChooseShape(false);
  ASSERT_NE(chosen, nullptr);
  EXPECT_TRUE(planner.cheap_step());
  EXPECT_EQ(chosen->size(),
            ChooseCheapChainDepth(drafter.Prepare(), kFlatCurve, 1.0, kMaxCheapChainDepth));
  EXPECT_GT(chosen->size(), 4) << "a cheap chain goes past the plan's tree";
  EXPECT_EQ(chosen->size(), chosen->depth()) << "a chain";
  planner.Drafted(*chosen);
  const std::vector<int32_t> accepted = {0, 1};
  SpeculationStats stats;
  planner.CountStep(*chosen, accepted.size(), stats);
  EXPECT_EQ(stats.cheap_steps, 1);
  EXPECT_EQ(stats.cheap_nodes, chosen->size());
  EXPECT_EQ(stats.tail_steps, 0);

  drafter.rates = {0.0};  // no chain pays: the step is declined, the plan's tree drafted
  chosen = planner.ChooseShape(false);
  EXPECT_FALSE(planner.cheap_step());
  EXPECT_EQ(drafter.declined, 1);
  ASSERT_NE(chosen, nullptr);
  EXPECT_EQ(chosen->size(), 4);
  EXPECT_EQ(planner.ChooseShape(/*last_token=*/true)->size(), 4) << "no outlook for the last";
}

TEST(StepPlanner, APlannedChainGoesOnWithATailAndThePlansLearnFromItsPlannedPart) {
  const SpeculationPolicy policy = StaticPolicy("chain:3");
  OutlookDrafter drafter;
  drafter.tail_rates = {0.95};
  StepPlanner planner(policy, &kFlatCurve, drafter, 64);
  planner.UseShape(policy.plan.shape);
  EXPECT_EQ(planner.ChooseShape(false)->size(), 3) << "no rate yet to weigh a tail against";
  // Two steps of a few tokens in 10 ms each: the first is the prompt's, the second gives a rate.
  const TokenTree none;
  for (int step = 0; step < 2; ++step) {
    planner.Drafted(none);
    planner.Observe({.tree = none,
                     .accepted = {},
                     .draft_seconds = 0.0,
                     .first_draft_seconds = 0.0,
                     .draft_calls = 0,
                     .verify_seconds = 1e-3,
                     .step_seconds = 1e-2});
  }
  const TokenTree* chosen = planner.ChooseShape(false);
  ASSERT_NE(chosen, nullptr);
  EXPECT_GT(chosen->size(), 3) << "a tail past the planned chain";
  EXPECT_EQ(drafter.tail_from, 3);
  const TokenTree drafted = Chain(chosen->size());
  planner.Drafted(drafted);
  ASSERT_TRUE(planner.tailed());
  EXPECT_EQ(planner.tail_from(), 3);
  EXPECT_EQ(planner.planned_tree(drafted).size(), 3);
  const std::vector<int32_t> accepted = {0, 1, 2, 3, 4};
  EXPECT_EQ(planner.planned_accepted(accepted).size(), 3u);
  SpeculationStats stats;
  planner.CountStep(drafted, accepted.size(), stats);
  EXPECT_EQ(stats.tail_steps, 1);
  EXPECT_EQ(stats.tail_nodes, drafted.size() - 3);
  EXPECT_EQ(stats.tail_accepted, 2);
}

}  // namespace
}  // namespace grove
