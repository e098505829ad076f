// Where a pipeline unit (a target stage or the draft) keeps the prediction tree's nodes in its KV
// cache: PipeDec's two-level cache (§3.4) as one KvCache, the committed tokens in slots
// [0, committed), then the tree nodes this unit has processed, each in the slot its forward gave
// it. A layer's batch points each node at its parent's slot (or the last committed slot for the
// root), so a node sees exactly its path. At a sync the root joins the committed slots and either
// the subtree the tree kept stays (KvCache::KeepSubtree) or, on a miss, no tree at all.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>

#include "model/batch.h"
#include "model/kv_cache.h"
#include "pipe/prediction_tree.h"

namespace grove {

class TreeCache {
 public:
  // The cache of sequence 0 of a unit's context, holding `committed` tokens and no tree.
  TreeCache(KvCache& cache, int32_t committed);

  int32_t committed() const { return committed_; }
  // Appends to `batch` the nodes of one layer (their parents already here), logits as asked.
  void AppendLayer(const PredictionTree& tree, std::span<const int64_t> nodes, bool want_logits,
                   Batch& batch) const;
  // After the forward over that batch: the nodes took the slots from first_slot on, in order.
  void Placed(std::span<const int64_t> nodes, int32_t first_slot);
  // A sync: `old_root` (here, at slot committed()) is committed; `pruned` is the tree after
  // PruneTo on a hit (its nodes held here stay, renumbered), or null on a miss (no tree stays).
  void Sync(int64_t old_root, const PredictionTree* pruned);

 private:
  KvCache& cache_;
  int32_t committed_;
  std::unordered_map<int64_t, int32_t> slot_of_;  // tree nodes held, by id
};

}  // namespace grove
