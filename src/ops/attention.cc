#include "ops/attention.h"

#include <algorithm>
#include <limits>

#include "kernels/kernel_set.h"
#include "ops/parallel.h"

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
  // A sink is one more logit after the keys' (AttentionInput).
  if (in.sink) scores[n] = *in.sink;
  const float sum = k.softmax_exp(scores, n + (in.sink ? 1 : 0));
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

namespace {

// One query group's attention (AttendQueries): query i's keys are prefix slots [first(i),
// n_prefix), then extra slots from extra_first(i) on; its scores row holds them in that order from
// its start (as AttendHead lays them out). The keys (and values) are visited twice, for scores and
// for the weighted sum, in the same blocks and runs.
class GroupAttention {
 public:
  GroupAttention(const KernelSet& kernels, const QueryGroup& group)
      : k_(kernels), g_(group), extra_runs_(ExtraSlotsAreRuns()) {
    int32_t max_extra = 0;
    for (int32_t i = 0; i < g_.n_q; ++i) {
      max_extra = std::max(max_extra, g_.extra_begin[i + 1] - g_.extra_begin[i]);
    }
    // A sink's logit follows each query's scores (AttentionInput).
    row_ = g_.n_prefix + max_extra + (g_.sink ? 1 : 0);
  }

  void Run(float* scores) const {
    for (int32_t i = 0; i < g_.n_q; ++i) std::fill(out(i), out(i) + g_.head_dim, 0.0f);
    ForEachKeyRange([&](int32_t i, int32_t b,
                        int32_t n) { ScoreRows(i, b, n, scores + i * row_ + (b - first(i))); },
                    [&](int32_t i, int32_t e, int32_t n) {
                      ScoreRows(i, extra(i)[e], n, scores + i * row_ + n_prefix(i) + e);
                    });
    float* sums = scores + g_.n_q * row_;  // one more row of scratch holds each query's softmax sum
    for (int32_t i = 0; i < g_.n_q; ++i) {
      const int32_t n = n_prefix(i) + n_extra(i);
      if (g_.sink) scores[i * row_ + n] = *g_.sink;
      sums[i] = k_.softmax_exp(scores + i * row_, n + (g_.sink ? 1 : 0));
    }
    ForEachKeyRange([&](int32_t i, int32_t b,
                        int32_t n) { SumRows(i, b, n, scores + i * row_ + (b - first(i))); },
                    [&](int32_t i, int32_t e, int32_t n) {
                      SumRows(i, extra(i)[e], n, scores + i * row_ + n_prefix(i) + e);
                    });
    for (int32_t i = 0; i < g_.n_q; ++i) {
      const float inv = 1.0f / sums[i];
      for (int32_t d = 0; d < g_.head_dim; ++d) out(i)[d] *= inv;
    }
  }

 private:
  int32_t first(int32_t i) const { return g_.prefix_begin ? g_.prefix_begin[i] : 0; }
  int32_t extra_first(int32_t i) const {
    return g_.extra_first ? g_.extra_first[i] : g_.extra_begin[i];
  }
  const float* query(int32_t i) const { return g_.q + i * g_.q_stride; }
  float* out(int32_t i) const { return g_.out + i * g_.out_stride; }
  int32_t slot_row(int32_t slot) const { return g_.ring > 0 ? slot % g_.ring : slot; }
  // Query i's prefix keys, and its extra slots extra(i)[0 .. n_extra(i)), which its scores row
  // holds after them.
  int32_t n_prefix(int32_t i) const { return g_.n_prefix - first(i); }
  const int32_t* extra(int32_t i) const { return g_.extra + extra_first(i); }
  int32_t n_extra(int32_t i) const { return g_.extra_begin[i + 1] - extra_first(i); }

  // The extra slots of a prompt chunk are one run of slots per query (the chunk's earlier
  // tokens), overlapping from query to query: they are read in blocks too, as the prefix is (a
  // 512-token prompt's queries had each streamed their run from L2). A tree's (ancestors,
  // scattered among siblings) go to the kernels query by query, as runs of consecutive cache rows.
  bool ExtraSlotsAreRuns() const {
    for (int32_t i = 0; i < g_.n_q; ++i) {
      if (n_extra(i) != 0 && extra(i)[n_extra(i) - 1] - extra(i)[0] != n_extra(i) - 1) return false;
    }
    return true;
  }

  // Keys (values) read in blocks of kKeyBlock slots, each by every query that sees part of it,
  // while it is in L1: query i sees slots [begin(i), end(i)); visit(i, b, n) for its part [b, b +
  // n) of a block, blocks in slot order. A block never wraps around a ring: blocks start at
  // multiples of the ring's rows too.
  void ForEachBlock(auto&& begin, auto&& end, auto&& visit) const {
    int32_t lo = std::numeric_limits<int32_t>::max(), hi = std::numeric_limits<int32_t>::min();
    for (int32_t i = 0; i < g_.n_q; ++i) {
      if (begin(i) >= end(i)) continue;
      lo = std::min(lo, begin(i));
      hi = std::max(hi, end(i));
    }
    for (int32_t j0 = lo; j0 < hi;) {
      int32_t j1 = std::min(j0 + kKeyBlock, hi);
      if (g_.ring > 0) j1 = std::min(j1, j0 + g_.ring - j0 % g_.ring);
      for (int32_t i = 0; i < g_.n_q; ++i) {
        const int32_t b = std::max(j0, begin(i));
        const int32_t e = std::min(j1, end(i));
        if (b < e) visit(i, b, e - b);
      }
      j0 = j1;
    }
  }

