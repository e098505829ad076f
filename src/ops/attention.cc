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
  // Query i's keys: prefix slots [first(i), n_prefix), then extra slots from extra_first(i) on.
  // Its scores row holds them in that order from its start (as AttendHead lays them out).
  auto first = [&](int32_t i) { return g.prefix_begin ? g.prefix_begin[i] : 0; };
  auto extra_first = [&](int32_t i) { return g.extra_first ? g.extra_first[i] : g.extra_begin[i]; };
  int32_t max_extra = 0;
  int32_t lowest = g.n_prefix;
  for (int32_t i = 0; i < g.n_q; ++i) {
    max_extra = std::max(max_extra, g.extra_begin[i + 1] - g.extra_begin[i]);
    lowest = std::min(lowest, first(i));
  }
  const int64_t row = g.n_prefix + max_extra;
  auto query = [&](int32_t i) { return g.q + i * g.q_stride; };
  auto out = [&](int32_t i) { return g.out + i * g.out_stride; };
  auto slot_row = [&](int32_t slot) { return g.ring > 0 ? slot % g.ring : slot; };
  // Each block of prefix keys is read by every query that sees part of it, while it is in L1. A
  // block never wraps around a ring: blocks start at multiples of the ring's rows too.
  auto for_each_block = [&](auto&& visit) {
    for (int32_t j0 = lowest; j0 < g.n_prefix;) {
      int32_t j1 = std::min(j0 + kKeyBlock, g.n_prefix);
      if (g.ring > 0) j1 = std::min(j1, j0 + g.ring - j0 % g.ring);
      for (int32_t i = 0; i < g.n_q; ++i) {
        const int32_t b = std::max(j0, first(i));
        if (b < j1) visit(i, b, j1 - b);
      }
      j0 = j1;
    }
  };
  for_each_block([&](int32_t i, int32_t b, int32_t n) {
    k.attn_scores(query(i), g.keys + slot_row(b) * g.row_stride, g.row_stride, n, g.head_dim,
                  g.scale, scores + i * row + (b - first(i)));
  });
  // Extra slots that follow each other in the cache rows (a prompt chunk's earlier tokens, a
  // chain's ancestors) are one run for the kernels: visit(e, n) for runs [e, e + n) of
  // extra[0 .. n_extra). The split does not change a bit (kernel_set.h), and a 512-token prompt
  // makes 512 calls per query instead of 131072.
  auto for_each_run = [&](const int32_t* extra, int32_t n_extra, auto&& visit) {
    for (int32_t e = 0; e < n_extra;) {
      int32_t end = e + 1;
      while (end < n_extra && extra[end] == extra[end - 1] + 1 &&
             slot_row(extra[end]) == slot_row(extra[end - 1]) + 1) {
        ++end;
      }
      visit(e, end - e);
      e = end;
    }
  };
  for (int32_t i = 0; i < g.n_q; ++i) std::fill(out(i), out(i) + g.head_dim, 0.0f);
  float* sums = scores + g.n_q * row;  // one more row of scratch holds each query's softmax sum
  for (int32_t i = 0; i < g.n_q; ++i) {
    const int32_t n_prefix = g.n_prefix - first(i);
    const int32_t n_extra = g.extra_begin[i + 1] - extra_first(i);
    const int32_t* extra = g.extra + extra_first(i);
    for_each_run(extra, n_extra, [&](int32_t e, int32_t n) {
      k.attn_scores(query(i), g.keys + slot_row(extra[e]) * g.row_stride, g.row_stride, n,
                    g.head_dim, g.scale, scores + i * row + n_prefix + e);
    });
    sums[i] = k.softmax_exp(scores + i * row, n_prefix + n_extra);
  }
  for_each_block([&](int32_t i, int32_t b, int32_t n) {
    k.attn_weighted_sum(scores + i * row + (b - first(i)), g.values + slot_row(b) * g.row_stride,
                        g.row_stride, n, g.head_dim, out(i));
  });
  for (int32_t i = 0; i < g.n_q; ++i) {
    const int32_t n_prefix = g.n_prefix - first(i);
    const int32_t n_extra = g.extra_begin[i + 1] - extra_first(i);
    const int32_t* extra = g.extra + extra_first(i);
    for_each_run(extra, n_extra, [&](int32_t e, int32_t n) {
      k.attn_weighted_sum(scores + i * row + n_prefix + e,
                          g.values + slot_row(extra[e]) * g.row_stride, g.row_stride, n, g.head_dim,
                          out(i));
    });
    const float inv = 1.0f / sums[i];
    for (int32_t d = 0; d < g.head_dim; ++d) out(i)[d] *= inv;
  }
}

}  // namespace grove
