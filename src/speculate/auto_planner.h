// `--spec auto`: before every step, the tree that maximises expected tokens per second — or no tree
// at all, when nothing beats plain decoding — from three measurements, each refreshed as decoding
// goes:
//
//   t(n)  the target's verify cost for n tokens (root included): from --profile; else the curve
//         kept for this model on this machine (VerifyCostCache); else a guess, t(n) = t(1) (1 +
//         kGuessSlope (n - 1)), anchored on the time of the first step (a probe of two tokens).
//         Nothing is measured before decoding starts (issue 30: measuring first cost a 16-token
//         run more than its tokens). Each size is measured again in a later run until two times
//         agree (CachedVerifyCost), so that one slowed by other work is not kept. While the kept
//         curve is incomplete, the next sizes are
//         measured when that costs at most kMeasureShare of the decoding time since the last
//         extension (ExtendVerifyCost), and the longer curve is kept for the next run. Sizes are
//         added coarse to fine (1, 8, 4, 16, 2, 6, 12, ...), so that a few already span the
//         trees auto uses: sizes between two measured ones are interpolated, sizes beyond the
//         largest continue it with the guess's slope. The decoding time
//         is summed over runs in the kept file, so short runs pay for the measurements together.
//         Measured again once the context has doubled (attention grows with it), at most
//         kMeasureShare of the time since. Between measurements the whole curve is scaled by the
//         running ratio of the verify forwards actually timed to what the curve predicted for their
//         n: what the cache left behind by drafting, other load and the context's growth do to it;
//   c     the draft cost of one tree level: from --accept's draft_seconds_per_level, else a
//         guess of t(1) / 10, then a running mean of the levels actually drafted (not a first
//         level that caught up after plain steps);
//   p_k   the positional acceptance vector (Sequoia Def. 3.1): a prior (from --accept, else a
//         modest default) updated with every verified node whose children were tried.
//
// The choice is Sequoia's hardware-aware search (ChooseSizeAndDepth) over the depth-bounded DP
// table, with the draft cost counted per drafted level ((d - 1) forwards for a tree of depth d, the
// root counted), plain decoding as a candidate. It is redone every kReplanSteps steps.
//
// Estimating p_k: PositionalAcceptance over every verified tree, its observations fading with a
// half-life of kHalfLifeSteps steps, so the estimate follows a text whose predictability changes.
//
// While plain decoding wins, p_k would never be observed again; so every so many plain steps one
// step drafts a single token: a probe that keeps p_1 current, so the planner returns when the text
// becomes predictable. The interval keeps the probes' measured extra cost (drafting, the drafter
// catching up with the tokens it missed, a verify of two tokens) under 2% of the plain steps'
// time, and at least 16 steps. Without a calibrated prior the first
// steps are such probes too, until the first replan (after 4 steps) has seen the pair at work.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "model/model.h"
#include "speculate/positional_acceptance.h"
#include "speculate/sequoia.h"
#include "speculate/token_tree.h"
#include "speculate/tree_plan.h"
#include "speculate/verify_cost.h"
#include "speculate/verify_cost_cache.h"

namespace grove {

class AutoPlanner {
 public:
  // Ranks of the acceptance vector the planner estimates (children per node at most).
  static constexpr int32_t kRanks = PositionalAcceptance::kPlannedRanks;
  static constexpr int32_t kReplanSteps = 16;
  static constexpr double kHalfLifeSteps = 128.0;

  // The acceptance vector assumed without a calibrated one: a draft whose first guess is the
  // target's token 60% of the time and later ones rarely.
  static std::span<const double> DefaultAcceptancePrior();

  // plan: a kAuto plan (its verify budget); inputs: what the files gave (all optional).
  AutoPlanner(const TreePlan& plan, const TreePlanInputs& inputs);
  // Keeps an incomplete curve with the decoding time this run adds to what pays for extending it.
  ~AutoPlanner();
  AutoPlanner(AutoPlanner&&) = default;

  // Called once the prompt, all but the root, is in the target's cache for `seq` (root_position
  // slots): takes the kept curve of `target`, if any, and plans with it. Measures nothing. With a
  // profile the planner plans at construction already.
  void Begin(const Model& target, int32_t root_position);
  // Whenever WantsMeasurement: measures t(n) on the sequence's context (extends the curve, or
  // measures it again at a longer context), restores the cache, keeps an extended curve, and
  // replans. Returns the seconds it took.
  double Measure(Model& target, int32_t seq, int32_t root, int32_t root_position);
  bool WantsMeasurement(int32_t root_position) const;

