#include "ops/attention.h"

#include "kernels/kernel_set.h"

namespace grove {

void AttendHead(const AttentionInput& in, float* scores, float* out) {
  AttendHeadWithKernels(ActiveKernels(), in, scores, out);
}

void AttendHeadWithKernels(const KernelSet& k, const AttentionInput& in, float* scores,
                           float* out) {
  // The committed prefix is one contiguous run of slots; each extra slot is a run of one. The
  // kernels' results do not depend on that split (kernel_set.h).
  const int32_t n_extra = static_cast<int32_t>(in.extra_slots.size());
  const int32_t n = in.n_prefix + n_extra;
  k.attn_scores(in.q, in.keys, in.row_stride, in.n_prefix, in.head_dim, in.scale, scores);
  for (int32_t e = 0; e < n_extra; ++e) {
    k.attn_scores(in.q, in.keys + in.extra_slots[e] * in.row_stride, in.row_stride, 1,
                  in.head_dim, in.scale, scores + in.n_prefix + e);
  }
  const float sum = k.softmax_exp(scores, n);
  for (int32_t d = 0; d < in.head_dim; ++d) out[d] = 0.0f;
  k.attn_weighted_sum(scores, in.values, in.row_stride, in.n_prefix, in.head_dim, out);
  for (int32_t e = 0; e < n_extra; ++e) {
    k.attn_weighted_sum(scores + in.n_prefix + e, in.values + in.extra_slots[e] * in.row_stride,
                        in.row_stride, 1, in.head_dim, out);
  }
  const float inv = 1.0f / sum;
  for (int32_t d = 0; d < in.head_dim; ++d) out[d] *= inv;
}

}  // namespace grove
