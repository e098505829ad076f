#include "distribution_check.h"

#include <algorithm>
#include <cmath>

namespace grove::testing {

std::vector<double> ExactJoint(Model& target, const std::vector<int32_t>& prompt,
                               const SamplerParams& params, int32_t n_vocab) {
  Sampler sampler(params);
  std::vector<float> p1(n_vocab), p2(n_vocab);
  Batch batch;
  target.cache(0).Clear();
  batch.AddChain(prompt, 0, 0);
  auto logits = target.Forward(batch);
  sampler.Distribution(logits, p1);
  const int32_t p = target.cache(0).length();
  std::vector<double> joint(n_vocab * n_vocab);
  for (int32_t x1 = 0; x1 < n_vocab; ++x1) {
    target.cache(0).Truncate(p);
    batch.Clear();
    batch.Add(x1, p, 0, -1, true);
    sampler.Distribution(target.Forward(batch), p2);
    for (int32_t x2 = 0; x2 < n_vocab; ++x2) joint[x1 * n_vocab + x2] = double{p1[x1]} * p2[x2];
  }
  return joint;
}

std::pair<double, double> ChiSquare(const std::vector<int64_t>& counts,
                                    const std::vector<double>& p, int64_t n) {
  double stat = 0, pooled_expected = 0;
  int64_t pooled_observed = 0;
  int cells = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const double expected = p[i] * n;
    if (expected >= 5) {
      stat += (counts[i] - expected) * (counts[i] - expected) / expected;
      ++cells;
    } else {
      pooled_expected += expected;
      pooled_observed += counts[i];
    }
  }
  if (pooled_expected > 0) {
    stat += (pooled_observed - pooled_expected) * (pooled_observed - pooled_expected) /
            std::max(pooled_expected, 1e-9);
    ++cells;
  }
  const double df = cells - 1, z = 3.09;
  const double crit = df * std::pow(1 - 2 / (9 * df) + z * std::sqrt(2 / (9 * df)), 3);
  return {stat, crit};
}

}  // namespace grove::testing
