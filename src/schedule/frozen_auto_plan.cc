#include "schedule/frozen_auto_plan.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "base/error.h"
#include "base/thread_pool.h"
#include "speculate/auto_planner.h"
#include "speculate/verify_cost_cache.h"

namespace grove {
namespace {

// The target's curve gets what the per-sequence planner spends once; a draft level is one size.
constexpr double kTargetBudgetSeconds = 0.03;
constexpr double kDraftBudgetSeconds = 0.01;

// Each size's median t(n) of `model` continuing `context` in slot `seq` (empty before, cleared
// after), not raised to a smaller size's (MeasureVerifyMedians).
std::vector<std::pair<int32_t, double>> MediansOn(Model& model, int32_t seq,
                                                  std::span<const int32_t> context,
                                                  int32_t max_tokens, double budget_seconds) {
  const auto position = static_cast<int32_t>(context.size()) - 1;
  KvCache& cache = model.cache(seq);
  try {
    Batch batch;
    if (position > 0) model.ForwardChain(context.first(position), 0, seq, batch, false);
    auto medians =
        MeasureVerifyMedians(model, seq, context.back(), position, max_tokens, budget_seconds);
    cache.Clear();
    return medians;
  } catch (...) {
    cache.Clear();
    throw;
  }
}

// The curves this process measured itself, by cache key: a process measures a model once and
// adds its times to the kept curve once, however many schedulers it starts (tot starts one per
// search step, tot-bench and bench one per policy and repetition): samples of one process would
// share whatever slowed it, and two of them could confirm a slowed time.
std::mutex g_measured_here_mutex;
std::map<std::string, VerifyCostCurve> g_measured_here;

// The process's measurement for key, when it reaches max_tokens.
std::optional<VerifyCostCurve> MeasuredHere(const std::string& key, int32_t max_tokens) {
  std::lock_guard<std::mutex> lock(g_measured_here_mutex);
  const auto found = g_measured_here.find(key);
  if (found == g_measured_here.end() || found->second.max_size() < max_tokens) return std::nullopt;
  return found->second;
}

// Keeps the process's measurement for key; true when it is the process's first for key.
bool RememberMeasuredHere(const std::string& key, const VerifyCostCurve& curve) {
  std::lock_guard<std::mutex> lock(g_measured_here_mutex);
  const bool first = !g_measured_here.contains(key);
  g_measured_here.insert_or_assign(key, curve);
  return first;
}

// The target's t(n) up to `measured` tokens: a curve a run before kept for this model and machine,
// if it reaches far enough and its times are confirmed, spares the measurement; one measured here
// (on `context`) adds its times to the kept one, as a sample each. Runs grow kept curves coarse to
// fine (AutoPlanner), so one reaching 8 or 16 may lack sizes below, which it interpolates, as
// `run`'s planner does; from 24 up the order has measured every smaller size first. (A kept t(6)
// of 3.9 t(1), measured once while other work ran, made every server choose trees of 4 tokens:
// tau 3.9 on repeated requests, not 7.6.)
VerifyCostCurve TargetCurve(Model& target, std::span<const int32_t> context, int32_t measured,
                            const VerifyCostCache* cache) {
  std::optional<CachedVerifyCost> kept = cache ? cache->Load(target) : std::nullopt;
  // Per file where there is a cache (tests give each their own directory), else per model shape.
  const std::string key = cache && cache->enabled()
                              ? cache->PathFor(VerifyCostCache::KeyFor(target))
                              : VerifyCostCache::KeyFor(target);
  if (kept && KeptCurveIsSettled(*kept, measured)) return VerifyCostCurve(kept->points);
  if (std::optional<VerifyCostCurve> here = MeasuredHere(key, measured)) return std::move(*here);
  const int32_t slot = target.kv().Acquire();
  std::vector<std::pair<int32_t, double>> medians;
  try {
    medians = MediansOn(target, slot, context, measured, kTargetBudgetSeconds);
  } catch (...) {
    target.kv().Release(slot);
    throw;
  }
  target.kv().Release(slot);
  VerifyCostCurve curve = RaisedCurve(medians);
  if (RememberMeasuredHere(key, curve) && cache) {
    CachedVerifyCost merged = kept.value_or(CachedVerifyCost{});
    for (const auto& [n, seconds] : medians)
      merged.AddSample(n, n == 1 ? seconds : seconds / medians.front().second);
    merged.complete = KeptCurveIsComplete(merged, target.max_batch());
    merged.measured_at = 0;  // now
    cache->Store(target, merged);
  }
  return curve;
}

}  // namespace

FrozenAutoPlan FreezeAutoPlan(Model& target, Model* draft, std::span<const int32_t> context,
                              const SpeculationPolicy& policy, int32_t max_concurrency,
                              int32_t node_budget) {
  GROVE_CHECK(policy.plan.is_auto(), "frozen auto plan: plan '", policy.plan.text, "' is not auto");
  if (context.empty()) Fail("the auto plan needs a context to measure the target on");
  TreePlanInputs inputs = policy.inputs;
  inputs.max_tokens = std::min(policy.plan.auto_max_tokens, target.max_batch());
  if (inputs.acceptance.empty()) {
    const auto prior = AutoPlanner::DefaultAcceptancePrior();
    inputs.acceptance.assign(prior.begin(), prior.end());
  }
  const int32_t measured = std::min(target.max_batch(), std::max(inputs.max_tokens, node_budget));
  // A context too long to measure after (a request the context cannot hold fails later, alone)
  // is measured on its first part.
  const auto room = std::max(1, target.n_ctx() - measured);
  if (static_cast<int64_t>(context.size()) > room) context = context.first(room);
  inputs.verify_cost = TargetCurve(target, context, measured, inputs.verify_cost_cache.get());
  if (draft != nullptr) {
    inputs.draft_seconds_per_level =
        MediansOn(*draft, 0, context, 1, kDraftBudgetSeconds)[0].second;
  }
  FrozenAutoPlan frozen;
  frozen.verify_cost = inputs.verify_cost;
  frozen.plan = ParseTreePlan("sequoia:auto", inputs);
  const SizeDepthChoice& choice = *frozen.plan.sequoia_choice;
  frozen.plan.text = choice.size > 1 ? "auto: sequoia:" + std::to_string(choice.size) + "," +
                                           std::to_string(choice.depth)
                                     : std::string("auto: plain");
  if (max_concurrency >= 1 && choice.size >= 2) {
    // Lanes draft on threads of their own, as many at once as there are cores.
    const int32_t cores = PoolThreadCount(0);
    frozen.by_concurrency =
        ConcurrencyTrees(*inputs.verify_cost, inputs.acceptance, choice.size, max_concurrency,
                         node_budget, cores, inputs.draft_seconds_per_level);
  }
  return frozen;
}

}  // namespace grove
