#include "speculate/suffix_index.h"

#include <algorithm>
#include <bit>

#include "base/error.h"

namespace grove {

SuffixIndex::SuffixIndex(int32_t max_depth) : max_depth_(max_depth) {
  if (max_depth < 2 || max_depth > 256) Fail("suffix index: depth ", max_depth, " not in 2..256");
  Clear();
}

void SuffixIndex::Clear() {
  nodes_.assign(1, Node{});
  free_.clear();
  std::fill(slots_.begin(), slots_.end(), Slot{});
  if (slots_.empty()) slots_.resize(64);
  live_ = 1;
}

void SuffixIndex::Reserve(std::size_t nodes) {
  nodes_.reserve(nodes);
  free_.reserve(nodes);
  if (slots_.size() < 2 * nodes) GrowTable(std::bit_ceil(2 * nodes));
}

std::size_t SuffixIndex::Home(uint64_t key) const {
  // Fibonacci hashing: the high bits of the product, as many as the table has.
  const int shift = 64 - std::countr_zero(slots_.size());
  return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> shift);
}

int32_t SuffixIndex::Find(int32_t parent, int32_t token) const {
  const uint64_t key = Key(parent, token);
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = Home(key);; i = (i + 1) & mask) {
    if (slots_[i].node < 0) return -1;
    if (slots_[i].key == key) return slots_[i].node;
  }
}

void SuffixIndex::GrowTable(std::size_t slots) {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(slots, Slot{});
  const std::size_t mask = slots_.size() - 1;
  for (const Slot& s : old) {
    if (s.node < 0) continue;
    std::size_t i = Home(s.key);
    while (slots_[i].node >= 0) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

int32_t SuffixIndex::FindOrCreate(int32_t parent, int32_t token) {
  if (const int32_t found = Find(parent, token); found >= 0) return found;
  if (static_cast<std::size_t>(live_ + 1) * 2 > slots_.size()) GrowTable(slots_.size() * 2);
  int32_t node;
  if (!free_.empty()) {
    node = free_.back();
    free_.pop_back();
  } else {
    node = static_cast<int32_t>(nodes_.size());
    nodes_.emplace_back();
  }
  Node& n = nodes_[node];
  Node& p = nodes_[parent];
  n = Node{.token = token, .count = 0, .parent = parent, .next_sibling = p.first_child};
  if (p.first_child >= 0) nodes_[p.first_child].prev_sibling = node;
  p.first_child = node;
  const uint64_t key = Key(parent, token);
  const std::size_t mask = slots_.size() - 1;
  std::size_t i = Home(key);
  while (slots_[i].node >= 0) i = (i + 1) & mask;
  slots_[i] = Slot{key, node};
  ++live_;
  return node;
}

void SuffixIndex::EraseSlot(uint64_t key) {
  const std::size_t mask = slots_.size() - 1;
  std::size_t hole = Home(key);
  while (slots_[hole].key != key || slots_[hole].node < 0) hole = (hole + 1) & mask;
  // Backward-shift deletion: move later entries of the probe run into the hole when their home
  // does not lie cyclically between the hole and them.
  for (std::size_t j = (hole + 1) & mask; slots_[j].node >= 0; j = (j + 1) & mask) {
    const std::size_t home = Home(slots_[j].key);
    const bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (stays) continue;
    slots_[hole] = slots_[j];
    hole = j;
  }
  slots_[hole] = Slot{};
}

template <class Step>
void SuffixIndex::Extend(Cursor& cursor, int32_t token, Step&& step) {
  std::vector<int32_t>& suffixes = cursor.suffixes_;
  if (suffixes.empty()) suffixes.push_back(kRoot);
  // Every substring that ends with `token` is a held suffix (0 .. max_depth - 1 tokens) and it.
  // Longest first, so that suffixes[n] is read before the (n + 1)-token suffix overwrites it.
  const std::size_t held = suffixes.size();
  const std::size_t kept = std::min<std::size_t>(held + 1, max_depth_);
  suffixes.resize(kept);
  for (std::size_t n = held; n-- > 0;) {
    const int32_t child = step(suffixes[n], token);
    if (n + 1 < kept) suffixes[n + 1] = child;
  }
}

void SuffixIndex::Append(Cursor& cursor, int32_t token) {
  ++nodes_[kRoot].count;
  Extend(cursor, token, [this](int32_t parent, int32_t t) {
    const int32_t child = FindOrCreate(parent, t);
    ++nodes_[child].count;
    return child;
  });
}

void SuffixIndex::Add(std::span<const int32_t> document) {
  scratch_.Clear();
  for (int32_t token : document) Append(scratch_, token);
}

void SuffixIndex::Free(int32_t node) {
  const Node& n = nodes_[node];
  if (n.prev_sibling >= 0) {
    nodes_[n.prev_sibling].next_sibling = n.next_sibling;
  } else {
    nodes_[n.parent].first_child = n.next_sibling;
  }
  if (n.next_sibling >= 0) nodes_[n.next_sibling].prev_sibling = n.prev_sibling;
  EraseSlot(Key(n.parent, n.token));
  free_.push_back(node);
  --live_;
}

void SuffixIndex::Release(int32_t node) {
  if (--nodes_[node].count > 0) return;
  // A node with no occurrence left goes once it has no child either; so does each ancestor then
  // left in that state (its own occurrences were released when its text ended, earlier in the
  // document, but a later position still extended it).
  while (node != kRoot && nodes_[node].count == 0 && nodes_[node].first_child < 0) {
    const int32_t parent = nodes_[node].parent;
    Free(node);
    node = parent;
  }
}

void SuffixIndex::Remove(std::span<const int32_t> document) {
  scratch_.Clear();
  for (int32_t token : document) {
    --nodes_[kRoot].count;
    // A node read here is alive: the next position's longer substring is its child until then.
    Extend(scratch_, token, [this](int32_t parent, int32_t t) {
      const int32_t child = Find(parent, t);
      if (child < 0) Fail("suffix index: removing a document that was not added");
      Release(child);
      return child;
    });
  }
}

SuffixIndex::Match SuffixIndex::LongestMatch(std::span<const int32_t> text) const {
  const std::size_t longest = std::min<std::size_t>(text.size(), max_depth_ - 1);
  for (std::size_t length = longest; length >= 1; --length) {
    int32_t node = kRoot;
    for (std::size_t i = text.size() - length; i < text.size() && node >= 0; ++i)
      node = Find(node, text[i]);
    if (node >= 0 && nodes_[node].first_child >= 0) return {node, static_cast<int32_t>(length)};
  }
  return {};
}

}  // namespace grove
