#include "model/kv_cache.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "cuda/kernels.h"

namespace grove {

const char* KvCacheTypeName(KvCacheType type) { return type == KvCacheType::kF16 ? "f16" : "f32"; }

KvCacheType ParseKvCacheType(std::string_view name) {
  if (name == "f32") return KvCacheType::kF32;
  if (name == "f16") return KvCacheType::kF16;
  Fail("cache type '", name, "' is not one of f32, f16");
}

KvCache::KvCache(int32_t n_layer, int32_t n_ctx, int32_t kv_dim, int32_t first_layer)
    : KvCache(KvCacheShape{
          .n_layer = n_layer, .n_ctx = n_ctx, .kv_dim = kv_dim, .first_layer = first_layer}) {}

KvCache::KvCache(const KvCacheShape& shape)
    : type_(shape.type),
      n_layer_(shape.n_layer),
      first_layer_(shape.first_layer),
      n_ctx_(shape.n_ctx),
      kv_dim_(shape.kv_dim),
      ring_rows_(shape.ring_rows),
      window_(shape.window),
      ring_(static_cast<std::size_t>(shape.n_layer), 0),
      layer_offset_(static_cast<std::size_t>(shape.n_layer)) {
  // A ring no shorter than the context is no ring, nor is one that no layer keeps (a pipeline
  // stage of global layers only).
  const bool any_ring =
      std::find(shape.ring_layers.begin(), shape.ring_layers.end(), 1) != shape.ring_layers.end();
  if (any_ring && ring_rows_ > 0 && ring_rows_ < n_ctx_) {
    GROVE_CHECK(shape.ring_layers.size() == ring_.size() && window_ > 0 && window_ < ring_rows_);
    ring_ = shape.ring_layers;
  } else {
    ring_rows_ = 0;
  }
  std::size_t n = 0;
  for (std::size_t l = 0; l < ring_.size(); ++l) {
    layer_offset_[l] = n;
    n += static_cast<std::size_t>(ring_[l] ? ring_rows_ : n_ctx_) * kv_dim_;
  }
  elements_ = n;
  if (shape.on_device) {
    if (ring_rows_ > 0) Fail("kv cache: sliding-window rings are not on the GPU");
    if (type_ != KvCacheType::kF32) {
      Fail("kv cache: the GPU keeps an f32 cache, not ", KvCacheTypeName(type_),
           " (--cache-type f32)");
    }
    device_k_ = cuda::DeviceBuffer(n * sizeof(float));
    device_v_ = cuda::DeviceBuffer(n * sizeof(float));
    device_moves_ = cuda::DeviceBuffer(2 * sizeof(int32_t) * static_cast<std::size_t>(n_ctx_));
  } else if (type_ == KvCacheType::kF16) {
    k16_.Resize(n);
    v16_.Resize(n);
  } else {
    k_.Resize(n);
    v_.Resize(n);
  }
  positions_.Resize(n_ctx_);
  parents_.Resize(n_ctx_);
  tokens_.Resize(n_ctx_);
  // Not touched here: a page is faulted in by the first write to a row on it, a few microseconds
  // per token, while zeroing the whole cache at load cost every run the time of a full context
  // (a 16-token run of the bundled target spent a tenth of its time on it; issue 30).
}

int32_t KvCache::valid_from() const {
  return ring_rows_ > 0 ? std::max(0, written_end_ - ring_rows_) : 0;
}

int32_t KvCache::ReusablePrefix(int32_t n) const {
  // A token after slot n - 1 sees the window's slots [n - window, n).
  return std::max(0, n - window_) >= valid_from() || n == 0 ? n : 0;
}

int32_t KvCache::MatchingPrefix(std::span<const int32_t> tokens) const {
  const int32_t n = std::min(chain_length_, static_cast<int32_t>(tokens.size()));
  int32_t i = 0;
  while (i < n && tokens_[i] == tokens[static_cast<std::size_t>(i)] && positions_[i] == i) ++i;
  return ReusablePrefix(i);
}

uint64_t KvCache::bytes_for(int32_t n) const {
  uint64_t rows = 0;
  for (uint8_t ring : ring_) rows += static_cast<uint64_t>(ring ? std::min(n, ring_rows_) : n);
  return 2ull * element_bytes() * rows * kv_dim_;
}

const std::byte* KvCache::KeyBytes(int32_t layer, int32_t slot) const {
  return type_ == KvCacheType::kF16 ? reinterpret_cast<const std::byte*>(key_f16(layer, slot))
                                    : reinterpret_cast<const std::byte*>(key(layer, slot));
}

const std::byte* KvCache::ValueBytes(int32_t layer, int32_t slot) const {
  return type_ == KvCacheType::kF16 ? reinterpret_cast<const std::byte*>(value_f16(layer, slot))
                                    : reinterpret_cast<const std::byte*>(value(layer, slot));
}

void KvCache::Truncate(int32_t n) {
  if (n < 0 || n > length_) Fail("kv cache: cannot truncate ", length_, " slots to ", n);
  length_ = n;
  chain_length_ = std::min(chain_length_, n);
  if (n == 0) written_end_ = 0;
}

void KvCache::CopyPrefix(const KvCache& other, int32_t n) {
  if (other.n_layer_ != n_layer_ || other.first_layer_ != first_layer_ || other.n_ctx_ != n_ctx_ ||
      other.kv_dim_ != kv_dim_ || other.ring_ != ring_ || other.ring_rows_ != ring_rows_ ||
      other.type_ != type_) {
    Fail("kv cache: cannot copy between caches of different shapes");
  }
  if (n < 0 || n > other.chain_length_) {
    Fail("kv cache: cannot copy ", n, " slots of a cache whose chain holds ", other.chain_length_);
  }
  if (other.ReusablePrefix(n) != n) {
    Fail("kv cache: cannot copy ", n, " slots: the window rows before slot ", n,
         " were overwritten in the source's ring");
  }
  if (on_device() != other.on_device()) Fail("kv cache: cannot copy between the GPU and the host");
  if (on_device()) {
    const std::size_t layer_floats = static_cast<std::size_t>(n_ctx_) * kv_dim_;
    const std::size_t bytes = sizeof(float) * static_cast<std::size_t>(n) * kv_dim_;
    for (int32_t l = 0; l < n_layer_; ++l) {
      cuda::CopyOnDevice(device_keys() + l * layer_floats, other.device_keys() + l * layer_floats,
                         bytes);
      cuda::CopyOnDevice(device_values() + l * layer_floats,
                         other.device_values() + l * layer_floats, bytes);
    }
  }
  // Rings hold the last ring_rows slots in place (slot s in row s % ring_rows): the same rows.
  for (int32_t layer = first_layer_; !on_device() && layer < first_layer_ + n_layer_; ++layer) {
    const int32_t rows = ring_rows(layer) > 0 ? std::min(n, ring_rows_) : n;
    for (int32_t s = n - rows; s < n;) {
      const int32_t run =
          ring_rows(layer) > 0 ? std::min(n - s, ring_rows_ - s % ring_rows_) : n - s;
      const std::size_t bytes = element_bytes() * static_cast<std::size_t>(run) * kv_dim_;
      std::memcpy(KeyBytes(layer, s), other.KeyBytes(layer, s), bytes);
      std::memcpy(ValueBytes(layer, s), other.ValueBytes(layer, s), bytes);
      s += run;
    }
  }
  std::memcpy(positions_.data(), other.positions_.data(), sizeof(int32_t) * n);
  std::memcpy(parents_.data(), other.parents_.data(), sizeof(int32_t) * n);
  std::memcpy(tokens_.data(), other.tokens_.data(), sizeof(int32_t) * n);
  length_ = n;
  chain_length_ = n;
  // The copied rows are the source's: those it had overwritten are stale here too.
  written_end_ = std::max(n, other.written_end_);
}

void KvCache::SetSlot(int32_t slot, int32_t position, int32_t parent_slot, int32_t token) {
  positions_[slot] = position;
  tokens_[slot] = token;
  parents_[slot] = parent_slot;
  if (slot == chain_length_ && parent_slot == slot - 1) ++chain_length_;
}

void KvCache::Append(int32_t n) {
  GROVE_CHECK(n >= 0 && length_ + n <= n_ctx_, "kv cache overflow");
  length_ += n;
  written_end_ = std::max(written_end_, length_);
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
  if (on_device()) {
    pending_moves_.push_back(src);
    pending_moves_.push_back(dst);
    positions_[dst] = positions_[src];
    tokens_[dst] = tokens_[src];
    return;
  }
  const std::size_t row_bytes = element_bytes() * kv_dim_;
  for (int32_t layer = first_layer_; layer < first_layer_ + n_layer_; ++layer) {
    std::memcpy(KeyBytes(layer, dst), KeyBytes(layer, src), row_bytes);
    std::memcpy(ValueBytes(layer, dst), ValueBytes(layer, src), row_bytes);
  }
  positions_[dst] = positions_[src];
  tokens_[dst] = tokens_[src];
}

void KvCache::FlushMoves() {
  if (pending_moves_.empty()) return;
  const auto n_pairs = static_cast<int32_t>(pending_moves_.size() / 2);
  cuda::CopyToDevice(device_moves_.data(), pending_moves_.data(),
                     pending_moves_.size() * sizeof(int32_t));
  cuda::MoveKvRows(device_keys(), device_values(), device_moves_.as<int32_t>(), n_pairs, n_layer_,
                   static_cast<int64_t>(n_ctx_) * kv_dim_, kv_dim_);
  // No wait here: a copy from pageable memory returns once CUDA has staged it, so the vector may
  // change, and the moves run before the next forward on the same stream.
  pending_moves_.clear();
}

void KvCache::Compact(int32_t prefix, std::span<const int32_t> kept_slots) {
  CheckKept(prefix, kept_slots);
  int32_t dst = prefix;
  for (int32_t src : kept_slots) {
    MoveSlot(src, dst);
    parents_[dst] = dst - 1;
    ++dst;
  }
  FlushMoves();
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
  FlushMoves();
  length_ = dst;
  chain_length_ = std::min(chain_length_, prefix);
  while (chain_length_ < length_ && parents_[chain_length_] == chain_length_ - 1) ++chain_length_;
}

}  // namespace grove
