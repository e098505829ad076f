// Attention of one query head over a set of cached keys: the committed prefix of a sequence plus any
// extra slots (the ancestors of a tree node, then the node itself). Keys are visited in slot order,
// which is position order for every visible key, so a token's result is bit-identical whether its
// ancestors sit in the committed prefix or in the same tree batch (contract 2). Cost is linear in the
// number of visible keys: nothing is recomputed per token.
#pragma once

#include <cstdint>
#include <span>

namespace grove {

struct AttentionInput {
  const float* q;       // (head_dim) query of one head, already rotated
  const float* keys;    // key of slot s, this head's group: keys + s * row_stride
  const float* values;  // likewise
  int64_t row_stride;   // floats between consecutive slots (kv_dim)
  int32_t n_prefix;     // slots [0, n_prefix) are visible
  std::span<const int32_t> extra_slots;  // then these, increasing, all >= n_prefix
  int32_t head_dim;
  float scale;          // 1 / sqrt(head_dim)
};

// scores: scratch of at least n_prefix + extra_slots.size() floats. out: (head_dim). Requires at
// least one visible key. Uses ActiveKernels().
void AttendHead(const AttentionInput& in, float* scores, float* out);

struct KernelSet;
// AttendHead with the attention kernels of a given level (tests compare levels with it).
void AttendHeadWithKernels(const KernelSet& kernels, const AttentionInput& in, float* scores,
                           float* out);

}  // namespace grove
