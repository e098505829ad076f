#pragma once

#include <cstdint>

namespace grove {

class ThreadPool;

// out = x / sqrt(mean(x^2) + eps) * weight, over n elements. The sum is taken in a fixed order, so
// a row's result does not depend on what else is in the batch.
void RmsNorm(const float* x, const float* weight, float* out, int64_t n, float eps);

// RmsNorm of n rows of d (row i at x + i * d, out + i * d; out may be x), split over the pool when
// the rows are worth it (ops/parallel.h). Each row is computed by the same code either way, so the
// choice never changes a bit.
void RmsNormRows(const float* x, const float* weight, float* out, int64_t n, int64_t d, float eps,
                 ThreadPool& pool);

}  // namespace grove
