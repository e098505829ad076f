#include "speculate/step_planner.h"

#include <algorithm>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "speculate/auto_planner.h"

namespace grove {
namespace {

// The chain of `depth` nodes (1..kMaxCheapChainDepth) a cheap step drafts: made once, shared by
// every session.
const TokenTree& CheapChain(int32_t depth) {
  static const std::vector<TokenTree> chains = [] {
    std::vector<TokenTree> out(kMaxCheapChainDepth);
    for (int32_t d = 1; d <= kMaxCheapChainDepth; ++d) {
      for (int32_t node = -1; node < d - 1; ++node) {
        out[static_cast<std::size_t>(d - 1)].AddChild(node, kNoToken, 1.0f);
      }
    }
    return out;
  }();
  return chains[static_cast<std::size_t>(depth - 1)];
}

}  // namespace

StepPlanner::StepPlanner(const SpeculationPolicy& policy, const VerifyCostCurve* verify_cost,
                         Drafter& drafter, int32_t max_batch)
    : plan_(policy.plan), draw_(policy.draw), verify_cost_(verify_cost) {
  // Cheap steps get chains under auto plans (the planner's or the scheduler's) whose trees are
  // shapes, when the target's batch holds the deepest.
  const bool shapes = plan_.is_auto() || (plan_.is_static() && verify_cost);
  if (shapes && kMaxCheapChainDepth + 1 <= max_batch) outlook_ = drafter.outlook();
  if (outlook_) planned_.Reserve(kMaxCheapChainDepth, 1);  // a tail's planned part is a chain
  if (plan_.is_auto()) auto_ = std::make_unique<AutoPlanner>(plan_, policy.inputs);
}

StepPlanner::~StepPlanner() = default;

int32_t StepPlanner::max_nodes() const {
  return std::max(plan_.max_nodes(), outlook_ ? kMaxCheapChainDepth : 0);
}

void StepPlanner::Begin(const Model& target, int32_t root_position) {
  previous_step_plain_ = false;  // Begin fed the prompt: the drafter has nothing to catch up
  steps_ = 0;
  rate_tokens_ = rate_seconds_ = 0.0;
  if (auto_) auto_->Begin(target, root_position);
}

double StepPlanner::MeasureIfDue(Model& target, int32_t seq, int32_t root, int32_t root_position) {
  if (!auto_ || !auto_->WantsMeasurement(root_position)) return 0.0;
  return auto_->Measure(target, seq, root, root_position);
}

const TokenTree* StepPlanner::ChooseShape(bool last_token) {
  const TokenTree* shape = auto_           ? (last_token ? &no_tree_ : &auto_->NextShape())
                           : use_override_ ? &shape_override_
                                           : nullptr;
  cheap_step_ = false;
  tail_from_ = 0;
  if (outlook_ && shape && !last_token) shape = OutlookShape(shape);
  return shape;
}

const TokenTree* StepPlanner::OutlookShape(const TokenTree* shape) {
  const VerifyCostCurve* curve = verify_cost_;
  double scale = 1.0;
  if (auto_) {
    curve = auto_->verify_cost() ? &*auto_->verify_cost() : nullptr;
    scale = auto_->verify_cost_scale();
  }
  if (!curve) return shape;
  const DraftOutlook outlook = outlook_->Prepare();
  if (!outlook.cheap) return WithTail(shape, outlook, *curve, scale);
  const int32_t depth = ChooseCheapChainDepth(outlook, *curve, scale, kMaxCheapChainDepth);
  if (LogEnabled(LogLevel::kDebug)) {
    Log(LogLevel::kDebug, "cheap step: q1..3 ", outlook.continue_rates[0], " ",
        outlook.continue_rates[1], " ", outlook.continue_rates[2], ", level ",
        1e6 * outlook.level_seconds, " us, t(1) ", 1e3 * scale * curve->Seconds(1), " ms, t(9) ",
        1e3 * scale * curve->Seconds(std::min(9, curve->max_size())), " ms -> chain of ", depth);
  }
  if (depth == 0) {
    outlook_->Decline();
    return WithTail(shape, outlook, *curve, scale);
  }
  cheap_step_ = true;
  return &CheapChain(depth);
}

const TokenTree* StepPlanner::WithTail(const TokenTree* shape, const DraftOutlook& outlook,
                                       const VerifyCostCurve& curve, double scale) {
  // Only a chain has one leaf to go on from; sampled children would mix two members' rows.
  const int32_t planned = shape->size();
  if (planned == 0 || shape->depth() != planned || rate_seconds_ <= 0.0 ||
      draw_ != ChildDraw::kDeterministic) {
    return shape;
  }
  const int32_t tail = ChooseTailLength(outlook, curve, scale, planned,
                                        rate_tokens_ / rate_seconds_, kMaxCheapChainDepth);
  if (tail == 0) return shape;
  outlook_->DraftTail(planned);
  tail_from_ = planned;
  return &CheapChain(planned + tail);
}

void StepPlanner::Drafted(const TokenTree& tree) {
  // A tail follows a chain: the planned part is its first tail_from_ nodes.
  tailed_ = tail_from_ > 0 && tree.size() > tail_from_;
  if (!tailed_) return;
  planned_.Clear();
  for (int32_t v = 0; v < tail_from_; ++v) {
    const TreeNode& node = tree.node(v);
    planned_.AddChild(node.parent, node.token, node.prob);
  }
}

std::span<const int32_t> StepPlanner::planned_accepted(std::span<const int32_t> accepted) const {
  // A tail follows a chain, whose planned nodes are its first tail_from_: the accepted path's
  // first ones among them.
  return tailed_ ? accepted.first(std::min(accepted.size(), static_cast<std::size_t>(tail_from_)))
                 : accepted;
}

void StepPlanner::Observe(const Outcome& step) {
  if (auto_) {
    auto_->Observe({.tree = planned_tree(step.tree),
                    .accepted = planned_accepted(step.accepted),
                    .draft_seconds = step.draft_seconds,
                    .first_draft_seconds = step.first_draft_seconds,
                    .draft_calls = tailed_ ? tail_from_ : step.draft_calls,
                    .verify_seconds = step.verify_seconds,
                    .verified_nodes = step.tree.size(),
                    .drafter_caught_up = previous_step_plain_,
                    .cheap_chain = cheap_step_});
  }
  previous_step_plain_ = step.tree.empty();
  // The rate a tail's time is weighed against (draft_outlook.h): the generation's, but for its
  // first step, whose drafting catches up on the prompt.
  if (++steps_ > 1) {
    rate_tokens_ += static_cast<double>(step.accepted.size()) + 1.0;
    rate_seconds_ += step.step_seconds;
  }
}

void StepPlanner::CountStep(const TokenTree& tree, std::size_t accepted,
                            SpeculationStats& stats) const {
  if (cheap_step_) {
    ++stats.cheap_steps;
    stats.cheap_nodes += tree.size();
  }
  if (tailed_) {
    ++stats.tail_steps;
    stats.tail_nodes += tree.size() - tail_from_;
    stats.tail_accepted += std::max<int64_t>(0, static_cast<int64_t>(accepted) - tail_from_);
  }
}

void StepPlanner::UseShape(const TokenTree& shape) {
  if (!plan_.is_static() || plan_.is_auto()) {
    Fail("session: only a static plan's tree can be replaced, not '", plan_.text, "'");
  }
  if (shape.size() > plan_.max_nodes()) {
    Fail("session: a tree of ", shape.size(), " nodes replaces one of ", plan_.max_nodes());
  }
  shape_override_ = shape;
  use_override_ = true;
}

}  // namespace grove
