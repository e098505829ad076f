// Goodness of fit of sampled output: the exact joint distribution of a model's first two tokens,
// and Pearson's chi-square against it. Shared by the tests that check a sampling rule or a drafter
// is lossless (session_test, feature_drafter_test).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "model/model.h"
#include "sample/sampler.h"

namespace grove::testing {

// p(x1, x2) after the prompt, from the target's own logits under the given sampling parameters,
// for a model of n_vocab tokens (tiny: n_vocab^2 cells).
std::vector<double> ExactJoint(Model& target, const std::vector<int32_t>& prompt,
                               const SamplerParams& params, int32_t n_vocab);

// Pearson chi-square over cells with expected count >= 5 (the rest pooled into one cell), and its
// critical value at significance 1e-3 (Wilson-Hilferty approximation of the chi-square quantile).
std::pair<double, double> ChiSquare(const std::vector<int64_t>& counts,
                                    const std::vector<double>& p, int64_t n);

}  // namespace grove::testing
