#include "model/kv_cache.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"

namespace grove {

KvCache::KvCache(int32_t n_layer, int32_t n_ctx, int32_t kv_dim, int32_t first_layer)
    : n_layer_(n_layer), first_layer_(first_layer), n_ctx_(n_ctx), kv_dim_(kv_dim) {
  std::size_t n = static_cast<std::size_t>(n_layer) * n_ctx * kv_dim;
  k_.Resize(n);
  v_.Resize(n);
  positions_.Resize(n_ctx);
  parents_.Resize(n_ctx);
  // Touched now, at load: left to the first writes, every few tokens of the first generation
  // page-faulted (a first 128-token generation of the bundled target ran 1.4x slower than the
  // next), and whichever decoding ran first looked slower in a comparison.
  k_.Zero();
  v_.Zero();
}

void KvCache::Truncate(int32_t n) {
  if (n < 0 || n > length_) Fail("kv cache: cannot truncate ", length_, " slots to ", n);
  length_ = n;
  chain_length_ = std::min(chain_length_, n);
}

void KvCache::CopyPrefix(const KvCache& other, int32_t n) {
  if (other.n_layer_ != n_layer_ || other.first_layer_ != first_layer_ || other.n_ctx_ != n_ctx_ ||
      other.kv_dim_ != kv_dim_) {
    Fail("kv cache: cannot copy between caches of different shapes");
  }
  if (n < 0 || n > other.chain_length_) {
    Fail("kv cache: cannot copy ", n, " slots of a cache whose chain holds ", other.chain_length_);
  }
  const std::size_t bytes = sizeof(float) * static_cast<std::size_t>(n) * kv_dim_;
  for (int32_t layer = first_layer_; layer < first_layer_ + n_layer_; ++layer) {
    std::memcpy(key(layer, 0), other.key(layer, 0), bytes);
    std::memcpy(value(layer, 0), other.value(layer, 0), bytes);
  }
  std::memcpy(positions_.data(), other.positions_.data(), sizeof(int32_t) * n);
  std::memcpy(parents_.data(), other.parents_.data(), sizeof(int32_t) * n);
  length_ = n;
  chain_length_ = n;
}

void KvCache::SetSlot(int32_t slot, int32_t position, int32_t parent_slot) {
  positions_[slot] = position;
  parents_[slot] = parent_slot;
  if (slot == chain_length_ && parent_slot == slot - 1) ++chain_length_;
}

void KvCache::Append(int32_t n) {
  GROVE_CHECK(n >= 0 && length_ + n <= n_ctx_, "kv cache overflow");
  length_ += n;
}

void KvCache::CheckKept(int32_t prefix, std::span<const int32_t> kept_slots) const {
  if (prefix < 0 || prefix > length_)
    Fail("kv cache: compact prefix ", prefix, " outside 0..", length_);
  int32_t previous = prefix - 1;
  for (int32_t slot : kept_slots) {
    if (slot <= previous || slot >= length_) {
      Fail("kv cache: compact slots must increase and lie in [", prefix, ", ", length_, "); got ",
           slot);
    }
    previous = slot;
  }
}

void KvCache::MoveSlot(int32_t src, int32_t dst) {
  if (src == dst) return;
  const std::size_t row_bytes = sizeof(float) * kv_dim_;
  for (int32_t layer = first_layer_; layer < first_layer_ + n_layer_; ++layer) {
    std::memcpy(key(layer, dst), key(layer, src), row_bytes);
    std::memcpy(value(layer, dst), value(layer, src), row_bytes);
  }
  positions_[dst] = positions_[src];
}

void KvCache::Compact(int32_t prefix, std::span<const int32_t> kept_slots) {
  CheckKept(prefix, kept_slots);
  int32_t dst = prefix;
  for (int32_t src : kept_slots) {
    MoveSlot(src, dst);
    parents_[dst] = dst - 1;
    ++dst;
  }
  length_ = dst;
  // The kept path continues slot prefix - 1; it is part of the chain if that slot is.
  chain_length_ = chain_length_ >= prefix ? length_ : chain_length_;
}

void KvCache::KeepSubtree(int32_t prefix, std::span<const int32_t> kept_slots) {
  CheckKept(prefix, kept_slots);
  // Kept slots increase, so a kept parent (an earlier slot) is found among those already moved.
  int32_t dst = prefix;
  for (std::size_t i = 0; i < kept_slots.size(); ++i, ++dst) {
    const int32_t parent = parents_[kept_slots[i]];
    int32_t new_parent = parent;
    if (parent >= prefix) {
      const auto* begin = kept_slots.data();
      const auto* found = std::lower_bound(begin, begin + i, parent);
      if (found == begin + i || *found != parent) {
        Fail("kv cache: kept slot ", kept_slots[i], " has parent ", parent, ", neither before ",
             prefix, " nor kept");
      }
      new_parent = prefix + static_cast<int32_t>(found - begin);
    }
    MoveSlot(kept_slots[i], dst);
    parents_[dst] = new_parent;
  }
  length_ = dst;
  chain_length_ = std::min(chain_length_, prefix);
  while (chain_length_ < length_ && parents_[chain_length_] == chain_length_ - 1) ++chain_length_;
}

}  // namespace grove
