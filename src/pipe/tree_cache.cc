#include "pipe/tree_cache.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "base/error.h"

namespace grove {

TreeCache::TreeCache(KvCache& cache, int32_t committed) : cache_(cache), committed_(committed) {
  GROVE_CHECK(cache.length() == committed, "tree cache: the cache holds ", cache.length(),
              " slots, not ", committed);
}

void TreeCache::AppendLayer(const PredictionTree& tree, std::span<const int64_t> nodes,
                            bool want_logits, Batch& batch) const {
  for (int64_t id : nodes) {
    const PredictionNode& node = tree.node(id);
    int32_t parent_slot = committed_ - 1;  // the root continues the committed text
    if (node.parent >= 0) {
      const auto it = slot_of_.find(node.parent);
      GROVE_CHECK(it != slot_of_.end(), "tree cache: node ", id, "'s parent ", node.parent,
                  " is not held here");
      parent_slot = it->second;
    }
    batch.Add(node.token, node.position, 0, -1, want_logits, parent_slot);
  }
}

void TreeCache::Placed(std::span<const int64_t> nodes, int32_t first_slot) {
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    slot_of_[nodes[i]] = first_slot + static_cast<int32_t>(i);
  }
}

void TreeCache::Sync(int64_t old_root, const PredictionTree* pruned) {
  const auto root = slot_of_.find(old_root);
  GROVE_CHECK(root != slot_of_.end() && root->second == committed_, "tree cache: the root ",
              old_root, " is not at slot ", committed_);
  slot_of_.erase(root);
  ++committed_;
  if (pruned == nullptr) {
    slot_of_.clear();
    cache_.Truncate(committed_);
    return;
  }
  std::vector<std::pair<int32_t, int64_t>> kept;  // (slot, node), by slot
  for (const auto& [id, slot] : slot_of_) {
    if (pruned->contains(id)) kept.emplace_back(slot, id);
  }
  std::sort(kept.begin(), kept.end());
  std::vector<int32_t> slots;
  slot_of_.clear();
  for (std::size_t i = 0; i < kept.size(); ++i) {
    slots.push_back(kept[i].first);
    slot_of_[kept[i].second] = committed_ + static_cast<int32_t>(i);
  }
  cache_.KeepSubtree(committed_, slots);
}

}  // namespace grove
