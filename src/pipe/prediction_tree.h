// PipeDec's dynamic prediction tree (§3.3): grown by one layer at a time from the draft's top-c
// candidates of each leaf, keeping the w paths of highest cumulative draft log-probability, and
// pruned to the subtree of the child the target chose.
//
// Nodes have ids that stay theirs until pruned (a counter, never reused), so every pipeline unit
// can name the nodes it holds in its cache and drop the pruned ones. Layer 0 is the root alone:
// the last token the target emitted, whose successor the final stage computes next.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace grove {

struct PredictionNode {
  int32_t token = 0;
  int64_t parent = -1;    // node id; -1 for the root
  int32_t position = 0;   // RoPE position: the parent's + 1
  double log_prob = 0.0;  // cumulative draft log-probability from the root (root: 0)
};

// One of a leaf's top-c draft candidates.
struct LeafCandidate {
  int32_t token = 0;
  float log_prob = 0.0f;  // log q(token | the leaf's path)
};

class PredictionTree {
 public:
  // INIT: a tree of the root alone.
  void Reset(int32_t root_token, int32_t root_position);

  int64_t root() const { return layers_.front().front(); }
  const PredictionNode& node(int64_t id) const { return nodes_.at(id); }
  bool contains(int64_t id) const { return nodes_.count(id) != 0; }
  int32_t n_layers() const { return static_cast<int32_t>(layers_.size()); }
  std::span<const int64_t> layer(int32_t i) const { return layers_[static_cast<std::size_t>(i)]; }
  int64_t size() const { return static_cast<int64_t>(nodes_.size()); }

  // EXPAND (§3.3.3): a new layer under the deepest layer's nodes. candidates[i] lists leaf i's
  // top-c candidates (leaf order of the deepest layer; fewer than c where the draft had fewer).
  // Keeps the `width` candidates of highest cumulative log-probability (ties: the earlier leaf,
  // then the better-ranked candidate), in leaf order then rank order, which keeps the layer
  // grouped by parent as BFS order wants. Returns the new layer (empty when nothing was offered).
  std::span<const int64_t> Expand(std::span<const std::vector<LeafCandidate>> candidates,
                                  int32_t width);
  // The root's child carrying `token`, or -1 (the hit test of §3.3.4).
  int64_t ChildOfRoot(int32_t token) const;
  // PRUNE on a hit (§3.3.4): `child` (a child of the root) becomes the root and only its subtree
  // stays; emptied layers at the bottom are dropped.
  void PruneTo(int64_t child);

 private:
  std::unordered_map<int64_t, PredictionNode> nodes_;
  std::vector<std::vector<int64_t>> layers_;
  int64_t next_id_ = 0;
};

}  // namespace grove
