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
// The guess for sizes not measured yet: each token beyond the first adds this share of t(1). On
// memory-bound CPU decoding the measured slopes are 0.1-0.3 (bundled base target, 1 thread, this
// project's 2-core machine: 0.12 to n = 2, 0.17 to 4, 0.25 to 8, 0.30 to 16; 0.11 to 16 on a
// 16-core Xeon; 2026-11-27 at 2 threads: 0.03 to 2, 0.14 to 8); a steeper guess errs towards
// smaller trees. 0.35 erred too far: a first run on a machine, which knows t(1) alone, drafted
// trees of 4 tokens where the measured curve chooses 6-8 (128 tokens at 2 threads: 1.48x plain as a
// whole process; 1.66x with 0.25).
constexpr double kGuessSlope = 0.25;
// Deepest tree considered, root level included (grove's trees are rarely deeper than 10 accepted).
constexpr int32_t kMaxDepth = 16;
// Sizes the verify cost is measured at: every size small trees use, then sparser (the search
// interpolates between them).
constexpr int32_t kMeasuredSizes[] = {1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 48, 64, 96, 128};
// The order a kept curve is extended in, a size per extension while the decoding time allows:
// coarse to fine, so that a curve of a few sizes already spans the trees auto uses and is
// interpolated between them, where a curve measured in increasing order was continued by the
// guess beyond its last size (after the runs of a day's first minutes, {1, 2}: trees of 4 tokens
// where the whole curve chooses 6-8, 128 tokens 1.7x plain instead of 2.0x). t(1) comes first:
// the guess and every ratio are anchored on it.
constexpr int32_t kMeasureOrder[] = {1, 8, 4, 16, 2, 6, 12, 3, 5, 10, 24, 20, 32, 48, 64, 96, 128};
static_assert(std::size(kMeasureOrder) == std::size(kMeasuredSizes));

// The size a kept curve is measured at next: the first of kMeasureOrder not measured yet or not
// confirmed (CachedVerifyCost) and not in `sampled` (sizes this run measured already: a second
// sample taken beside the first would share what slowed it), at most `limit` (the plan's
// budget), nor larger than the target's batch, nor than a confirmed size that costs more than
// worth_ratio x t(1) (no larger tree can repay it; an unconfirmed time may be a slowed one). None
// left: 0. In kMeasureOrder's order a size is confirmed soon after it is first measured, coarse
// sizes first: a slowed time near the trees auto chooses is not kept for long.
int32_t NextMeasuredSize(const CachedVerifyCost& curve, int32_t limit, int32_t max_batch,
                         double worth_ratio, std::span<const int32_t> sampled = {}) {
  int32_t too_dear = std::numeric_limits<int32_t>::max();
  for (const auto& [n, t] : curve.points) {
    if (t > worth_ratio * curve.points.front().second && curve.Confirmed(n))
      too_dear = std::min(too_dear, n);
  }
  for (int32_t n : kMeasureOrder) {
    if (n > limit || n > max_batch || n > too_dear) continue;
    if (!curve.Measured(n)) return n;
    if (!curve.Confirmed(n) && std::find(sampled.begin(), sampled.end(), n) == sampled.end())
      return n;
  }
  return 0;
}

