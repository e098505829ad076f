#include "speculate/auto_planner.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <span>

#include "base/error.h"
#include "base/log.h"
#include "base/timer.h"

namespace grove {
namespace {

// Before any measurement: a draft whose first guess is the target's token 60% of the time and later
// ones rarely (pairs chosen for speculation are usually at least that good). Weak (kPriorWeight
// observations), so a few dozen verified nodes outweigh it; a calibrated vector from --accept
// counts as kCalibratedWeight.
constexpr std::array<double, AutoPlanner::kRanks> kDefaultPrior = {0.6,  0.1,  0.05, 0.03,
                                                                   0.02, 0.01, 0.01, 0.01};
constexpr double kPriorWeight = 2.0;
constexpr double kCalibratedWeight = 32.0;
// The first plan is redone after this many steps (its draft cost was a guess), later ones every
// kReplanSteps.
constexpr int32_t kFirstReplan = 4;
// Running means of the draft cost per level and of the verify cost's scale: weight of the newest
// step.
constexpr double kDraftCostWeight = 0.2;
constexpr double kVerifyScaleWeight = 0.05;
// Measuring t(n) again at a longer context costs at most this (a pass over the sizes, then as
// many repetitions as fit) ...
constexpr double kMeasureBudgetSeconds = 0.03;
// ... and is done once the context has doubled, by at least kMinContextGrowth tokens, if it
// costs at most kMeasureShare of the decoding time since the last time. Extending an incomplete
// curve takes the same share.
constexpr int32_t kMinContextGrowth = 64;
constexpr double kMeasureShare = 0.05;
// The credit of earlier runs is spent only by a run that has decoded enough itself: one run
// measures at most this share of its own decoding so far, so the run that happens to follow many
// short ones is not the one made slower than plain decoding (a 16-token run after ten 512-token
// runs measured sizes up to 128 and lost to plain, 0.94x).
constexpr double kRunMeasureShare = 0.25;
// A run keeps the decoding time it did not spend (the credit above) only when it decoded at least
// this long: rewriting the kept curve (JSON, a new file, a rename) costs about 0.5 ms, more than
// the 5% of a shorter run's decoding it would bank, and a run of 16 tokens that only saved paid it
// every time (2% of the run at 2 threads, issue 30). Runs shorter than this never measure anyway.
constexpr double kMinKeptDecodeSeconds = 0.02;
// While plain decoding wins, a probe every so many plain steps: as many as keep the probes' extra
// cost (their drafting, the drafter catching up, the wider verify) under kProbeShare of the plain
// steps' time, between kMinProbeInterval and kMaxProbeInterval.
constexpr double kProbeShare = 0.02;
constexpr int32_t kMinProbeInterval = 16;
constexpr int32_t kMaxProbeInterval = 1024;

}  // namespace

std::span<const double> AutoPlanner::DefaultAcceptancePrior() { return kDefaultPrior; }

namespace {

// p_k before any observation: the measured vector when the files gave one (ranks beyond it 0),
// else the default.
std::vector<double> StartPrior(std::span<const double> measured) {
  std::vector<double> prior(AutoPlanner::kRanks, 0.0);
  if (measured.empty()) {
    std::copy(kDefaultPrior.begin(), kDefaultPrior.end(), prior.begin());
  } else {
    std::copy_n(measured.begin(), std::min<std::size_t>(measured.size(), prior.size()),
                prior.begin());
  }
  return prior;
}

}  // namespace

AutoPlanner::AutoPlanner(const TreePlan& plan, const TreePlanInputs& inputs)
    : max_tokens_(plan.auto_max_tokens),
      given_curve_(inputs.verify_cost.has_value()),
      cache_(inputs.verify_cost_cache),
      verify_cost_(inputs.verify_cost),
      prior_(StartPrior(inputs.acceptance)),
      // The prior enters as pseudo-observations of every rank.
      observed_(kRanks, prior_, inputs.acceptance.empty() ? kPriorWeight : kCalibratedWeight),
      acceptance_(kRanks, 0.0),
      calibrated_(!inputs.acceptance.empty()) {
  GROVE_CHECK(plan.is_auto(), "auto planner: plan '", plan.text, "' is not auto");
  if (inputs.draft_seconds_per_level > 0) {
    draft_seconds_per_level_ = inputs.draft_seconds_per_level;
  }
  shape_.Reserve(max_tokens_, kRanks);
  probe_.AddChild(-1, kNoToken, static_cast<float>(prior_[0]));
  if (verify_cost_) Plan(/*first=*/true);  // a profile was given: plan now
}

AutoPlanner::~AutoPlanner() {
  if (cache_ && cache_target_ && !measured_.complete && decode_seconds_ >= kMinKeptDecodeSeconds) {
    CachedVerifyCost kept = measured_;
    kept.decode_seconds += decode_seconds_;
    cache_->Store(*cache_target_, kept);
  }
}

void AutoPlanner::Begin(const Model& target, int32_t root_position) {
  measured_at_ = root_position;
  seconds_since_measure_ = 0.0;
  if (given_curve_ || verify_cost_) return;
  if (cache_ && cache_->enabled()) {
    cache_target_ = &target;
    if (std::optional<CachedVerifyCost> kept = cache_->Load(target)) measured_ = std::move(*kept);
  }
  if (measured_.points.empty()) return;  // the first step is a probe that anchors the guess
  BuildVerifyCost();
  Plan(/*first=*/true);
}

double AutoPlanner::Measure(Model& target, int32_t seq, int32_t root, int32_t root_position) {
  Timer timer;
  if (!measured_.complete) {
    const double credit = measured_.decode_seconds + decode_seconds_;
    const double budget =
        std::max(std::min(kMeasureShare * credit, kRunMeasureShare * decode_seconds_),
                 NextMeasurementSeconds());
    if (ExtendVerifyCost(target, seq, root, root_position, max_tokens_, budget, kMaxPlannedDepth,
                         measured_, sampled_)) {
      measured_.decode_seconds = 0.0;
      measured_.measured_at = 0;  // now
      decode_seconds_ = 0.0;
      if (cache_target_) cache_->Store(target, measured_);
    } else {
      extension_stalled_ = true;  // no room in this context: not again in this run
    }
  } else {
    // The context has doubled: the sizes known, measured again at this context (not kept: the
    // cache holds curves for short contexts, which every run starts from).
    const VerifyCostCurve again = MeasureVerifyCost(
        target, seq, root, root_position, std::min(max_tokens_, measured_.points.back().first),
        kMeasureBudgetSeconds);
    measured_.points.assign(again.points().begin(), again.points().end());
  }
  measure_seconds_ = timer.Seconds();
  measured_at_ = root_position;
  seconds_since_measure_ = 0.0;
  verify_scale_ = 1.0;
  const bool first = !verify_cost_.has_value();
  BuildVerifyCost();
  Plan(first);
  return measure_seconds_;
}

void AutoPlanner::BuildVerifyCost() {
  std::vector<std::pair<int32_t, double>> points = measured_.points;
  if (!measured_.complete) {
    // Sizes not measured yet: the measured curve continued with the guess's slope (from t(1) alone,
    // the guess itself).
    const double t1 = points.empty() ? guess_t1_ : points.front().second;
    int32_t n = points.empty() ? 1 : points.back().first;
    double t = points.empty() ? t1 : points.back().second;
    if (points.empty()) points.emplace_back(1, t1);
    for (int32_t size : kMeasuredSizes) {
      if (size <= n || size > max_tokens_) continue;
      t += kVerifyGuessSlope * t1 * (size - n);
      n = size;
      points.emplace_back(n, t);
    }
  }
  verify_cost_.emplace(std::move(points));
}

double AutoPlanner::NextMeasurementSeconds() const {
  if (!verify_cost_) return std::numeric_limits<double>::infinity();
  if (measured_.complete) return measure_seconds_;
  // Sizes of this plan only: a kept curve may hold larger ones, measured under a larger budget.
  const int32_t next =
      NextMeasuredSize(measured_, std::min(max_tokens_, verify_cost_->max_size()),
                       std::numeric_limits<int32_t>::max(), kMaxPlannedDepth, sampled_);
  if (next == 0) return std::numeric_limits<double>::infinity();
  // A size beyond 1 is timed with t(1) beside it (ExtendVerifyCost).
  const double reference = next > 1 ? verify_cost_->Seconds(1) : 0.0;
  return kVerifyMeasureForwards *
         (MeasurementSeconds(verify_cost_->points(), next, measured_.Confirmed(next)) + reference) *
         verify_scale_;
}

void AutoPlanner::Plan(bool first) {
  // Until drafting is measured, a level is guessed to cost a tenth of a plain step (a draft about
  // ten times cheaper than its target, the usual pairing).
  if (!(draft_seconds_per_level_ > 0)) draft_seconds_per_level_ = verify_cost_->Seconds(1) / 10;
  // And a probe, until one is measured: a draft level and one more verified token.
  if (!(probe_cost_ > 0)) {
    const double wider =
        verify_cost_->max_size() >= 2 ? verify_cost_->Seconds(2) - verify_cost_->Seconds(1) : 0;
    probe_cost_ = draft_seconds_per_level_ + std::max(0.0, wider);
  }
  Replan();
  if (first) steps_since_plan_ = kReplanSteps - kFirstReplan;
}

bool AutoPlanner::WantsMeasurement(int32_t root_position) const {
  if (given_curve_ || !verify_cost_) return false;
  if (!measured_.complete) {
    const double next = NextMeasurementSeconds();
    return !extension_stalled_ &&
           (measured_.decode_seconds + decode_seconds_) * kMeasureShare >= next &&
           decode_seconds_ * kRunMeasureShare >= next;
  }
  return root_position >= 2 * measured_at_ && root_position - measured_at_ >= kMinContextGrowth &&
         seconds_since_measure_ * kMeasureShare >= measure_seconds_;
}

void AutoPlanner::Replan() {
  // The estimate: faded counts with the prior mixed in.
  observed_.Estimate(acceptance_);
  ScaleVerifyCost();
  const int32_t max_size = std::min(max_tokens_, scaled_cost_->max_size());
  table_.Compute(acceptance_, max_size, std::min(max_size, kMaxPlannedDepth));
  const SizeDepthSearch search{.draft_seconds_per_level = draft_seconds_per_level_,
                               .root_level_drafted = false};
  choice_ = ChooseSizeAndDepth(table_, *scaled_cost_, search);
  if (choice_.size > 1) {
    table_.TreeInto(choice_.size, choice_.depth, shape_);
  } else {
    shape_.Clear();
  }
  steps_since_plan_ = 0;
  trees_since_plan_ = 0;
  ++replans_;
  if (LogEnabled(LogLevel::kDebug)) {  // (`grove run -v`) the choice's string is built only then
    Log(LogLevel::kDebug, "auto: p1..3 ", acceptance_[0], " ", acceptance_[1], " ", acceptance_[2],
        ", draft ", 1e3 * draft_seconds_per_level_, " ms/level, t(1) ",
        1e3 * scaled_cost_->Seconds(1), " ms (x", verify_scale_, ") -> ",
        choice_.size == 1 ? "plain" : StrCat("n ", choice_.size, " d ", choice_.depth), ", ",
        choice_.expected_tokens, " tokens/step predicted");
  }
}

const TokenTree& AutoPlanner::NextShape() {
  // Nothing known about the verify cost yet: a probe, whose time anchors the guess (Observe).
  if (!verify_cost_) return probe_;
  // Replan every kReplanSteps steps, unless nothing was learnt meanwhile (plain steps only, while
  // plain wins and no probe ran): the DP search costs tens of microseconds.
  if (steps_since_plan_ >= kReplanSteps && trees_since_plan_ > 0) Replan();
  ++steps_since_plan_;
  // Without a calibrated prior the first steps only probe (one drafted token: little to lose if
  // the draft is poor) until the first replan has seen some acceptance.
  if (!calibrated_ && replans_ < 2) return probe_;
  probing_ = false;
  if (choice_.size > 1) {
    plain_run_ = 0;
    return shape_;
  }
  const double plain_step = scaled_cost_->Seconds(1);
  const int32_t interval =
      static_cast<int32_t>(std::clamp(probe_cost_ / (kProbeShare * plain_step),
                                      double{kMinProbeInterval}, double{kMaxProbeInterval}));
  if (++plain_run_ < interval) return none_;
  plain_run_ = 0;
  probing_ = true;
  return probe_;
}

void AutoPlanner::ScaleVerifyCost() {
  // The points of the measured curve, times the current scale (allocates only when the curve was
  // measured again: the points vector keeps its size).
  if (!scaled_cost_ || scaled_cost_->points().size() != verify_cost_->points().size())
    scaled_cost_ = verify_cost_;
  scaled_cost_->ScaleFrom(*verify_cost_, verify_scale_);
}

void AutoPlanner::Observe(const Step& step) {
  const TokenTree& tree = step.tree;
  const std::span<const int32_t> accepted = step.accepted;
  // The verify forward's tokens, root included (a tail's too).
  const int32_t n = (step.verified_nodes < 0 ? tree.size() : step.verified_nodes) + 1;
  seconds_since_measure_ += step.draft_seconds + step.verify_seconds;
  decode_seconds_ += step.draft_seconds + step.verify_seconds;
  if (!verify_cost_) {
    // The first step, without a curve: its verify forward anchors the guess (and, without one from
    // the acceptance file, its drafting the draft cost).
    guess_t1_ = std::max(step.verify_seconds, 1e-9) / (1.0 + kVerifyGuessSlope * (n - 1));
    if (!(draft_seconds_per_level_ > 0) && step.draft_calls > 0)
      draft_seconds_per_level_ = step.draft_seconds / step.draft_calls;
    BuildVerifyCost();
    Plan(/*first=*/true);
  }
  if (probing_ && !step.cheap_chain) {
    // What the probe cost beyond the plain step it replaced.
    const double extra =
        std::max(0.0, step.draft_seconds + step.verify_seconds - scaled_cost_->Seconds(1));
    probe_cost_ += kDraftCostWeight * (extra - probe_cost_);
  }
  if (step.verify_seconds > 0 && n <= verify_cost_->max_size()) {
    const double ratio = step.verify_seconds / verify_cost_->Seconds(n);
    verify_scale_ += kVerifyScaleWeight * (ratio - verify_scale_);
  }
  if (tree.empty() || step.cheap_chain) return;
  ++trees_since_plan_;
  // The draft cost per level, a running mean that starts from the guess (so one cold first
  // forward does not set it): every level, or the levels after a first that caught up.
  const int32_t levels = step.drafter_caught_up ? step.draft_calls - 1 : step.draft_calls;
  if (levels > 0) {
    const double seconds =
        step.drafter_caught_up ? step.draft_seconds - step.first_draft_seconds : step.draft_seconds;
    draft_seconds_per_level_ += kDraftCostWeight * (seconds / levels - draft_seconds_per_level_);
  }
  observed_.Fade(std::exp2(-1.0 / kHalfLifeSteps));
  observed_.Observe(tree, accepted);
}

}  // namespace grove
