// A draft model (any GGUF with the target's vocabulary) as a drafter. Each tree level is one
// batched draft forward; earlier levels stay in the draft KV cache as speculative slots
// (model/kv_cache.h), and after verification the accepted path is compacted in place, so the draft
// never recomputes a token it has already seen.
#pragma once

#include <vector>

#include "model/model.h"
#include "speculate/drafter.h"

namespace grove {

class ModelDrafter : public Drafter {
 public:
  // Drafts into sequence `seq` of the draft model's caches. Throws grove::Error if the
  // vocabularies of draft and target differ.
  ModelDrafter(Model& draft, const Model& target, int32_t seq = 0);

  std::string_view name() const override { return "draft-model"; }
  int32_t n_vocab() const override { return draft_.config().n_vocab; }
  bool deterministic() const override { return false; }
  void Begin(std::span<const int32_t> context) override;
  std::span<const float> Expand(const TokenTree& tree, std::span<const int32_t> frontier) override;
  void Commit(const TokenTree& tree, std::span<const int32_t> accepted,
              int32_t next_token) override;
  bool HasRoomFor(int32_t fed_nodes) const override;
  void Reserve(int32_t max_frontier, int32_t max_tree_nodes) override;

 private:
  // Puts the committed tokens the draft has not seen, all but the root, into its cache.
  void FeedPendingBeforeRoot();

  Model& draft_;
  int32_t seq_;
  Batch batch_;
  std::vector<int32_t> pending_;  // committed tokens not yet in the draft cache (last: the root)
  int32_t root_position_ = 0;     // position of the root token
  int32_t root_slot_ = -1;        // the root's draft cache slot, once the first level ran
  std::vector<int32_t> slot_of_node_;  // tree node -> draft cache slot, or -1 if never fed
  std::vector<int32_t> kept_slots_;
};

// Throws grove::Error naming the first difference if two models cannot share token ids: vocabulary
// size, and (when both files carry one) the token texts.
void CheckSameVocabulary(const Model& draft, const Model& target);

}  // namespace grove