// What measuring t(n) is expected to cost, from the curve's points (n increasing, from 1):
// interpolated between two of them, beyond the last continued with kGuessSlope; unless n's time
// is confirmed, never more than the guess from t(1) alone, since a time to be confirmed may be
// one that other work slowed (a kept t(8) of 3.9 t(1) priced its own second measurement beyond
// what any 128-token run may spend, and was never measured again).
double MeasurementSeconds(std::span<const std::pair<int32_t, double>> points, int32_t n,
                          bool confirmed) {
  const double t1 = points.front().second;
  const double cap =
      confirmed ? std::numeric_limits<double>::infinity() : t1 * (1.0 + kGuessSlope * (n - 1));
  for (std::size_t i = 1; i < points.size(); ++i) {
    const auto [hi_n, hi_t] = points[i];
    if (n > hi_n) continue;
    const auto [lo_n, lo_t] = points[i - 1];
    return std::min(cap, lo_t + (hi_t - lo_t) * (n - lo_n) / (hi_n - lo_n));
  }
  return std::min(cap, points.back().second + kGuessSlope * t1 * (n - points.back().first));
}

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
    if (ExtendVerifyCost(target, seq, root, root_position, max_tokens_, budget, kMaxDepth,
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
      t += kGuessSlope * t1 * (size - n);
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
  const int32_t next = NextMeasuredSize(measured_, std::min(max_tokens_, verify_cost_->max_size()),
                                        std::numeric_limits<int32_t>::max(), kMaxDepth, sampled_);
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
  table_.Compute(acceptance_, max_size, std::min(max_size, kMaxDepth));
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
    guess_t1_ = std::max(step.verify_seconds, 1e-9) / (1.0 + kGuessSlope * (n - 1));
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

namespace {

// Times forwards of a chain of n copies of one token continuing sequence `seq` at `position`,
// and truncates the cache back after each.
class VerifyTimer {
 public:
  VerifyTimer(Model& target, int32_t seq, int32_t token, int32_t position, int32_t max_tokens,
              int32_t first_layer, int32_t last_layer, bool cold_caches = false)
      : target_(target),
        cache_(target.cache(seq)),
        seq_(seq),
        token_(token),
        position_(position),
        first_layer_(first_layer),
        last_layer_(last_layer < 0 ? target.config().n_layer : last_layer) {
    GROVE_CHECK(cache_.length() == position, "verify cost: the cache holds ", cache_.length(),
                " slots, not ", position);
    limit_ = std::min({max_tokens, target.max_batch(), target.n_ctx() - position});
    if (limit_ < 1) Fail("verify cost: no room in the context to measure at position ", position);
    if (first_layer_ > 0)
      hidden_.assign(static_cast<std::size_t>(limit_) * target.config().n_embd, 0.0f);
    if (cold_caches) flush_.assign(kFlushBytes, 0);
  }

  int32_t limit() const { return limit_; }

  double Time(int32_t n) {
    batch_.Clear();
    for (int32_t i = 0; i < n; ++i) batch_.Add(token_, position_ + i, seq_, i - 1, true);
    const std::span<const float> in =
        hidden_.empty() ? std::span<const float>()
                        : std::span<const float>(hidden_).first(static_cast<std::size_t>(n) *
                                                                target_.config().n_embd);
    for (std::size_t i = 0; i < flush_.size(); i += 64) flush_[i] += 1;  // a write per line
    Timer timer;
    target_.ForwardLayers(batch_, first_layer_, last_layer_, in);
    const double seconds = timer.Seconds();
    cache_.Truncate(position_);
    return seconds;
  }

  // One untimed forward (decoding repeats one shape: the caches should hold what it uses), then
  // the median of `reps` timed ones ...
  double Median(int32_t n, int32_t reps) {
    Time(n);
    std::vector<double> s;
    s.reserve(static_cast<std::size_t>(reps));
    for (int32_t r = 0; r < reps; ++r) s.push_back(Time(n));
    std::nth_element(s.begin(), s.begin() + s.size() / 2, s.end());
    return s[s.size() / 2];
  }
  // ... or the fastest.
  double Fastest(int32_t n, int32_t reps) {
    Time(n);
    double best = std::numeric_limits<double>::infinity();
    for (int32_t r = 0; r < reps; ++r) best = std::min(best, Time(n));
    return best;
  }

 private:
  Model& target_;
  KvCache& cache_;
  int32_t seq_, token_, position_, first_layer_, last_layer_;
  int32_t limit_ = 0;
  Batch batch_;
  std::vector<float> hidden_;
  // Written through before each timed forward when the caches are to be cold: larger than any
  // last-level cache of the machines grove measures on.
  static constexpr std::size_t kFlushBytes = std::size_t{64} << 20;
  std::vector<uint8_t> flush_;
};

}  // namespace

VerifyCostCurve MeasureVerifyCost(Model& target, int32_t seq, int32_t token, int32_t position,
                                  int32_t max_tokens, double budget_seconds, int32_t first_layer,
                                  int32_t last_layer, bool cold_caches) {
  return RaisedCurve(MeasureVerifyMedians(target, seq, token, position, max_tokens, budget_seconds,
                                          first_layer, last_layer, cold_caches));
}

VerifyCostCurve RaisedCurve(std::vector<std::pair<int32_t, double>> medians) {
  for (std::size_t i = 1; i < medians.size(); ++i)
    medians[i].second = std::max(medians[i].second, medians[i - 1].second);
  return VerifyCostCurve(std::move(medians));
}

std::vector<std::pair<int32_t, double>> MeasureVerifyMedians(
    Model& target, int32_t seq, int32_t token, int32_t position, int32_t max_tokens,
    double budget_seconds, int32_t first_layer, int32_t last_layer, bool cold_caches) {
  VerifyTimer timer(target, seq, token, position, max_tokens, first_layer, last_layer, cold_caches);
  std::vector<int32_t> sizes;
  for (int32_t n : kMeasuredSizes) {
    if (n <= timer.limit()) sizes.push_back(n);
  }
  // Each size is timed in a run of its own, as decoding repeats one shape: interleaving sizes
  // would charge the small ones for the caches the large ones evicted. A first pass says what the
  // whole costs; a large model keeps powers of two only.
  auto one_pass = [&] {
    double total = 0.0;
    for (int32_t n : sizes) total += timer.Time(n);
    return total;
  };
  double pass = one_pass();
  if (pass > budget_seconds / 4) {
    std::erase_if(sizes, [](int32_t n) { return (n & (n - 1)) != 0; });
    pass = one_pass();
  }
  const int32_t reps =
      std::clamp(static_cast<int32_t>(budget_seconds / std::max(pass, 1e-9)) - 1, 1, 9);
  std::vector<std::pair<int32_t, double>> medians;
  medians.reserve(sizes.size());
  for (int32_t n : sizes) medians.emplace_back(n, timer.Median(n, reps));
  return medians;
}

bool KeptCurveIsSettled(const CachedVerifyCost& curve, int32_t max_tokens) {
  if (curve.points.empty() || curve.points.back().first < max_tokens) return false;
  const double t1 = curve.points.front().second;
  for (const auto& [n, t] : curve.points) {
    if (n > max_tokens) break;
    if (!curve.Confirmed(n)) return false;
    if (t > kMaxDepth * t1) break;  // confirmed: no tree repays this size or a larger one
  }
  return true;
}

bool KeptCurveIsComplete(const CachedVerifyCost& curve, int32_t max_batch) {
  return NextMeasuredSize(curve, std::numeric_limits<int32_t>::max(), max_batch, kMaxDepth) == 0;
}

bool ExtendVerifyCost(Model& target, int32_t seq, int32_t token, int32_t position,
                      int32_t max_tokens, double budget_seconds, double worth_ratio,
                      CachedVerifyCost& curve, std::vector<int32_t>& sampled) {
  VerifyTimer timer(target, seq, token, position, max_tokens, 0, -1);
  Timer spent;
  const bool was_complete = curve.complete;
  bool extended = false;
  double t1_now = 0.0;  // t(1) at this context, timed once the call measures a larger size
  while (!curve.complete) {
    // Sizes beyond the batch, or beyond a size no tree repays, are never measured: the curve is
    // complete when no other is left. Sizes beyond this plan's budget or the context's room wait
    // for a run that has them.
    if (NextMeasuredSize(curve, std::numeric_limits<int32_t>::max(), target.max_batch(),
                         worth_ratio) == 0) {
      curve.complete = true;
      break;
    }
    const int32_t n =
        NextMeasuredSize(curve, timer.limit(), target.max_batch(), worth_ratio, sampled);
    if (n == 0) break;
    // What measuring n costs, guessed from the sizes measured; the first size of a call is
    // measured whatever the guess (the caller judged it affordable).
    if (extended && spent.Seconds() + kVerifyMeasureForwards *
                                          MeasurementSeconds(curve.points, n, curve.Confirmed(n)) >
                        budget_seconds) {
      break;
    }
    double t = timer.Fastest(n, kVerifyMeasureForwards - 1);
    if (n == 1) {
      t1_now = t;
    } else {
      // Runs measure at whatever context they have reached, and attention grows with it: a size
      // is kept as its ratio to t(1) timed beside it, so that the curve's sizes agree with each
      // other (measured at contexts of 10 and of 400 tokens, a kept curve had a cliff between 4
      // and 5 tokens that the real one lacks, and auto chose 4).
      if (!(t1_now > 0)) t1_now = timer.Fastest(1, kVerifyMeasureForwards - 1);
      t /= t1_now;
    }
    curve.AddSample(n, t);
    sampled.push_back(n);
    extended = true;
  }
  return extended || curve.complete != was_complete;
}

}  // namespace grove