  // The shape of the next step's tree; empty for a plain step. Valid until the next call.
  const TokenTree& NextShape();

  // What a step did: its tree (empty for a plain step), the accepted nodes (root to leaf), the time
  // and number of its drafter calls and the first call's time, and its target forward's time.
  // After plain steps the first drafter call also feeds the tokens the drafter missed (catching
  // up): its time is then not a level's, and only the later calls measure the draft cost.
  struct Step {
    const TokenTree& tree;
    std::span<const int32_t> accepted;
    double draft_seconds;
    double first_draft_seconds;
    int32_t draft_calls;
    double verify_seconds;
    // Nodes the verify forward held: the tree's, and a tail's past it when there was one (the
    // tree is then the planned part, which is all the plan learns from); -1: the tree's.
    int32_t verified_nodes = -1;
    bool drafter_caught_up;
    // A cheap step's chain (speculate/draft_outlook.h), not the planned tree: its verify forward
    // is timed, but its acceptance and drafting are another drafter's and teach the plan nothing.
    bool cheap_chain = false;
  };
  void Observe(const Step& step);

  // The current choice (size 1: plain decoding) and the estimates behind it, for logs and tests.
  const SizeDepthChoice& choice() const { return choice_; }
  std::span<const double> acceptance() const { return acceptance_; }
  double draft_seconds_per_level() const { return draft_seconds_per_level_; }
  // The curve planned with (measured, kept or given, continued by the guess; nullopt before the
  // first step without any), and the factor the planner scales it by now.
  const std::optional<VerifyCostCurve>& verify_cost() const { return verify_cost_; }
  double verify_cost_scale() const { return verify_scale_; }
  // The sizes measured so far (this run's and the kept ones) and whether the curve is complete.
  const CachedVerifyCost& measured_cost() const { return measured_; }

 private:
  void Plan(bool first);
  void Replan();
  void ScaleVerifyCost();
  void BuildVerifyCost();  // verify_cost_ from measured_ and the guess anchored at guess_t1_
  double NextMeasurementSeconds() const;

  int32_t max_tokens_;
  bool given_curve_;  // the curve came from a profile file: never measured
  std::shared_ptr<const VerifyCostCache> cache_;
  const Model* cache_target_ = nullptr;  // the model whose curve is kept (Begin)
  CachedVerifyCost measured_;    // sizes measured (here or by a run before), decoding time before
  double decode_seconds_ = 0.0;  // decoding time observed since the curve was last extended
  bool extension_stalled_ = false;  // the context had no room for the next size
  std::vector<int32_t> sampled_;    // sizes this run measured (each once: see NextMeasuredSize)
  double guess_t1_ = 0.0;           // t(1) the guess is anchored at, until t(1) is measured
  std::optional<VerifyCostCurve> verify_cost_;
  std::optional<VerifyCostCurve> scaled_cost_;  // verify_cost_ x verify_scale_, what Replan uses
  double verify_scale_ = 1.0;
  int32_t measured_at_ = 0;             // context length of the last measurement
  double measure_seconds_ = 0.0;        // what it cost
  double seconds_since_measure_ = 0.0;  // step time observed since
  double draft_seconds_per_level_ = 0.0;
  std::vector<double> prior_;       // (kRanks) p_k before any observation
  PositionalAcceptance observed_;   // (kRanks) the verified trees, prior included
  std::vector<double> acceptance_;  // (kRanks) the current estimate
  SequoiaTable table_;
  SizeDepthChoice choice_;
  TokenTree shape_;  // the chosen tree (empty: plain)
  TokenTree none_;   // an empty tree, for plain steps
  TokenTree probe_;  // one drafted token: the first steps of an uncalibrated pair, and probes
  bool calibrated_ = false;  // the prior came from a measured acceptance vector
  int32_t replans_ = 0;
  int32_t trees_since_plan_ = 0;  // steps with a tree observed since the last replan
  int32_t steps_since_plan_ = 0;
  int32_t plain_run_ = 0;    // plain steps since the last speculative one
  bool probing_ = false;     // the shape last handed out is a probe while plain wins
  double probe_cost_ = 0.0;  // running mean of a probe's cost beyond a plain step
};

}  // namespace grove
