#include "pipe/pipeline_clock.h"

#include <algorithm>

namespace grove {
namespace {

// t(m), extended past the curve's last point along its last segment.
double Extended(const VerifyCostCurve& curve, int32_t m) {
  const auto points = curve.points();
  if (m <= curve.max_size() || points.size() < 2)
    return curve.Seconds(std::min(m, curve.max_size()));
  const auto& [n0, t0] = points[points.size() - 2];
  const auto& [n1, t1] = points.back();
  return t1 + (t1 - t0) / (n1 - n0) * (m - n1);
}

int32_t GroupSize(const PipelineResult& run, int32_t g) {
  return static_cast<std::size_t>(g) < run.groups.size() ? run.groups[static_cast<std::size_t>(g)]
                                                         : 1;
}

}  // namespace

PipelineCosts EvenStageCosts(const VerifyCostCurve& target, const VerifyCostCurve& draft,
                             int32_t n_stages, double link_latency_seconds,
                             double link_bytes_per_second, double bytes_per_token) {
  return {.stage_seconds = [target, n_stages](int32_t,
                                              int32_t m) { return Extended(target, m) / n_stages; },
          .draft_seconds = [draft](int32_t m) { return Extended(draft, m); },
          .link_latency_seconds = link_latency_seconds,
          .link_bytes_per_second = link_bytes_per_second,
          .bytes_per_token = bytes_per_token};
}

PipelineCosts MeasuredStageCosts(std::vector<VerifyCostCurve> stages, const VerifyCostCurve& draft,
                                 double link_latency_seconds, double link_bytes_per_second,
                                 double bytes_per_token, int32_t cores) {
  return {.stage_seconds =
              [stages = std::move(stages)](int32_t k, int32_t m) {
                return Extended(stages.at(static_cast<std::size_t>(k)), m);
              },
          .draft_seconds = [draft](int32_t m) { return Extended(draft, m); },
          .link_latency_seconds = link_latency_seconds,
          .link_bytes_per_second = link_bytes_per_second,
          .bytes_per_token = bytes_per_token,
          .cores = cores};
}

double ClockedSeconds(const PipelineResult& run, PipelineRunKind kind, const PipelineCosts& c) {
  double total = 0.0;
  for (const PipelineTimestep& step : run.log) {
    double compute = 0.0;
    int32_t largest = 0;  // tokens of the largest message sent on
    double busy = 0.0;    // the units' seconds, summed
    const auto d = static_cast<int32_t>(step.stage_rows.size());
    // Entry g of stage_rows is a group of stages, processing its rows one stage after another
    // with a message between each two.
    for (int32_t g = 0, first = 0; g < d; first += GroupSize(run, g++)) {
      const int32_t m = step.stage_rows[static_cast<std::size_t>(g)];
      if (m == 0) continue;
      double group = 0.0;
      for (int32_t s = first; s < first + GroupSize(run, g); ++s) {
        group += c.stage_seconds(s, m) + (s > first ? c.LinkSeconds(m) : 0.0);
      }
      compute = std::max(compute, group);
      busy += group;
      if (g + 1 < d) largest = std::max(largest, m);
    }
    switch (kind) {
      case PipelineRunKind::kPipeDec:
        if (step.draft_rows > 0) {
          const double draft = c.draft_seconds(step.draft_rows);
          compute = std::max(compute, draft);
          busy += draft;
        }
        if (c.cores > 0) compute = std::max(compute, busy / c.cores);
        total += compute + (largest > 0 ? c.LinkSeconds(largest) : 0.0) +
                 (step.synced ? c.link_latency_seconds : 0.0);
        break;
      case PipelineRunKind::kStaticTree:
        // The draft's timestep: one forward per level of the static tree.
        if (step.draft_rows > 0) {
          const int32_t levels = std::max(step.draft_levels, 1);
          compute += levels * c.draft_seconds(std::max(1, step.draft_rows / levels));
        }
        [[fallthrough]];
      case PipelineRunKind::kPlain:
        // One stage's compute, then its message on (or the token back to the first stage).
        total += compute + (largest > 0 ? c.LinkSeconds(largest) : c.link_latency_seconds);
        break;
    }
  }
  return total;
}

}  // namespace grove