  // Runs [e, e + n) of query i's extra slots that follow each other in the cache rows (a tree's
  // chain of ancestors): one kernel call each, not one per key. The split does not change a bit
  // (kernel_set.h).
  void ForEachRun(int32_t i, auto&& visit) const {
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
  }

  // Each query's keys in order, prefix then extras (the kernels' results do not depend on the
  // split, so blocks and runs give the bits AttendHead gives).
  void ForEachKeyRange(auto&& prefix_keys, auto&& extra_keys) const {
    ForEachBlock([&](int32_t i) { return first(i); }, [&](int32_t) { return g_.n_prefix; },
                 prefix_keys);
    if (extra_runs_) {
      auto run_begin = [&](int32_t i) { return n_extra(i) > 0 ? extra(i)[0] : 0; };
      auto run_end = [&](int32_t i) { return n_extra(i) > 0 ? extra(i)[0] + n_extra(i) : 0; };
      ForEachBlock(run_begin, run_end,
                   [&](int32_t i, int32_t b, int32_t n) { extra_keys(i, b - run_begin(i), n); });
    } else {
      for (int32_t i = 0; i < g_.n_q; ++i) {
        ForEachRun(i, [&](int32_t e, int32_t n) { extra_keys(i, e, n); });
      }
    }
  }

  // The kernels over n consecutive rows from `slot`'s, of float or half-float keys and values.
  void ScoreRows(int32_t i, int32_t slot, int32_t n, float* scores_out) const {
    const int64_t at = slot_row(slot) * g_.row_stride;
    if (g_.keys_f16) {
      k_.attn_scores_f16(query(i), g_.keys_f16 + at, g_.row_stride, n, g_.head_dim, g_.scale,
                         scores_out);
    } else {
      k_.attn_scores(query(i), g_.keys + at, g_.row_stride, n, g_.head_dim, g_.scale, scores_out);
    }
  }
  void SumRows(int32_t i, int32_t slot, int32_t n, const float* p) const {
    const int64_t at = slot_row(slot) * g_.row_stride;
    if (g_.values_f16) {
      k_.attn_weighted_sum_f16(p, g_.values_f16 + at, g_.row_stride, n, g_.head_dim, out(i));
    } else {
      k_.attn_weighted_sum(p, g_.values + at, g_.row_stride, n, g_.head_dim, out(i));
    }
  }

  const KernelSet& k_;
  const QueryGroup& g_;
  bool extra_runs_;
  int64_t row_ = 0;  // floats of each query's scores row
};

}  // namespace

void AttendQueries(const QueryGroup& group, float* scores) {
  AttendQueriesWithKernels(ActiveKernels(), group, scores);
}

void AttendQueriesWithKernels(const KernelSet& k, const QueryGroup& g, float* scores) {
  GroupAttention(k, g).Run(scores);
}

namespace {

// Shares the tasks of a batch's attention are cut into, which the pool's threads claim a few at a
// time: enough for 16 threads to balance, and each share's bookkeeping (a pass over the tasks' key
// counts) is nothing beside its products.
constexpr int64_t kAttentionShares = 64;

}  // namespace

void AttendInParallel(ThreadPool& pool, std::span<const int64_t> group_keys, int32_t n_head,
                      int32_t head_dim, float* scratch, std::size_t scratch_floats,
                      FunctionRef<void(int32_t group, int32_t head, float* scores)> attend) {
  int64_t total_keys = 0;
  for (int64_t keys : group_keys) total_keys += keys;
  const int64_t n_tasks = static_cast<int64_t>(group_keys.size()) * n_head;
  // Scores and weighted sum: two multiply-adds per visible key and head element.
  const int64_t macs = 2 * total_keys * n_head * head_dim;
  // A task's cost is its group's keys; it belongs to the share that holds the middle of its span
  // (at twice the scale, so that the middle is an integer).
  const int64_t span = 2 * total_keys * n_head + 1;
  ParallelForWorkWithThread(
      pool, kAttentionShares, macs, [&](int64_t share_begin, int64_t share_end, int thread) {
        float* scores = scratch + static_cast<std::size_t>(thread) * scratch_floats;
        int64_t before = 0;  // keys of the tasks before this one
        for (int64_t task = 0; task < n_tasks; ++task) {
          const int64_t keys = group_keys[task / n_head];
          const int64_t share = (2 * before + keys) * kAttentionShares / span;
          before += keys;
          if (share < share_begin || share >= share_end) continue;
          attend(static_cast<int32_t>(task / n_head), static_cast<int32_t>(task % n_head), scores);
        }
      });
}

}  // namespace grove
