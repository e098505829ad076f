#include "pipe/prediction_tree.h"

#include <algorithm>
#include <unordered_set>

#include "base/error.h"

namespace grove {

void PredictionTree::Reset(int32_t root_token, int32_t root_position) {
  nodes_.clear();
  layers_.clear();
  const int64_t id = next_id_++;
  nodes_[id] = {.token = root_token, .parent = -1, .position = root_position, .log_prob = 0.0};
  layers_.push_back({id});
}

std::span<const int64_t> PredictionTree::Expand(
    std::span<const std::vector<LeafCandidate>> candidates, int32_t width) {
  const std::vector<int64_t>& leaves = layers_.back();
  GROVE_CHECK(candidates.size() == leaves.size(), "prediction tree: ", candidates.size(),
              " candidate lists for ", leaves.size(), " leaves");
  struct Choice {
    double log_prob;
    std::size_t leaf;
    std::size_t rank;
  };
  std::vector<Choice> all;
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    const double base = nodes_.at(leaves[i]).log_prob;
    for (std::size_t r = 0; r < candidates[i].size(); ++r) {
      all.push_back({base + candidates[i][r].log_prob, i, r});
    }
  }
  const std::size_t keep = std::min(all.size(), static_cast<std::size_t>(std::max(width, 0)));
  if (keep == 0) return {};
  auto better = [](const Choice& a, const Choice& b) {
    if (a.log_prob != b.log_prob) return a.log_prob > b.log_prob;
    return a.leaf != b.leaf ? a.leaf < b.leaf : a.rank < b.rank;
  };
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(keep), all.end(),
                    better);
  all.resize(keep);
  // Sorted by (leaf, rank): the flat index order of the paper's sort_ascending(D).
  std::sort(all.begin(), all.end(), [](const Choice& a, const Choice& b) {
    return a.leaf != b.leaf ? a.leaf < b.leaf : a.rank < b.rank;
  });
  std::vector<int64_t> layer;
  for (const Choice& c : all) {
    const int64_t parent = leaves[c.leaf];
    const int64_t id = next_id_++;
    nodes_[id] = {.token = candidates[c.leaf][c.rank].token,
                  .parent = parent,
                  .position = nodes_.at(parent).position + 1,
                  .log_prob = c.log_prob};
    layer.push_back(id);
  }
  layers_.push_back(std::move(layer));
  return layers_.back();
}

int64_t PredictionTree::ChildOfRoot(int32_t token) const {
  if (layers_.size() < 2) return -1;
  for (int64_t id : layers_[1]) {
    if (nodes_.at(id).token == token) return id;
  }
  return -1;
}

void PredictionTree::PruneTo(int64_t child) {
  GROVE_CHECK(layers_.size() >= 2 && nodes_.at(child).parent == root(), "prediction tree: ", child,
              " is not a child of the root");
  std::unordered_set<int64_t> kept = {child};
  std::vector<std::vector<int64_t>> layers = {{child}};
  for (std::size_t l = 2; l < layers_.size(); ++l) {
    std::vector<int64_t> next;
    for (int64_t id : layers_[l]) {
      if (kept.count(nodes_.at(id).parent)) {
        kept.insert(id);
        next.push_back(id);
      }
    }
    if (next.empty()) break;
    layers.push_back(std::move(next));
  }
  std::erase_if(nodes_, [&](const auto& entry) { return kept.count(entry.first) == 0; });
  nodes_.at(child).parent = -1;
  layers_ = std::move(layers);
}

}  // namespace grove
