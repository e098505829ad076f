#include "ops/attention.h"

#include <algorithm>
#include <limits>

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
  for (int32_t i = 0; i < g.n_q; ++i) {
    max_extra = std::max(max_extra, g.extra_begin[i + 1] - g.extra_begin[i]);
  }
  const int64_t row = g.n_prefix + max_extra;
  auto query = [&](int32_t i) { return g.q + i * g.q_stride; };
  auto out = [&](int32_t i) { return g.out + i * g.out_stride; };
  auto slot_row = [&](int32_t slot) { return g.ring > 0 ? slot % g.ring : slot; };
  // Query i's extra slots: extra(i)[0 .. n_extra(i)); its scores row holds them after its
  // n_prefix(i) prefix keys.
  auto n_prefix = [&](int32_t i) { return g.n_prefix - first(i); };
  auto extra = [&](int32_t i) { return g.extra + extra_first(i); };
  auto n_extra = [&](int32_t i) { return g.extra_begin[i + 1] - extra_first(i); };
  // Keys (values) read in blocks of kKeyBlock slots, each by every query that sees part of it,
  // while it is in L1: query i sees slots [begin(i), end(i)); visit(i, b, n) for its part [b, b +
  // n) of a block, blocks in slot order. A block never wraps around a ring: blocks start at
  // multiples of the ring's rows too.
  auto for_each_block = [&](auto&& begin, auto&& end, auto&& visit) {
    int32_t lo = std::numeric_limits<int32_t>::max(), hi = std::numeric_limits<int32_t>::min();
    for (int32_t i = 0; i < g.n_q; ++i) {
      if (begin(i) >= end(i)) continue;
      lo = std::min(lo, begin(i));
      hi = std::max(hi, end(i));
    }
    for (int32_t j0 = lo; j0 < hi;) {
      int32_t j1 = std::min(j0 + kKeyBlock, hi);
      if (g.ring > 0) j1 = std::min(j1, j0 + g.ring - j0 % g.ring);
      for (int32_t i = 0; i < g.n_q; ++i) {
        const int32_t b = std::max(j0, begin(i));
        const int32_t e = std::min(j1, end(i));
        if (b < e) visit(i, b, e - b);
      }
      j0 = j1;
    }
  };
  auto prefix_end = [&](int32_t) { return g.n_prefix; };
  // The extra slots of a prompt chunk are one run of slots per query (the chunk's earlier tokens),
  // overlapping from query to query: they are read in blocks too, as the prefix is (a 512-token
  // prompt's queries had each streamed their run from L2). A tree's (ancestors, scattered among
  // siblings) go to the kernels query by query, as runs of consecutive cache rows.
  bool extra_runs = true;
  for (int32_t i = 0; i < g.n_q && extra_runs; ++i) {
    extra_runs = n_extra(i) == 0 || extra(i)[n_extra(i) - 1] - extra(i)[0] == n_extra(i) - 1;
  }
  auto run_begin = [&](int32_t i) { return n_extra(i) > 0 ? extra(i)[0] : 0; };
  auto run_end = [&](int32_t i) { return n_extra(i) > 0 ? extra(i)[0] + n_extra(i) : 0; };
  // Runs [e, e + n) of extra slots that follow each other in the cache rows (a tree's chain of
  // ancestors): one kernel call each, not one per key. The split does not change a bit
  // (kernel_set.h).
  auto for_each_run = [&](int32_t i, auto&& visit) {
    const int32_t* slots = extra(i);
    for (int32_t e = 0; e < n_extra(i);) {
      int32_t end = e + 1;
      while (end < n_extra(i) && slots[end] == slots[end - 1] + 1 &&
             slot_row(slots[end]) == slot_row(slots[end - 1]) + 1) {
        ++end;
      }
      visit(e, end - e);
      e = end;
    }
  };
  // Each query's keys in order, prefix then extras (the kernels' results do not depend on the
  // split, so blocks and runs give the bits AttendHead gives).
  auto for_each_key_range = [&](auto&& prefix_keys, auto&& extra_keys) {
    for_each_block(first, prefix_end, prefix_keys);
    if (extra_runs) {
      for_each_block(run_begin, run_end,
                     [&](int32_t i, int32_t b, int32_t n) { extra_keys(i, b - run_begin(i), n); });
    } else {
      for (int32_t i = 0; i < g.n_q; ++i) {
        for_each_run(i, [&](int32_t e, int32_t n) { extra_keys(i, e, n); });
      }
    }
  };
  // The kernels over n consecutive rows from `slot`'s, of float or half-float keys and values.
  auto score_rows = [&](int32_t i, int32_t slot, int32_t n, float* scores_out) {
    const int64_t at = slot_row(slot) * g.row_stride;
    if (g.keys_f16) {
      k.attn_scores_f16(query(i), g.keys_f16 + at, g.row_stride, n, g.head_dim, g.scale,
                        scores_out);
    } else {
      k.attn_scores(query(i), g.keys + at, g.row_stride, n, g.head_dim, g.scale, scores_out);
    }
  };
  auto sum_rows = [&](int32_t i, int32_t slot, int32_t n, const float* p) {
    const int64_t at = slot_row(slot) * g.row_stride;
    if (g.values_f16) {
      k.attn_weighted_sum_f16(p, g.values_f16 + at, g.row_stride, n, g.head_dim, out(i));
    } else {
      k.attn_weighted_sum(p, g.values + at, g.row_stride, n, g.head_dim, out(i));
    }
  };
  for (int32_t i = 0; i < g.n_q; ++i) std::fill(out(i), out(i) + g.head_dim, 0.0f);
  for_each_key_range([&](int32_t i, int32_t b,
                         int32_t n) { score_rows(i, b, n, scores + i * row + (b - first(i))); },
                     [&](int32_t i, int32_t e, int32_t n) {
                       score_rows(i, extra(i)[e], n, scores + i * row + n_prefix(i) + e);
                     });
  float* sums = scores + g.n_q * row;  // one more row of scratch holds each query's softmax sum
  for (int32_t i = 0; i < g.n_q; ++i) {
    sums[i] = k.softmax_exp(scores + i * row, n_prefix(i) + n_extra(i));
  }
  for_each_key_range([&](int32_t i, int32_t b,
                         int32_t n) { sum_rows(i, b, n, scores + i * row + (b - first(i))); },
                     [&](int32_t i, int32_t e, int32_t n) {
                       sum_rows(i, extra(i)[e], n, scores + i * row + n_prefix(i) + e);
                     });
  for (int32_t i = 0; i < g.n_q; ++i) {
    const float inv = 1.0f / sums[i];
    for (int32_t d = 0; d < g.head_dim; ++d) out(i)[d] *= inv;
  }
}

}  // namespace grove
