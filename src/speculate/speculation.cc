#include "speculate/speculation.h"

#include "base/error.h"

namespace grove {

SpeculationPolicy ResolveSpeculation(const SpeculationRequest& request,
                                     const TreePlanInputs& inputs, const DrafterTraits& drafter,
                                     const SamplerParams& sampling) {
  sampling.Validate();
  SpeculationPolicy policy{
      .plan = ParseTreePlan(request.plan, inputs), .sampling = sampling, .inputs = inputs};
  const TreePlan& plan = policy.plan;
  const bool greedy = sampling.greedy();
  // Children are top-k guesses when the drafter guesses (its rows are not a distribution to sample
  // from) or when OPT-Tree shapes the tree from the draft probabilities.
  const bool deterministic_children = drafter.deterministic || !plan.is_static();
  policy.rule = request.verify.empty() ? DefaultVerifyRule(greedy, deterministic_children)
                                       : ParseVerifyRule(request.verify);
  if (request.draw.empty()) {
    policy.draw =
        deterministic_children ? ChildDraw::kDeterministic : RequiredChildDraw(policy.rule);
  } else {
    policy.draw = ParseChildDraw(request.draw);
    if (deterministic_children && policy.draw != ChildDraw::kDeterministic) {
      Fail("--draw ", request.draw, ": ",
           drafter.deterministic
               ? StrCat("drafter '", drafter.name, "' proposes guesses")
               : StrCat("tree spec '", plan.text, "' picks the top-k draft tokens"),
           ", so children cannot be drawn '", request.draw, "'");
    }
  }

  if (policy.rule == VerifyRule::kGreedy && !greedy) {
    Fail("--verify greedy needs temperature 0 (it would silently change the output distribution)");
  }
  if (!plan.is_static() && !greedy && policy.rule != VerifyRule::kTargetSample) {
    Fail("tree spec '", plan.text,
         "' picks the top-k draft tokens (OPT-Tree); at temperature > 0 only "
         "--verify target-sample is lossless for such trees");
  }
  if (drafter.deterministic && !greedy && policy.rule != VerifyRule::kTargetSample) {
    Fail("drafter '", drafter.name,
         "' guesses tokens instead of sampling them; at temperature > 0 only "
         "--verify target-sample is lossless with it");
  }
  if (plan.is_auto()) {
    // The planner may choose any shape up to its budget: check the rule on a branching one.
    TokenTree branching;
    for (int32_t parent : {-1, -1, 0, 0}) branching.AddChild(parent, kNoToken, 0.5f);
    if (policy.rule == VerifyRule::kChain) {
      Fail("tree spec '", plan.text,
           "' may branch, and --verify chain needs a chain; use sequoia or specinfer");
    }
    CheckLossless(policy.rule, policy.draw, branching, greedy);
  } else if (plan.is_static()) {
    CheckLossless(policy.rule, policy.draw, plan.shape, greedy);
  }
  return policy;
}

}  // namespace grove
