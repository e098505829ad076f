#pragma once

#include <cstdint>

namespace grove {

// out = x / sqrt(mean(x^2) + eps) * weight, over n elements. The sum is taken in a fixed order, so
// a row's result does not depend on what else is in the batch.
void RmsNorm(const float* x, const float* weight, float* out, int64_t n, float eps);

}  // namespace grove
