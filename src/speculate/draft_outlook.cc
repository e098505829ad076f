#include "speculate/draft_outlook.h"

#include <algorithm>

namespace grove {

int32_t ChooseCheapChainDepth(const DraftOutlook& outlook, const VerifyCostCurve& verify_cost,
                              double verify_scale, int32_t max_depth) {
  const std::span<const double> q = outlook.continue_rates;
  max_depth = std::min(max_depth, verify_cost.max_size() - 1);
  if (q.empty() || max_depth < 1) return 0;
  int32_t best = 0;
  const auto verify_seconds = [&](int32_t n) { return verify_scale * verify_cost.Seconds(n); };
  double best_rate = 1.0 / verify_seconds(1);
  if (outlook.dear_tokens > 0.0) {
    // t at the record's mean size, between the sizes around it (cut to the curve's).
    const double rows =
        std::clamp(outlook.dear_nodes + 1.0, 1.0, static_cast<double>(verify_cost.max_size()));
    const auto below = static_cast<int32_t>(rows);
    const int32_t above = std::min(below + 1, verify_cost.max_size());
    const double t =
        verify_seconds(below) + (rows - below) * (verify_seconds(above) - verify_seconds(below));
    best_rate = std::max(best_rate, outlook.dear_tokens / (t + outlook.dear_draft_seconds));
  }
  double expected = 1.0, reach = 1.0;
  for (int32_t d = 1; d <= max_depth; ++d) {
    reach *= q[std::min<std::size_t>(static_cast<std::size_t>(d - 1), q.size() - 1)];
    expected += reach;
    const double seconds = verify_seconds(d + 1) + d * outlook.level_seconds;
    // Strictly faster only: ties keep the shallower chain (or the plain or dear step).
    if (expected / seconds > best_rate * (1.0 + 1e-9)) {
      best = d;
      best_rate = expected / seconds;
    }
  }
  return best;
}

int32_t ChooseTailLength(const DraftOutlook& outlook, const VerifyCostCurve& verify_cost,
                         double verify_scale, int32_t planned_nodes, double tokens_per_second,
                         int32_t max_nodes) {
  const std::span<const double> q = outlook.tail_rates;
  const int32_t max_tail = std::min(max_nodes, verify_cost.max_size() - 1) - planned_nodes;
  if (q.empty() || max_tail < 1 || !(tokens_per_second > 0)) return 0;
  const double planned_seconds = verify_scale * verify_cost.Seconds(planned_nodes + 1);
  int32_t best = 0;
  double best_gain = 0.0, gained = 0.0;
  for (int32_t k = 1; k <= max_tail; ++k) {
    gained += q[std::min<std::size_t>(static_cast<std::size_t>(k - 1), q.size() - 1)];
    const double seconds = verify_scale * verify_cost.Seconds(planned_nodes + 1 + k) -
                           planned_seconds + k * outlook.tail_level_seconds;
    const double gain = gained - tokens_per_second * seconds;
    // Strictly better only: ties keep the shorter tail.
    if (gain > best_gain + 1e-9) {
      best = k;
      best_gain = gain;
    }
  }
  return best;
}

}  // namespace grove
