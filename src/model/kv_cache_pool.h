// The KV caches of one forward context (model.h), as slots that sequences acquire, release and
// fork. A sequence id is a slot index; Batch::seq_ids name slots. Every slot is allocated (and
// faulted in) at load, so acquiring never allocates; resident memory is the slot count times one
// cache (bytes_per_slot()).
//
// Fork: tree-of-thought siblings start from the same state. A fork copies the parent's first n
// committed slots into a free slot, so the child continues without recomputing the shared prefix.
// It copies rather than shares pages: O(n) memcpy per fork against O(n) forwards saved, and slots
// never alias, which keeps Compact and Truncate local to one sequence. (Paged attention would
// share the pages; see docs/design.md.)
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/kv_cache.h"

namespace grove {

class RecurrentStates;

class KvCachePool {
 public:
  // Slots of layers [first_layer, first_layer + n_layer) each (KvCache).
  KvCachePool(int32_t n_slots, int32_t n_layer, int32_t n_ctx, int32_t kv_dim,
              int32_t first_layer = 0);
  KvCachePool(int32_t n_slots, const KvCacheShape& shape);

  int32_t size() const { return static_cast<int32_t>(caches_.size()); }
  int32_t in_use() const { return in_use_count_; }
  bool acquired(int32_t seq) const { return acquired_.at(seq) != 0; }
  uint64_t bytes_per_slot() const;

  KvCache& cache(int32_t seq) { return caches_.at(seq); }
  const KvCache& cache(int32_t seq) const { return caches_.at(seq); }

  // The lowest free slot, cleared. Throws grove::Error when every slot is taken.
  int32_t Acquire();
  // Clears the slot and returns it to the pool. Throws grove::Error if it was not acquired.
  void Release(int32_t seq);
  // Acquires a slot holding a copy of the parent's first n slots, which must be committed text (a
  // chain: n <= the parent's chain_length()). Throws grove::Error otherwise or when the pool is
  // full.
  int32_t Fork(int32_t parent, int32_t n);

  // The recurrent state of each sequence on Gated DeltaNet layers (recurrent_state.h), when the
  // model has them (the CPU backend sets it): acquired, released and forked with the caches.
  RecurrentStates* recurrent() const { return recurrent_.get(); }
  void SetRecurrentStates(std::shared_ptr<RecurrentStates> states);

 private:
  std::vector<KvCache> caches_;
  std::vector<uint8_t> acquired_;
  int32_t in_use_count_ = 0;
  std::shared_ptr<RecurrentStates> recurrent_;
};

}  // namespace grove
