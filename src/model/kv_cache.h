// Per-sequence key/value cache (contract 3): preallocated for the whole context at load,
// positional, and edited in place. A verified tree leaves its accepted path scattered among
// rejected nodes; Compact moves just those slots down, so its cost is O(kept), and nothing is ever
// reallocated.
//
// Each slot records its parent slot, so a cache can hold a speculative tree next to the committed
// text: a draft model that expands a tree one level per forward pass keeps earlier levels here, and
// a token continuing from slot s sees s and its ancestors only, not the siblings drafted beside
// them. Slots [0, chain_length()) form a plain chain (slot i's parent is i - 1): the committed
// text, and whatever extends it linearly. A token whose ancestry reaches slot s < chain_length()
// sees all of [0, s], so ordinary decoding never walks parent links.
//
// Sliding-window layers keep a ring (KvCacheShape::ring_rows): slot s lives in row s % ring_rows,
// so a long context on Gemma 3 pays the whole context's keys only on its global layers. The ring is
// long enough for the window, a batch and the speculative slots of a tree (model.cc checks each
// batch against it); a cache rewound further back than that (Truncate after a long generation)
// has lost the window rows it would need, which valid_from() tells (ReusablePrefix).
//
// Keys and values are kept as floats or, halving the cache's memory and what attention reads, as
// IEEE half floats (KvCacheType::kF16, llama.cpp's default cache type): rounded to nearest once
// when written, widened when read (the attention kernels, kernel_set.h).
//
// Each slot also records the token it holds, so a new prompt can find how much of it a cache
// already holds (MatchingPrefix): a conversation's next turn, or a request after an earlier one,
// then computes only the rest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "base/aligned_buffer.h"
#include "base/error.h"
#include "cuda/device.h"

namespace grove {

enum class KvCacheType : uint8_t { kF32, kF16 };

// "f32", "f16": the names --cache-type takes.
const char* KvCacheTypeName(KvCacheType type);
// Throws grove::Error naming the accepted names.
KvCacheType ParseKvCacheType(std::string_view name);

struct KvCacheShape {
  int32_t n_layer = 0;  // layers [first_layer, first_layer + n_layer)
  int32_t n_ctx = 0;
  int32_t kv_dim = 0;
  int32_t first_layer = 0;
  // (n_layer) 1 where the layer keeps a ring of ring_rows rows instead of n_ctx (empty: none).
  std::vector<uint8_t> ring_layers;
  int32_t ring_rows = 0;
  int32_t window = 0;  // the keys a ring layer's query sees (ReusablePrefix)
  // Keys and values on the CUDA device (model/cuda_forward.h): key() and value() are then not
  // readable on the host, and the slots' moves and copies run on the GPU. No rings; floats only.
  bool on_device = false;
  KvCacheType type = KvCacheType::kF32;
};

class KvCache {
 public:
  // Keys and values of layers [first_layer, first_layer + n_layer) (a pipeline stage holds only
  // its own layers).
  KvCache(int32_t n_layer, int32_t n_ctx, int32_t kv_dim, int32_t first_layer = 0);
  explicit KvCache(const KvCacheShape& shape);

  int32_t n_ctx() const { return n_ctx_; }
  int32_t kv_dim() const { return kv_dim_; }
  // Slots in use: [0, length()).
  int32_t length() const { return length_; }
  // Position (for RoPE) of the token held in a slot.
  int32_t position(int32_t slot) const { return positions_[slot]; }
  // Parent slot of a slot (-1 for slot 0).
  int32_t parent(int32_t slot) const { return parents_[slot]; }
  // Token held in a slot (the batch's token id when it was written).
  int32_t token(int32_t slot) const { return tokens_[slot]; }
  // Slots [0, chain_length()) form a chain (see the file comment).
  int32_t chain_length() const { return chain_length_; }

  KvCacheType type() const { return type_; }
  // Bytes of one key or value element: 4 (f32) or 2 (f16).
  std::size_t element_bytes() const { return type_ == KvCacheType::kF16 ? 2 : 4; }
  // Row of keys / values of one slot in one layer: (kv_dim) floats of an f32 cache (host only)...
  float* key(int32_t layer, int32_t slot) { return Row(k_, layer, slot); }
  float* value(int32_t layer, int32_t slot) { return Row(v_, layer, slot); }
  const float* key(int32_t layer, int32_t slot) const { return Row(k_, layer, slot); }
  const float* value(int32_t layer, int32_t slot) const { return Row(v_, layer, slot); }
  // ... or (kv_dim) half floats of an f16 cache.
  uint16_t* key_f16(int32_t layer, int32_t slot) { return Row(k16_, layer, slot); }
  uint16_t* value_f16(int32_t layer, int32_t slot) { return Row(v16_, layer, slot); }
  const uint16_t* key_f16(int32_t layer, int32_t slot) const { return Row(k16_, layer, slot); }
  const uint16_t* value_f16(int32_t layer, int32_t slot) const { return Row(v16_, layer, slot); }
  // A cache on the CUDA device: its keys and values, (n_layer, n_ctx, kv_dim) floats each.
  bool on_device() const { return device_k_.data() != nullptr; }
  float* device_keys() const { return device_k_.as<float>(); }
  float* device_values() const { return device_v_.as<float>(); }
  // Rows a layer keeps when it is a ring (slot s in row s % ring_rows(layer)), 0 when it keeps
  // every slot of the context.
  int32_t ring_rows(int32_t layer) const {
    return ring_[static_cast<std::size_t>(layer - first_layer_)] ? ring_rows_ : 0;
  }
  // The rows of every ring layer (0 when the cache has none).
  int32_t ring_rows() const { return ring_rows_; }
  // The first slot whose ring rows are still held (0 without rings): later slots overwrote the
  // rows of earlier ones.
  int32_t valid_from() const;
  // The longest prefix of at most n slots that a new token can continue from: n, unless the ring
  // rows its window needs were overwritten (then 0: the prefix must be computed again).
  int32_t ReusablePrefix(int32_t n) const;
  // The longest prefix of `tokens` that slots [0, chain_length()) hold, slot i token tokens[i] at
  // position i (what a chain of those tokens from position 0 would have written), cut to what a
  // new token can continue from (ReusablePrefix). A slot a speculative tree left in the chain
  // holds the same keys as a committed token would: its keys depend on its token, position and
  // ancestors only.
  int32_t MatchingPrefix(std::span<const int32_t> tokens) const;

