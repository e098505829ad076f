// A suffix trie of bounded depth with occurrence counts, the index SuffixDecoding (Oliaro et al.,
// NeurIPS 2025) drafts from: every substring of at most max_depth tokens of the documents it holds
// is a node, counted once per occurrence, so the children of the node of a text s count how often
// each token followed s. Documents grow token by token (a sequence being decoded) or are added
// whole (an output the engine produced), and can be removed again (eviction).
//
// Choice: a depth-bounded trie rather than SuffixDecoding's suffix tree. It is updated in
// O(max_depth) per appended token, counts are exact per node without a pass over suffix links (a
// suffix automaton would need one after every change), and removing a document is the same walk
// with decrements. The cost is memory: up to max_depth nodes per token of novel text (about 40
// bytes each), which SuffixStore bounds by evicting whole documents.
//
// Nodes live in one array and the (parent, token) -> child map is an open-addressing table, so
// nothing is allocated once Reserve has grown both.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace grove {

class SuffixIndex {
 public:
  static constexpr int32_t kRoot = 0;

  // max_depth: the longest substring counted (>= 2), so matches are at most max_depth - 1 tokens
  // long and still have a next token.
  explicit SuffixIndex(int32_t max_depth);

  // Where a growing document ends: the nodes of its last 0 .. max_depth - 1 tokens.
  class Cursor {
   public:
    void Clear() { suffixes_.clear(); }

   private:
    friend class SuffixIndex;
    std::vector<int32_t> suffixes_;  // suffixes_[n]: the node of the last n tokens
  };

  // Appends `token` to the document `cursor` ends: counts every substring that ends with it.
  void Append(Cursor& cursor, int32_t token);
  // Adds a whole document.
  void Add(std::span<const int32_t> document);
  // Removes a document added before (its counts are taken back; nodes left with none are freed).
  void Remove(std::span<const int32_t> document);
  // Forgets every document.
  void Clear();
  // Grows the node array and the table to hold `nodes` nodes without allocating.
  void Reserve(std::size_t nodes);

  // The node of the longest suffix of `text` (1 .. max_depth - 1 tokens) that some token followed
  // in the documents, and that suffix's length; {-1, 0} when none did.
  struct Match {
    int32_t node = -1;
    int32_t length = 0;
  };
  Match LongestMatch(std::span<const int32_t> text) const;

  // Calls f(token, count) for each token that followed the text of `node`, with how often it did.
  template <class F>
  void ForEachNext(int32_t node, F&& f) const {
    for (int32_t c = nodes_[node].first_child; c >= 0; c = nodes_[c].next_sibling)
      f(nodes_[c].token, nodes_[c].count);
  }
  // How often the text of `node` occurs (the root: the number of tokens held).
  int64_t count(int32_t node) const { return nodes_[node].count; }

  int32_t max_depth() const { return max_depth_; }
  // Live nodes, the root included.
  int64_t live_nodes() const { return live_; }
  // What a live node costs: its entry and its share of the table (kept at most half full).
  static constexpr std::size_t kBytesPerNode = 64;

 private:
  struct Node {
    int32_t token = -1;
    int32_t count = 0;
    int32_t parent = -1;
    int32_t first_child = -1;
    int32_t next_sibling = -1;
    int32_t prev_sibling = -1;
  };
  struct Slot {
    uint64_t key = 0;
    int32_t node = -1;  // -1: empty
  };

  static uint64_t Key(int32_t parent, int32_t token) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(parent)) << 32) |
           static_cast<uint32_t>(token);
  }
  std::size_t Home(uint64_t key) const;
  int32_t Find(int32_t parent, int32_t token) const;
  int32_t FindOrCreate(int32_t parent, int32_t token);
  void EraseSlot(uint64_t key);
  void GrowTable(std::size_t slots);
  // Moves the cursor past `token`: step(parent, token) gives the node of each substring that ends
  // with it, longest first.
  template <class Step>
  void Extend(Cursor& cursor, int32_t token, Step&& step);
  // Drops one occurrence of `node`'s text; frees it, and then its ancestors, while one is left
  // with no occurrence and no child.
  void Release(int32_t node);
  void Free(int32_t node);

  int32_t max_depth_;
  std::vector<Node> nodes_;
  std::vector<int32_t> free_;  // freed node indices
  std::vector<Slot> slots_;    // power-of-two size, linear probing
  int64_t live_ = 1;
  Cursor scratch_;  // Add's and Remove's cursor
};

}  // namespace grove
