#include "model/batch_layout.h"

#include <algorithm>

#include "base/error.h"
#include "model/config.h"
#include "model/kv_cache_pool.h"
#include "ops/attention.h"

namespace grove {

BatchLayout::BatchLayout(int32_t max_batch, int32_t n_seq) {
  const auto b = static_cast<std::size_t>(max_batch);
  slot_.Resize(b);
  prefix_len_.Resize(b);
  visible_begin_.Resize(b + 1);
  // Batch ancestors of every token (a chain of max_batch at most), plus speculative cache ancestors
  // (a draft tree expanded level by level: rarely more than a few dozen deep).
  visible_.Resize(b * (b + 1) / 2 + b * 256);
  visible_position_.Resize(visible_.size());
  visible_cache_parent_.Resize(b);
  out_rows_.Resize(b);
  query_group_begin_.Resize(b + 1);
  group_keys_.Resize(b);
  window_prefix_begin_.Resize(b);
  window_extra_first_.Resize(b);
  seq_count_.Resize(static_cast<std::size_t>(n_seq));
}

uint64_t BatchLayout::bytes() const {
  uint64_t n = group_keys_.size() * sizeof(int64_t);
  for (const AlignedBuffer<int32_t>* b :
       {&slot_, &prefix_len_, &visible_cache_parent_, &visible_begin_, &visible_, &out_rows_,
        &seq_count_, &query_group_begin_, &window_prefix_begin_, &window_extra_first_,
        &visible_position_}) {
    n += b->size() * sizeof(int32_t);
  }
  return n;
}

void BatchLayout::CountSequences(const Batch& batch) {
  std::fill(seq_count_.data(), seq_count_.data() + seq_count_.size(), 0);
  for (int32_t seq : batch.seq_ids) ++seq_count_[seq];
}

void BatchLayout::Check(const Batch& batch, const KvCachePool& kv, const ModelConfig& config,
                        int32_t n_ctx) {
  const int32_t n = batch.size();
  if (n == 0) Fail("forward: empty batch");
  const auto max_batch = static_cast<int32_t>(slot_.size());
  if (n > max_batch) Fail("forward: batch of ", n, " tokens exceeds max_batch ", max_batch);
  if (batch.positions.size() != batch.tokens.size() ||
      batch.seq_ids.size() != batch.tokens.size() || batch.parents.size() != batch.tokens.size() ||
      batch.logits.size() != batch.tokens.size() ||
      batch.cache_parents.size() != batch.tokens.size()) {
    Fail("forward: batch arrays differ in length");
  }
  for (int32_t i = 0; i < n; ++i) CheckToken(batch, i, kv, config);
  CountSequences(batch);
  for (int32_t s = 0; s < kv.size(); ++s) {
    if (kv.cache(s).length() + seq_count_[s] > n_ctx) {
      Fail("forward: context full: sequence ", s, " holds ", kv.cache(s).length(),
           " tokens and the batch adds ", seq_count_[s], ", but the context is ", n_ctx, " tokens");
    }
  }
}

void BatchLayout::CheckToken(const Batch& batch, int32_t i, const KvCachePool& kv,
                             const ModelConfig& config) {
  if (batch.tokens[i] < 0 || batch.tokens[i] >= config.n_vocab) {
    Fail("forward: token ", batch.tokens[i], " at batch index ", i, " is outside the vocabulary (",
         config.n_vocab, ")");
  }
  const int32_t seq = batch.seq_ids[i];
  if (seq < 0 || seq >= kv.size())
    Fail("forward: sequence id ", seq, " outside 0..", kv.size() - 1);
  const int32_t parent = batch.parents[i];
  if (parent >= i || parent < -1)
    Fail("forward: token ", i, " has parent ", parent, " (must be earlier)");
  if (parent >= 0 && batch.seq_ids[parent] != seq) {
    Fail("forward: token ", i, " and its parent ", parent, " belong to different sequences");
  }
  if (batch.positions[i] < 0) Fail("forward: token ", i, " has negative position");
  // The sliding window finds a token's keys by position along its ancestors, which therefore
  // must come before it.
  const bool window = config.sliding_window > 0;
  if (window && parent >= 0 && batch.positions[i] <= batch.positions[parent]) {
    Fail("forward: token ", i, " at position ", batch.positions[i],
         " does not follow its parent's position ", batch.positions[parent]);
  }
  const int32_t cp = batch.cache_parents[i];
  const KvCache& cache = kv.cache(seq);
  if (parent == -1 && cp != Batch::kContinueCache && (cp < 0 || cp >= cache.length())) {
    Fail("forward: token ", i, " continues cache slot ", cp, " but sequence ", seq, " holds ",
         cache.length(), " slots");
  }
  const int32_t anchor = cp == Batch::kContinueCache ? cache.length() - 1 : cp;
  if (window && parent == -1 && anchor >= 0 && batch.positions[i] <= cache.position(anchor)) {
    Fail("forward: token ", i, " at position ", batch.positions[i],
         " does not follow the position ", cache.position(anchor), " of cache slot ", anchor,
         " it continues");
  }
}

void BatchLayout::Prepare(const Batch& batch, const KvCachePool& kv, int32_t sliding_window) {
  n_ = batch.size();
  window_ = sliding_window > 0;
  PrepareVisibility(batch, kv);
  PrepareQueryGroups(batch);
  if (window_) PrepareWindow(batch, kv, sliding_window);
  n_out_ = 0;
  for (int32_t i = 0; i < n_; ++i) {
    if (batch.logits[i]) out_rows_[n_out_++] = i;
  }
}

void BatchLayout::PrepareVisibility(const Batch& batch, const KvCachePool& kv) {
  // Slots: a sequence's batch tokens take the next free slots of its cache in batch order.
  std::fill(seq_count_.data(), seq_count_.data() + seq_count_.size(), 0);
  for (int32_t i = 0; i < n_; ++i) {
    const int32_t seq = batch.seq_ids[i];
    slot_[i] = kv.cache(seq).length() + seq_count_[seq]++;
  }
  // What each token sees: cache slots [0, prefix_len_[i]), then visible_ (increasing slots): the
  // speculative cache ancestors its chain continues from, its batch ancestors (root first), itself.
  int32_t offset = 0;
  const auto capacity = static_cast<int32_t>(visible_.size());
  for (int32_t i = 0; i < n_; ++i) {
    const KvCache& cache = kv.cache(batch.seq_ids[i]);
    int32_t root = i;
    int32_t depth = 1;
    for (; batch.parents[root] >= 0; root = batch.parents[root]) ++depth;
    const int32_t cp = batch.cache_parents[root];
    int32_t anchor = cp == Batch::kContinueCache ? cache.length() - 1 : cp;
    int32_t n_spec = 0;
    for (int32_t s = anchor; s >= cache.chain_length(); s = cache.parent(s)) ++n_spec;
    if (offset + n_spec + depth > capacity) {
      Fail("forward: token ", i, " continues a speculative chain of ", n_spec,
           " cached tokens, more than the batch bookkeeping holds (", capacity, ")");
    }
    visible_cache_parent_[i] = batch.parents[i] >= 0 ? slot_[batch.parents[i]] : anchor;
    visible_begin_[i] = offset;
    int32_t k = offset + n_spec + depth;
    for (int32_t j = i; j >= 0; j = batch.parents[j]) {
      visible_position_[--k] = batch.positions[j];
      visible_[k] = slot_[j];
    }
    for (; anchor >= cache.chain_length(); anchor = cache.parent(anchor)) {
      visible_position_[--k] = cache.position(anchor);
      visible_[k] = anchor;
    }
    prefix_len_[i] = anchor + 1;
    offset += n_spec + depth;
  }
  visible_begin_[n_] = offset;
}

void BatchLayout::PrepareQueryGroups(const Batch& batch) {
  n_query_groups_ = 0;
  for (int32_t i = 0; i < n_; ++i) {
    const int32_t first = n_query_groups_ > 0 ? query_group_begin_[n_query_groups_ - 1] : -1;
    if (first < 0 || i - first >= kMaxQueryGroup || batch.seq_ids[i] != batch.seq_ids[first] ||
        prefix_len_[i] != prefix_len_[first]) {
      group_keys_[n_query_groups_] = 0;
      query_group_begin_[n_query_groups_++] = i;
    }
    group_keys_[n_query_groups_ - 1] += prefix_len_[i] + visible_begin_[i + 1] - visible_begin_[i];
  }
  query_group_begin_[n_query_groups_] = n_;
}

void BatchLayout::PrepareWindow(const Batch& batch, const KvCachePool& kv, int32_t window) {
  for (int32_t i = 0; i < n_; ++i) {
    const KvCache& cache = kv.cache(batch.seq_ids[i]);
    // Visible: keys at positions > p - window. Positions grow along every chain of ancestors, so
    // the visible keys of the prefix are its last ones, and those of the extra slots too.
    const int64_t oldest = static_cast<int64_t>(batch.positions[i]) - window;
    int32_t lo = 0;
    int32_t hi = prefix_len_[i];
    while (lo < hi) {
      const int32_t mid = lo + (hi - lo) / 2;
      if (cache.position(mid) > oldest) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    window_prefix_begin_[i] = lo;
    int32_t e = visible_begin_[i];
    while (e < visible_begin_[i + 1] - 1 && visible_position_[e] <= oldest) ++e;
    window_extra_first_[i] = e;
    // The ring layers hold the rows of the last ring_rows slots: the oldest this token reads must
    // still be there and stay there while the batch writes its own.
    const int32_t oldest_slot = lo < prefix_len_[i] ? lo : visible_[e];
    const int32_t ring = cache.ring_rows();
    if (ring > 0 && oldest_slot < cache.valid_from()) {
      Fail("forward: token ", i, " of sequence ", batch.seq_ids[i], " reads slot ", oldest_slot,
           " of the sliding window, which the window layers' ring of ", ring,
           " rows no longer holds (held: from slot ", cache.valid_from(),
           "): a cache rewound that far must be computed again");
    }
    const int32_t newest = cache.length() + seq_count_[batch.seq_ids[i]];
    if (ring > 0 && newest - oldest_slot > ring) {
      Fail("forward: token ", i, " of sequence ", batch.seq_ids[i], " reads slot ", oldest_slot,
           " while the batch writes up to slot ", newest - 1, ": more than the ", ring,
           " rows of the sliding-window ring (the window, and twice max_batch for a batch and "
           "the speculative slots of a tree); a smaller batch or tree, or a larger max_batch, "
           "fits");
    }
  }
}

void BatchLayout::Append(const Batch& batch, KvCachePool& kv) const {
  for (int32_t s = 0; s < kv.size(); ++s) kv.cache(s).Append(seq_count_[s]);
  for (int32_t i = 0; i < n_; ++i) {
    kv.cache(batch.seq_ids[i])
        .SetSlot(slot_[i], batch.positions[i], visible_cache_parent_[i], batch.tokens[i]);
  }
}

}  // namespace grove
