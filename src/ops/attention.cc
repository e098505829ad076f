#include "ops/attention.h"

#include <algorithm>

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
    k.attn_scores(in.q, in.keys + in.extra_slots[e] * in.row_stride, in.row_stride, 1, in.head_dim,
                  in.scale, scores + in.n_prefix + e);
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

namespace {

// Keys (or values) per block: 32 rows of a 64-wide head are 8 KB, which stay in L1 while every
// query of the group reads them; the kernels handle keys four at a time, so a multiple of 4.
constexpr int32_t kKeyBlock = 32;

}  // namespace

void AttendQueries(const QueryGroup& group, float* scores) {
  AttendQueriesWithKernels(ActiveKernels(), group, scores);
}

void AttendQueriesWithKernels(const KernelSet& k, const QueryGroup& g, float* scores) {
  // Query i's scores: its prefix scores, then its extra slots' (as AttendHead lays them out).
  int32_t max_extra = 0;
  for (int32_t i = 0; i < g.n_q; ++i)
    max_extra = std::max(max_extra, g.extra_begin[i + 1] - g.extra_begin[i]);
  const int64_t row = g.n_prefix + max_extra;
  auto query = [&](int32_t i) { return g.q + i * g.q_stride; };
  auto out = [&](int32_t i) { return g.out + i * g.out_stride; };
  for (int32_t j0 = 0; j0 < g.n_prefix; j0 += kKeyBlock) {
    const int32_t n = std::min(kKeyBlock, g.n_prefix - j0);
    for (int32_t i = 0; i < g.n_q; ++i) {
      k.attn_scores(query(i), g.keys + j0 * g.row_stride, g.row_stride, n, g.head_dim, g.scale,
                    scores + i * row + j0);
    }
  }
  for (int32_t i = 0; i < g.n_q; ++i) std::fill(out(i), out(i) + g.head_dim, 0.0f);
  float* sums = scores + g.n_q * row;  // one more row of scratch holds each query's softmax sum
  for (int32_t i = 0; i < g.n_q; ++i) {
    const int32_t n_extra = g.extra_begin[i + 1] - g.extra_begin[i];
    const int32_t* extra = g.extra + g.extra_begin[i];
    for (int32_t e = 0; e < n_extra; ++e) {
      k.attn_scores(query(i), g.keys + extra[e] * g.row_stride, g.row_stride, 1, g.head_dim,
                    g.scale, scores + i * row + g.n_prefix + e);
    }
    sums[i] = k.softmax_exp(scores + i * row, g.n_prefix + n_extra);
  }
  for (int32_t j0 = 0; j0 < g.n_prefix; j0 += kKeyBlock) {
    const int32_t n = std::min(kKeyBlock, g.n_prefix - j0);
    for (int32_t i = 0; i < g.n_q; ++i) {
      k.attn_weighted_sum(scores + i * row + j0, g.values + j0 * g.row_stride, g.row_stride, n,
                          g.head_dim, out(i));
    }
  }
  for (int32_t i = 0; i < g.n_q; ++i) {
    const int32_t n_extra = g.extra_begin[i + 1] - g.extra_begin[i];
    const int32_t* extra = g.extra + g.extra_begin[i];
    for (int32_t e = 0; e < n_extra; ++e) {
      k.attn_weighted_sum(scores + i * row + g.n_prefix + e, g.values + extra[e] * g.row_stride,
                          g.row_stride, 1, g.head_dim, out(i));
    }
    const float inv = 1.0f / sums[i];
    for (int32_t d = 0; d < g.head_dim; ++d) out(i)[d] *= inv;
  }
}

}  // namespace grove
