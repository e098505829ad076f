// Where each token of a batch goes and what it sees (contract 1), worked out before any backend
// runs it: the cache slot it takes, the committed prefix and the extra slots (speculative
// ancestors in the cache, batch ancestors, itself) its attention reads, the part of them a
// sliding-window layer reads, the query groups that read one prefix together, and the rows that
// want logits. Model checks and lays out every batch here; the backends (forward_backend.h) read
// the layout and never the batch's parent links. Sized for max_batch tokens at load: laying out a
// batch never allocates.
#pragma once

#include <cstdint>
#include <span>

#include "base/aligned_buffer.h"
#include "model/batch.h"

namespace grove {

class KvCachePool;
struct ModelConfig;

class BatchLayout {
 public:
  BatchLayout(int32_t max_batch, int32_t n_seq);

  // Throws grove::Error, changing nothing, on a malformed batch (arrays, tokens, sequences,
  // parents, positions) or one the caches cannot take (a context that would overflow).
  void Check(const Batch& batch, const KvCachePool& kv, const ModelConfig& config, int32_t n_ctx);
  // Lays out a checked batch against the caches as they are before its tokens are appended.
  // Throws grove::Error, changing no cache, when the speculative chains are longer than the
  // bookkeeping holds or a sliding-window layer's ring cannot hold what a token reads.
  void Prepare(const Batch& batch, const KvCachePool& kv, int32_t sliding_window);
  // Claims the laid-out batch's slots in the caches, recording each token's position and parent.
  void Append(const Batch& batch, KvCachePool& kv) const;

  // The batch laid out last: its n tokens.
  int32_t size() const { return n_; }
  // The cache slot of each token.
  const int32_t* slot() const { return slot_.data(); }
  // Token i sees cache slots [0, prefix_len()[i]), then extra()[extra_begin()[i] ..
  // extra_begin()[i + 1]) (increasing; the last is its own slot).
  const int32_t* prefix_len() const { return prefix_len_.data(); }
  const int32_t* extra_begin() const { return visible_begin_.data(); }
  const int32_t* extra() const { return visible_.data(); }
  // Most entries extra() holds (a backend sizes its copy of it by this).
  int64_t extra_capacity() const { return static_cast<int64_t>(visible_.size()); }
  // On sliding-window layers, token i sees prefix slots [window_prefix_begin()[i], prefix_len()[i])
  // and its extra slots from extra()[window_extra_first()[i]] on. Null without a window.
  const int32_t* window_prefix_begin() const {
    return window_ ? window_prefix_begin_.data() : nullptr;
  }
  const int32_t* window_extra_first() const {
    return window_ ? window_extra_first_.data() : nullptr;
  }
  // Query groups: consecutive tokens of one sequence that see the same committed prefix (a tree's
  // nodes, a prompt chunk), at most kMaxQueryGroup each (ops/attention.h). Group g is tokens
  // [query_group_begin()[g], query_group_begin()[g + 1]); group_keys()[g] sums the keys its
  // tokens see (a window's layers see fewer).
  int32_t n_query_groups() const { return n_query_groups_; }
  const int32_t* query_group_begin() const { return query_group_begin_.data(); }
  std::span<const int64_t> group_keys() const {
    return {group_keys_.data(), static_cast<std::size_t>(n_query_groups_)};
  }
  // The batch index of each row that wants logits, in batch order.
  int32_t n_out() const { return n_out_; }
  const int32_t* out_rows() const { return out_rows_.data(); }
  // Bytes of the bookkeeping.
  uint64_t bytes() const;

 private:
  void CheckToken(const Batch& batch, int32_t i, const KvCachePool& kv, const ModelConfig& config);
  // Counts each sequence's tokens of the batch into seq_count_.
  void CountSequences(const Batch& batch);
  void PrepareVisibility(const Batch& batch, const KvCachePool& kv);
  void PrepareQueryGroups(const Batch& batch);
  void PrepareWindow(const Batch& batch, const KvCachePool& kv, int32_t window);

  int32_t n_ = 0;
  bool window_ = false;
  AlignedBuffer<int32_t> slot_;                  // (max_batch) cache slot of each token
  AlignedBuffer<int32_t> prefix_len_;            // (max_batch) cache slots [0, prefix) it sees
  AlignedBuffer<int32_t> visible_cache_parent_;  // (max_batch) parent slot recorded for each token
  AlignedBuffer<int32_t> visible_begin_;         // (max_batch + 1) offsets into visible_
  AlignedBuffer<int32_t> visible_;           // slots of ancestors then self, per token, increasing
  AlignedBuffer<int32_t> visible_position_;  // the position of each slot of visible_
  AlignedBuffer<int32_t> out_rows_;          // (max_batch) batch index of each logits row
  AlignedBuffer<int32_t> seq_count_;         // (n_seq) tokens of each sequence in this batch
  AlignedBuffer<int32_t> window_prefix_begin_;  // (max_batch)
  AlignedBuffer<int32_t> window_extra_first_;   // (max_batch)
  AlignedBuffer<int32_t> query_group_begin_;    // (max_batch + 1) first token of each query group
  AlignedBuffer<int64_t> group_keys_;           // (max_batch) keys each query group sees
  int32_t n_query_groups_ = 0;
  int32_t n_out_ = 0;
};

}  // namespace grove