  // Drops every slot from n on.
  void Truncate(int32_t n);
  // Keeps slots [0, prefix) and then the given slots (strictly increasing, each >= prefix), moved
  // down to prefix, prefix + 1, ... Used after tree verification to keep the accepted path: the
  // kept slots become a chain continuing slot prefix - 1.
  void Compact(int32_t prefix, std::span<const int32_t> kept_slots);
  // As Compact, but the kept slots keep their tree: each one's parent must lie before prefix or be
  // an earlier kept slot, and is renumbered with it. Used by a pipeline stage to keep the subtree
  // of the hit node (pipe/).
  void KeepSubtree(int32_t prefix, std::span<const int32_t> kept_slots);
  void Clear() { Truncate(0); }
  // Replaces this cache's contents with the first n slots of `other` (same shape; n at most its
  // chain_length(): committed text). Used to fork a sequence (kv_cache_pool.h).
  void CopyPrefix(const KvCache& other, int32_t n);
  // Bytes of keys and values held for the whole context.
  uint64_t bytes() const {
    return on_device() ? 2ull * device_k_.bytes() : 2ull * element_bytes() * elements_;
  }
  // Bytes of keys and values that a context of n tokens occupies (rings hold at most their rows).
  uint64_t bytes_for(int32_t n) const;

  // Used by the forward pass: claims slots [length, length + n), then records each new slot's
  // position and parent (in slot order, which extends the chain when the parent is the previous
  // slot).
  void Append(int32_t n);
  void SetSlot(int32_t slot, int32_t position, int32_t parent_slot, int32_t token);

 private:
  // Checks Compact's and KeepSubtree's arguments.
  void CheckKept(int32_t prefix, std::span<const int32_t> kept_slots) const;
  // Moves slot src's keys, values, position and token to dst (on a device cache: queued,
  // FlushMoves).
  void MoveSlot(int32_t src, int32_t dst);
  // Runs the moves a device cache queued, in order, in one kernel.
  void FlushMoves();
  std::size_t Offset(int32_t layer, int32_t slot) const {
    const std::size_t l = static_cast<std::size_t>(layer - first_layer_);
    const int32_t row = ring_[l] ? slot % ring_rows_ : slot;
    return layer_offset_[l] + static_cast<std::size_t>(row) * kv_dim_;
  }
  // A row of k_ / v_ (float) or k16_ / v16_ (half), checked against the cache's type.
  template <typename T>
  T* Row(AlignedBuffer<T>& b, int32_t layer, int32_t slot) const {
    GROVE_CHECK(element_bytes() == sizeof(T), "kv cache: rows read as another type than its own");
    return b.data() + Offset(layer, slot);
  }
  template <typename T>
  const T* Row(const AlignedBuffer<T>& b, int32_t layer, int32_t slot) const {
    GROVE_CHECK(element_bytes() == sizeof(T), "kv cache: rows read as another type than its own");
    return b.data() + Offset(layer, slot);
  }
  // A row's bytes, whatever the type (moves and copies).
  const std::byte* KeyBytes(int32_t layer, int32_t slot) const;
  const std::byte* ValueBytes(int32_t layer, int32_t slot) const;
  std::byte* KeyBytes(int32_t layer, int32_t slot) {
    return const_cast<std::byte*>(std::as_const(*this).KeyBytes(layer, slot));
  }
  std::byte* ValueBytes(int32_t layer, int32_t slot) {
    return const_cast<std::byte*>(std::as_const(*this).ValueBytes(layer, slot));
  }

  KvCacheType type_;
  int32_t n_layer_;
  int32_t first_layer_;
  int32_t n_ctx_;
  int32_t kv_dim_;
  int32_t ring_rows_ = 0;
  int32_t window_ = 0;
  int32_t length_ = 0;
  int32_t chain_length_ = 0;
  int32_t written_end_ = 0;    // one past the highest slot written since the cache was cleared
  std::vector<uint8_t> ring_;  // (n_layer) 1 where the layer is a ring
  std::vector<std::size_t> layer_offset_;  // (n_layer) first float of each layer's rows
  std::size_t elements_ = 0;               // of keys (and of values) for the whole context
  AlignedBuffer<float> k_;                 // each layer's rows (n_ctx, or ring_rows), kv_dim each
  AlignedBuffer<float> v_;                 // likewise
  AlignedBuffer<uint16_t> k16_;            // an f16 cache's, laid out as k_ and v_
  AlignedBuffer<uint16_t> v16_;
  AlignedBuffer<int32_t> positions_;  // (n_ctx)
  AlignedBuffer<int32_t> parents_;    // (n_ctx)
  AlignedBuffer<int32_t> tokens_;     // (n_ctx)
  cuda::DeviceBuffer device_k_;       // on_device: every layer's rows, n_ctx each
  cuda::DeviceBuffer device_v_;
  cuda::DeviceBuffer device_moves_;     // (n_ctx) (src, dst) pairs of FlushMoves
  std::vector<int32_t> pending_moves_;  // (src, dst) pairs queued by MoveSlot
};

}  // namespace grove
