// The one input shape of Model::Forward (contract 1): prefill, decode, tree verification and
// multi-sequence verification are all a Batch.
//
// Token i belongs to sequence seq_ids[i] (one KV cache each) and sits at RoPE position
// positions[i]. It sees itself and the chain of earlier batch tokens reached by following
// parents[i]. The first token of that chain (parent -1) continues a slot of the sequence's cache:
// cache_parents[i], or by default (kContinueCache) the cache's last slot, and the token sees that
// slot and its ancestors (see kv_cache.h). A causal chain is parents[i] = i - 1; a token tree is
// any parent array in BFS order; a draft model expanding a tree one level per call points the new
// level at the cache slots of the previous level; two sequences may share one batch. Only rows with
// logits[i] set produce logits.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace grove {

// The most tokens one Forward may hold (ModelOptions::max_batch at most).
inline constexpr int32_t kMaxForwardTokens = 8192;

struct Batch {
  // cache_parents value: continue from the last slot of the cache as it was before this batch.
  static constexpr int32_t kContinueCache = -2;

  std::vector<int32_t> tokens;
  std::vector<int32_t> positions;
  std::vector<int32_t> seq_ids;
  std::vector<int32_t> parents;
  std::vector<int32_t> cache_parents;  // used only where parents[i] == -1
  std::vector<uint8_t> logits;

  int32_t size() const { return static_cast<int32_t>(tokens.size()); }
  // Keeps capacity, so a batch reused across steps stops allocating after the first.
  void Clear() {
    tokens.clear();
    positions.clear();
    seq_ids.clear();
    parents.clear();
    cache_parents.clear();
    logits.clear();
  }
  void Add(int32_t token, int32_t position, int32_t seq, int32_t parent, bool want_logits,
           int32_t cache_parent = kContinueCache) {
    tokens.push_back(token);
    positions.push_back(position);
    seq_ids.push_back(seq);
    parents.push_back(parent);
    cache_parents.push_back(cache_parent);
    logits.push_back(want_logits ? 1 : 0);
  }
  // Appends a causal chain continuing sequence `seq` at first_position; logits for the last token
  // only, or for every token.
  void AddChain(std::span<const int32_t> chain, int32_t first_position, int32_t seq,
                bool all_logits = false) {
    for (std::size_t i = 0; i < chain.size(); ++i) {
      int32_t parent = i == 0 ? -1 : size() - 1;
      Add(chain[i], first_position + static_cast<int32_t>(i), seq, parent,
          all_logits || i + 1 == chain.size());
    }
  }
};

}  // namespace grove
