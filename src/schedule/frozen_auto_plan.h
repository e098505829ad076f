// `--spec auto` under the scheduler: one Sequoia tree for every sequence a scheduler runs, chosen
// once, when its first requests arrive, as sequoia:auto chooses (Sequoia's hardware-aware search:
// G(n, d) / (t(n) + (d - 1) c) over the acceptance prior, plain decoding a candidate), with t(n)
// measured on the scheduler's own target context (its thread count, the first request's context)
// and c, the cost of a draft level, on one of its draft lanes.
//
// Why frozen rather than the per-sequence auto planner (speculate/auto_planner.h): that planner
// measures t(n) on each sequence's context when it starts (about 30 ms), longer than a whole
// tree-of-thought generation of a few dozen tokens takes, and under seed and batched it would time
// the target while other sequences' drafters compute beside it. What it costs: the tree does not
// follow a text whose predictability changes, nor the contexts' growth; the acceptance is the
// prior's (--accept, or the planner's modest default).
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "model/model.h"
#include "schedule/concurrency_trees.h"
#include "speculate/speculation.h"
#include "speculate/tree_plan.h"

namespace grove {

struct FrozenAutoPlan {
  // A sequoia plan whose shape may be empty (plain decoding wins); its text says what was chosen.
  TreePlan plan;
  // The tree for each of k sequences whose trees share one forward (the batched policy), from the
  // same measured curve (concurrency_trees.h); none without max_concurrency or a tree.
  std::optional<ConcurrencyTrees> by_concurrency;
  // t(n) as measured (or kept) for the choice: what sessions choose a cheap step's chain by
  // (SessionOptions::verify_cost).
  std::optional<VerifyCostCurve> verify_cost;
};

// policy.plan must be auto. target: a slot is acquired, `context` (all but its last token)
// prefilled, t(n) measured up to the larger of the plan's budget and node_budget, and the slot
// released. draft: a draft forward context whose slot 0 is free (left cleared), or null for a
// drafter without forwards (c = 0). max_concurrency: the most sequences by_concurrency serves
// (0: none).
FrozenAutoPlan FreezeAutoPlan(Model& target, Model* draft, std::span<const int32_t> context,
                              const SpeculationPolicy& policy, int32_t max_concurrency = 0,
                              int32_t node_budget = 0);

}  // namespace grove
