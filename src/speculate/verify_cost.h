// The target's verify cost t(n): the seconds a forward of n tokens (root included) takes, as
// measured points between which the planners interpolate (Sequoia's hardware-aware search,
// speculate/sequoia.h; the auto planner, speculate/auto_planner.h; cheap chains and tails,
// speculate/draft_outlook.h), and how it is measured on a target: once (MeasureVerifyCost), or a
// few sizes at a time into a curve kept between runs (ExtendVerifyCost, verify_cost_cache.h).
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "model/batch.h"

namespace grove {

class Model;
struct CachedVerifyCost;

// The most tokens one forward holds (model/batch.h): no curve describes more, so that what is
// sized by a curve's last n (the scheduler's record of served forwards) stays small whatever a
// profile or a kept curve says.
inline constexpr int32_t kMaxVerifyTokens = kMaxForwardTokens;

// tau_v(n) from measured (n, seconds) points, linearly interpolated between them; sizes outside
// the measured range are not considered (no extrapolation).
class VerifyCostCurve {
 public:
  // Points sorted by strictly increasing n, the first at n = 1, none past kMaxVerifyTokens, times
  // positive. Throws grove::Error.
  explicit VerifyCostCurve(std::vector<std::pair<int32_t, double>> points);
  int32_t max_size() const { return points_.back().first; }
  double Seconds(int32_t n) const;  // n in [1, max_size()]
  std::span<const std::pair<int32_t, double>> points() const { return points_; }
  // This curve becomes `other` with every time multiplied by factor > 0; no allocation when both
  // have as many points.
  void ScaleFrom(const VerifyCostCurve& other, double factor);

 private:
  std::vector<std::pair<int32_t, double>> points_;
};

// The curve of measured medians (n increasing from 1), each raised to the largest time of a
// smaller size: more tokens never cost less (a dip is noise, and would lure the search to a larger
// tree). MeasureVerifyCost's result.
VerifyCostCurve RaisedCurve(std::vector<std::pair<int32_t, double>> medians);

// The guess for sizes not measured yet: each token beyond the first adds this share of t(1). On
// memory-bound CPU decoding the measured slopes are 0.1-0.3 (bundled base target, 1 thread, this
// project's 2-core machine: 0.12 to n = 2, 0.17 to 4, 0.25 to 8, 0.30 to 16; 0.11 to 16 on a
// 16-core Xeon; 2026-11-27 at 2 threads: 0.03 to 2, 0.14 to 8); a steeper guess errs towards
// smaller trees. 0.35 erred too far: a first run on a machine, which knows t(1) alone, drafted
// trees of 4 tokens where the measured curve chooses 6-8 (128 tokens at 2 threads: 1.48x plain as a
// whole process; 1.66x with 0.25).
inline constexpr double kVerifyGuessSlope = 0.25;
// Deepest tree the planners consider, root level included (grove's trees are rarely deeper than
// 10 accepted): a size that costs more than this many t(1) repays no tree, nor does a larger one.
inline constexpr int32_t kMaxPlannedDepth = 16;
// Sizes the verify cost is measured at: every size small trees use, then sparser (the search
// interpolates between them).
inline constexpr int32_t kMeasuredSizes[] = {1,  2,  3,  4,  5,  6,  8,  10, 12,
                                             16, 20, 24, 32, 48, 64, 96, 128};

// t(n) of `target` for a verify batch of n tokens continuing sequence `seq` (whose cache holds
// `position` slots) at kMeasuredSizes up to max_tokens, within about budget_seconds: the median of
// repeated forwards of a chain of `token`. The cache is left as found. Layers [first_layer,
// last_layer) only, when given (last_layer -1: to the last, the output head included when
// last_layer is the model's last): a pipeline stage's cost, zero hidden rows coming in when
// first_layer > 0. cold_caches: the CPU caches flushed before each timed forward, as when units
// take turns on one host's cores and the others' weights pass through the caches between two
// forwards of this one (decoding alone keeps its weights warm).
VerifyCostCurve MeasureVerifyCost(Model& target, int32_t seq, int32_t token, int32_t position,
                                  int32_t max_tokens, double budget_seconds,
                                  int32_t first_layer = 0, int32_t last_layer = -1,
                                  bool cold_caches = false);
// The medians MeasureVerifyCost measures, each size's own: not raised to a smaller size's time
// (what a kept curve adds as samples, CachedVerifyCost).
std::vector<std::pair<int32_t, double>> MeasureVerifyMedians(
    Model& target, int32_t seq, int32_t token, int32_t position, int32_t max_tokens,
    double budget_seconds, int32_t first_layer = 0, int32_t last_layer = -1,
    bool cold_caches = false);

// Whether a kept curve can be planned with as it is, up to `max_tokens`: it reaches that far, and
// every size up to it has confirmed times (see CachedVerifyCost: a time measured once may be one
// other work slowed), up to the first confirmed size that costs more than kMaxPlannedDepth x t(1).
bool KeptCurveIsSettled(const CachedVerifyCost& curve, int32_t max_tokens);
// Whether nothing is left to measure or confirm in a kept curve (its `complete`) for a target
// whose largest batch is max_batch.
bool KeptCurveIsComplete(const CachedVerifyCost& curve, int32_t max_batch);

// Forwards per size that ExtendVerifyCost spends: one untimed, then the fastest of the rest
// (interference only ever adds time).
inline constexpr int32_t kVerifyMeasureForwards = 3;

// The size a kept curve is measured at next: in coarse-to-fine order (1, 8, 4, 16, 2, 6, 12, ...),
// the first not measured yet or not confirmed (CachedVerifyCost) and not in `sampled` (sizes this
// run measured already: a second sample taken beside the first would share what slowed it), at
// most `limit` (the plan's budget), nor larger than the target's batch, nor than a confirmed size
// that costs more than worth_ratio x t(1) (no larger tree can repay it; an unconfirmed time may be
// a slowed one). None left: 0.
int32_t NextMeasuredSize(const CachedVerifyCost& curve, int32_t limit, int32_t max_batch,
                         double worth_ratio, std::span<const int32_t> sampled = {});
// What measuring t(n) is expected to cost, from a kept curve's points (n increasing, from 1):
// interpolated between two of them, beyond the last continued with kVerifyGuessSlope; unless n's
// time is confirmed, never more than the guess from t(1) alone, since a time to be confirmed may
// be one that other work slowed.
double MeasurementSeconds(std::span<const std::pair<int32_t, double>> points, int32_t n,
                          bool confirmed);

// Measures sizes `curve` lacks or has not confirmed (n = 1 first), in NextMeasuredSize's order,
// none of `sampled` (this run's, to which it adds), the first always and each next one while its
// guessed cost fits what is left of budget_seconds, up to max_tokens and the context's room; a
// size beyond the target's batch, or beyond one that costs more than worth_ratio x t(1) (no larger
// tree can pay for itself), is never measured, and the curve is complete when every other size is
// measured and confirmed. Returns whether the curve changed. The cache is left as found.
bool ExtendVerifyCost(Model& target, int32_t seq, int32_t token, int32_t position,
                      int32_t max_tokens, double budget_seconds, double worth_ratio,
                      CachedVerifyCost& curve, std::vector<int32_t>& sampled);

}  // namespace grove
