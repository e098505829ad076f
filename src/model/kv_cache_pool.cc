#include "model/kv_cache_pool.h"

#include "base/error.h"
#include "model/recurrent_state.h"

namespace grove {

KvCachePool::KvCachePool(int32_t n_slots, int32_t n_layer, int32_t n_ctx, int32_t kv_dim,
                         int32_t first_layer)
    : KvCachePool(
          n_slots,
          KvCacheShape{
              .n_layer = n_layer, .n_ctx = n_ctx, .kv_dim = kv_dim, .first_layer = first_layer}) {}

KvCachePool::KvCachePool(int32_t n_slots, const KvCacheShape& shape)
    : acquired_(static_cast<std::size_t>(n_slots), 0) {
  caches_.reserve(static_cast<std::size_t>(n_slots));
  for (int32_t s = 0; s < n_slots; ++s) caches_.emplace_back(shape);
}

uint64_t KvCachePool::bytes_per_slot() const {
  return caches_.empty() ? 0 : caches_.front().bytes();
}

int32_t KvCachePool::Acquire() {
  for (int32_t s = 0; s < size(); ++s) {
    if (acquired_[s]) continue;
    acquired_[s] = 1;
    ++in_use_count_;
    caches_[s].Clear();
    return s;
  }
  Fail("kv cache pool: all ", size(), " sequence slots are in use");
}

void KvCachePool::Release(int32_t seq) {
  if (seq < 0 || seq >= size() || !acquired_[seq]) {
    Fail("kv cache pool: sequence ", seq, " is not acquired");
  }
  acquired_[seq] = 0;
  --in_use_count_;
  caches_[seq].Clear();
}

int32_t KvCachePool::Fork(int32_t parent, int32_t n) {
  if (parent < 0 || parent >= size() || !acquired_[parent]) {
    Fail("kv cache pool: cannot fork sequence ", parent, ": it is not acquired");
  }
  if (n < 0 || n > caches_[parent].chain_length()) {
    Fail("kv cache pool: cannot fork ", n, " slots of sequence ", parent, ", which holds ",
         caches_[parent].chain_length(), " committed slots");
  }
  if (caches_[parent].ReusablePrefix(n) != n) {
    Fail("kv cache pool: cannot fork ", n, " slots of sequence ", parent,
         ": its sliding-window ring no longer holds the rows before slot ", n);
  }
  const int32_t child = Acquire();
  caches_[child].CopyPrefix(caches_[parent], n);
  // The child's state is the parent's (its first batch rewinds it to n, or refuses by name).
  if (recurrent_) recurrent_->Copy(parent, child);
  return child;
}

void KvCachePool::SetRecurrentStates(std::shared_ptr<RecurrentStates> states) {
  recurrent_ = std::move(states);
}

}  // namespace grove
