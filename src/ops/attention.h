// Attention of one query head over a set of cached keys: the committed prefix of a sequence plus
// any extra slots (the ancestors of a tree node, then the node itself). Keys are visited in slot
// order, which is position order for every visible key, so a token's result is bit-identical
// whether its ancestors sit in the committed prefix or in the same tree batch (contract 2). Cost is
// linear in the number of visible keys: nothing is recomputed per token.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "base/function_ref.h"

namespace grove {

class ThreadPool;

struct AttentionInput {
  const float* q;                        // (head_dim) query of one head, already rotated
  const float* keys;                     // key of slot s, this head's group: keys + s * row_stride
  const float* values;                   // likewise
  int64_t row_stride;                    // floats between consecutive slots (kv_dim)
  int32_t n_prefix;                      // slots [0, n_prefix) are visible
  std::span<const int32_t> extra_slots;  // then these, increasing, all >= n_prefix
  int32_t head_dim;
  float scale;  // 1 / sqrt(head_dim)
  // The head's sink logit (gpt-oss), or null: it joins the softmax (unscaled) with no value, as
  // ggml's soft_max with sinks: out = sum_j exp(s_j - m) v_j / (sum_j exp(s_j - m) + exp(sink -
  // m)), m the largest of the scores and the sink.
  const float* sink = nullptr;
};

// scores: scratch of at least n_prefix + extra_slots.size() floats (one more with a sink). out:
// (head_dim). Requires at least one visible key. Uses ActiveKernels(). The forward pass attends by
// query group (AttendQueries, below); this one query form is the reference the groups are tested
// against.
void AttendHead(const AttentionInput& in, float* scores, float* out);

struct KernelSet;
// AttendHead with the attention kernels of a given level (tests compare levels with it).
void AttendHeadWithKernels(const KernelSet& kernels, const AttentionInput& in, float* scores,
                           float* out);

// Several queries of one head that see the same committed prefix (the nodes of a draft tree, the
// tokens of a prompt chunk), each with its own extra slots. Query i's output is bit-identical to
// AttendHead's for that query alone: the keys and values of the prefix are visited in blocks
// small enough to stay in L1 while every query reads them, and the kernels' result for a key
// does not depend on the block it falls in (kernel_set.h). A tree of n nodes then reads its
// prefix from L2 once instead of n times.
struct QueryGroup {
  const float* q;  // query i (rotated) at q + i * q_stride, head_dim floats
  int64_t q_stride;
  int32_t n_q;
  const float* keys;  // as AttentionInput
  const float* values;
  int64_t row_stride;
  int32_t n_prefix;
  // Query i's extra slots: extra[extra_begin[i]] .. extra[extra_begin[i + 1] - 1], increasing.
  const int32_t* extra_begin;
  const int32_t* extra;
  int32_t head_dim;
  float scale;
  float* out;  // query i's output at out + i * out_stride
  int64_t out_stride;
  // A sliding window, or null for none: query i sees prefix slots [prefix_begin[i], n_prefix) and
  // its extra slots from extra[extra_first[i]] on (extra_begin[i] <= extra_first[i]). Its result is
  // then AttendHead's over just those keys.
  const int32_t* prefix_begin = nullptr;
  const int32_t* extra_first = nullptr;
  // Keys and values kept in a ring of this many rows (slot s in row s % ring; 0: row s). A run of
  // slots that wraps is read in two parts, in slot order, with the bits of one.
  int32_t ring = 0;
  // An f16 KV cache (model/kv_cache.h): keys and values as half floats, laid out as `keys` and
  // `values` would be (those then null). Each query's result is then the float path's bits on the
  // widened keys and values (kernel_set.h).
  const uint16_t* keys_f16 = nullptr;
  const uint16_t* values_f16 = nullptr;
  const float* sink = nullptr;  // as AttentionInput's
};

// Most queries one group holds (the scratch AttendQueries needs grows with it).
inline constexpr int32_t kMaxQueryGroup = 16;

// scores: scratch of n_q * (n_prefix + the most extra slots of a query + 2) floats.
void AttendQueries(const QueryGroup& group, float* scores);
void AttendQueriesWithKernels(const KernelSet& kernels, const QueryGroup& group, float* scores);

// The attention of a whole batch, spread over the pool: attend(group, head, scores) for every
// query group of the batch (group_keys[g]: the keys its queries see, summed) and every one of
// n_head heads, `scores` being the calling thread's scratch of scratch_floats floats from `scratch`
// (one region per pool thread). The (group, head) tasks are cut into shares of equal keys, not of
// equal counts, because a prompt's later groups see more of it; the threads claim shares as they
// are free, so a thread the system descheduled holds up no layer. Runs on the calling thread when
// the work is not worth a dispatch (ops/parallel.h). Which thread runs a task changes no bit.
void AttendInParallel(ThreadPool& pool, std::span<const int64_t> group_keys, int32_t n_head,
                      int32_t head_dim, float* scratch, std::size_t scratch_floats,
                      FunctionRef<void(int32_t group, int32_t head, float* scores)> attend);

}  // namespace grove
