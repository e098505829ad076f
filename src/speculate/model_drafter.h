// A draft model (any GGUF with the target's vocabulary, up to padding) as a drafter. Each tree
// level is one
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
  // vocabularies of draft and target cannot share token ids (CheckPairVocabulary).
  ModelDrafter(Model& draft, const Model& target, int32_t seq = 0);

  std::string_view name() const override { return "draft-model"; }
  // The target's: rows the draft returns are padded (or cut) to it.
  int32_t n_vocab() const override { return n_vocab_; }
  bool deterministic() const override { return false; }
  void ReuseCache(bool reuse) override { reuse_cache_ = reuse; }
  void Begin(std::span<const int32_t> context) override;
  std::span<const float> Expand(const TokenTree& tree, std::span<const int32_t> frontier) override;
  void Commit(const TokenTree& tree, std::span<const int32_t> accepted,
              int32_t next_token) override;
  bool HasRoomFor(int32_t fed_nodes) const override;
  void Reserve(int32_t max_frontier, int32_t max_tree_nodes) override;

 private:
  // Puts the committed tokens the draft has not seen, all but the root, into its cache.
  void FeedPendingBeforeRoot();
  // The token the draft is fed for a committed one (the same, unless the draft lacks it).
  int32_t DraftToken(int32_t token) const;
  // The draft's logits rows in the target's width (the draft's own span when they agree).
  std::span<const float> PadRows(std::span<const float> logits);

  Model& draft_;
  int32_t seq_;
  int32_t n_vocab_;                 // the target's
  std::vector<float> padded_rows_;  // the draft's rows in the target's width, when they differ
  Batch batch_;
  std::vector<int32_t> pending_;  // committed tokens not yet in the draft cache (last: the root)
  bool reuse_cache_ = false;      // ReuseCache
  int32_t root_position_ = 0;     // position of the root token
  int32_t root_slot_ = -1;        // the root's draft cache slot, once the first level ran
  std::vector<int32_t> slot_of_node_;  // tree node -> draft cache slot, or -1 if never fed
  std::vector<int32_t> kept_slots_;
};

// Throws grove::Error unless the draft's vocabulary has as many tokens as the target's: where token
// ids pass between the two unmapped (the pipeline's draft and stages), no padding is allowed.
void CheckSameVocabularySize(const ModelConfig& draft, const ModelConfig& target);
// The same, and (when both files carry them) the same token texts: two models that share token
// ids. Names the first difference.
void CheckSameVocabulary(const ModelParameters& draft, const ModelParameters& target);

// Most tokens by which a draft's vocabulary may differ from its target's (llama.cpp's limit too):
// real pairs differ by the padding of their embedding matrices (Qwen2.5-0.5B has 151,936 rows,
// Qwen2.5-7B 152,064), never by real tokens.
inline constexpr int32_t kMaxPairVocabDifference = 128;

// Throws grove::Error naming the first difference unless a draft can propose tokens to a target:
// sizes within kMaxPairVocabDifference, the same texts for every token both have (when both files
// carry them), and the same BOS and EOS.
void CheckPairVocabulary(const ModelParameters& draft, const ModelParameters& target);

}  // namespace grove
