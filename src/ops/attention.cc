#include "ops/attention.h"

#include <cmath>

namespace grove {
namespace {

inline float Dot(const float* a, const float* b, int32_t n) {
  float sum = 0.0f;
  for (int32_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

}  // namespace

void AttendHead(const AttentionInput& in, float* scores, float* out) {
  const int32_t n_extra = static_cast<int32_t>(in.extra_slots.size());
  const int32_t n = in.n_prefix + n_extra;
  auto slot_of = [&](int32_t j) { return j < in.n_prefix ? j : in.extra_slots[j - in.n_prefix]; };

  float max = -INFINITY;
  for (int32_t j = 0; j < n; ++j) {
    scores[j] = Dot(in.q, in.keys + slot_of(j) * in.row_stride, in.head_dim) * in.scale;
    max = std::fmax(max, scores[j]);
  }
  float sum = 0.0f;
  for (int32_t j = 0; j < n; ++j) {
    scores[j] = std::exp(scores[j] - max);
    sum += scores[j];
  }
  for (int32_t d = 0; d < in.head_dim; ++d) out[d] = 0.0f;
  for (int32_t j = 0; j < n; ++j) {
    const float* v = in.values + slot_of(j) * in.row_stride;
    const float p = scores[j];
    for (int32_t d = 0; d < in.head_dim; ++d) out[d] += p * v[d];
  }
  const float inv = 1.0f / sum;
  for (int32_t d = 0; d < in.head_dim; ++d) out[d] *= inv;
}

}  // namespace grove
