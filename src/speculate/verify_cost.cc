#include "speculate/verify_cost.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/error.h"
#include "base/timer.h"
#include "model/model.h"
#include "speculate/verify_cost_cache.h"

namespace grove {

VerifyCostCurve::VerifyCostCurve(std::vector<std::pair<int32_t, double>> points)
    : points_(std::move(points)) {
  if (points_.empty() || points_.front().first != 1) {
    Fail("verify cost: the curve must start at n = 1 (the plain decoding step it is compared to)");
  }
  for (size_t i = 0; i < points_.size(); ++i) {
    if (!(points_[i].second > 0.0) || !std::isfinite(points_[i].second)) {
      Fail("verify cost: time ", points_[i].second, " s at n = ", points_[i].first,
           " must be positive");
    }
    if (i > 0 && points_[i].first <= points_[i - 1].first) {
      Fail("verify cost: sizes must increase strictly, got n = ", points_[i].first, " after ",
           points_[i - 1].first);
    }
  }
  if (points_.back().first > kMaxVerifyTokens) {
    Fail("verify cost: n = ", points_.back().first,
         " is more tokens than a forward holds (at most ", kMaxVerifyTokens, ")");
  }
}

void VerifyCostCurve::ScaleFrom(const VerifyCostCurve& other, double factor) {
  if (!(factor > 0.0) || !std::isfinite(factor))
    Fail("verify cost: scale ", factor, " must be positive");
  points_.assign(other.points_.begin(), other.points_.end());
  for (auto& point : points_) point.second *= factor;
}

double VerifyCostCurve::Seconds(int32_t n) const {
  if (n < 1 || n > max_size()) {
    Fail("verify cost: n = ", n, " is outside the measured [1, ", max_size(), "]");
  }
  auto hi = std::lower_bound(points_.begin(), points_.end(), n,
                             [](const auto& point, int32_t x) { return point.first < x; });
  if (hi->first == n) return hi->second;
  auto lo = hi - 1;
  const double w = static_cast<double>(n - lo->first) / (hi->first - lo->first);
  return lo->second + w * (hi->second - lo->second);
}

namespace {

// The order a kept curve is extended in, a size per extension while the decoding time allows:
// coarse to fine, so that a curve of a few sizes already spans the trees auto uses and is
// interpolated between them, where a curve measured in increasing order was continued by the
// guess beyond its last size (after the runs of a day's first minutes, {1, 2}: trees of 4 tokens
// where the whole curve chooses 6-8, 128 tokens 1.7x plain instead of 2.0x). t(1) comes first:
// the guess and every ratio are anchored on it.
constexpr int32_t kMeasureOrder[] = {1, 8, 4, 16, 2, 6, 12, 3, 5, 10, 24, 20, 32, 48, 64, 96, 128};
static_assert(std::size(kMeasureOrder) == std::size(kMeasuredSizes));

}  // namespace

// The size a kept curve is measured at next: the first of kMeasureOrder not measured yet or not
// confirmed (CachedVerifyCost) and not in `sampled` (sizes this run measured already: a second
// sample taken beside the first would share what slowed it), at most `limit` (the plan's
// budget), nor larger than the target's batch, nor than a confirmed size that costs more than
// worth_ratio x t(1) (no larger tree can repay it; an unconfirmed time may be a slowed one). None
// left: 0. In kMeasureOrder's order a size is confirmed soon after it is first measured, coarse
// sizes first: a slowed time near the trees auto chooses is not kept for long.
int32_t NextMeasuredSize(const CachedVerifyCost& curve, int32_t limit, int32_t max_batch,
                         double worth_ratio, std::span<const int32_t> sampled) {
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
// interpolated between two of them, beyond the last continued with kVerifyGuessSlope; unless n's
// time is confirmed, never more than the guess from t(1) alone, since a time to be confirmed may be
// one that other work slowed (a kept t(8) of 3.9 t(1) priced its own second measurement beyond
// what any 128-token run may spend, and was never measured again).
double MeasurementSeconds(std::span<const std::pair<int32_t, double>> points, int32_t n,
                          bool confirmed) {
  const double t1 = points.front().second;
  const double cap = confirmed ? std::numeric_limits<double>::infinity()
                               : t1 * (1.0 + kVerifyGuessSlope * (n - 1));
  for (std::size_t i = 1; i < points.size(); ++i) {
    const auto [hi_n, hi_t] = points[i];
    if (n > hi_n) continue;
    const auto [lo_n, lo_t] = points[i - 1];
    return std::min(cap, lo_t + (hi_t - lo_t) * (n - lo_n) / (hi_n - lo_n));
  }
  return std::min(cap, points.back().second + kVerifyGuessSlope * t1 * (n - points.back().first));
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
    if (t > kMaxPlannedDepth * t1) break;  // confirmed: no tree repays this size or a larger one
  }
  return true;
}

bool KeptCurveIsComplete(const CachedVerifyCost& curve, int32_t max_batch) {
  return NextMeasuredSize(curve, std::numeric_limits<int32_t>::max(), max_batch,
                          kMaxPlannedDepth) == 0;
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
