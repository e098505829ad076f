// A draft model (any GGUF with the target's vocabulary) as a drafter. Each tree level is one batched
// draft forward; earlier levels stay in the draft KV cache as speculative slots (model/kv_cache.h),
// and after verification the accepted path is compacted in place, so the draft never recomputes a
// token it has already seen.
#pragma once

#include <memory>
#include <vector>

#include "model/model.h"
#include "sample/sampler.h"
#include "speculate/drafter.h"

namespace grove {

class ModelDrafter : public Drafter {
 public:
  // `sampling` shapes the draft distributions exactly as plain sampling would (temperature, top-k,
  // ...), except at temperature 0, where the rows are the draft's plain softmax (the ranking of
  // candidates; greedy verification does not read them). Throws grove::Error if the vocabularies of
  // draft and target differ.
  ModelDrafter(Model& draft, const Model& target, const SamplerParams& sampling);

  std::string_view name() const override { return "draft-model"; }
  int32_t n_vocab() const override { return draft_.config().n_vocab; }
  bool deterministic() const override { return false; }
  void Begin(std::span<const int32_t> context) override;
  void Expand(const TokenTree& tree, std::span<const int32_t> frontier, std::span<float> rows) override;
  void Commit(std::span<const int32_t> accepted_tokens, int32_t next_token) override;

 private:
  struct FedNode {
    int32_t parent;  // index into fed_, -1 for the root
    int32_t token;
    int32_t slot;    // draft cache slot
  };
  void FeedPending();

  Model& draft_;
  Sampler sampler_;
  Batch batch_;
  std::vector<int32_t> pending_;      // committed tokens not yet in the draft cache (last: the root)
  int32_t root_position_ = 0;         // position of the root token
  int32_t root_slot_ = -1;
  std::vector<FedNode> fed_;          // tree nodes in the draft cache this step
  std::vector<int32_t> fed_of_node_;  // tree node index -> index into fed_, or -1
  std::vector<int32_t> kept_slots_;
};

// Throws grove::Error naming the first difference if two models cannot share token ids: vocabulary
// size, and (when both files carry one) the token texts.
void CheckSameVocabulary(const Model& draft, const Model& target);

}  // namespace grove
