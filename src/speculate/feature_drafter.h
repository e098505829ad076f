// A feature drafter in the manner of EAGLE, the autoregressive form of ParallelSpec's drafter
// (papers/parallelspec.txt §3; digest 004). One decoder layer of the target's shape reads, at
// position p, the fusion u_p = fc [e(x_p); f_{p-1}] of the token's embedding and the target's
// feature at the previous position (its pre-norm hidden state after the last layer,
// Model::hidden_states), and its output g_p is a guess of f_p. The target's final norm and head,
// shared and frozen (copies in the drafter's file), turn g_p into the distribution of x_{p+1}.
//
// Drafting a tree takes one forward per level: a node at depth d reads its parent's output g in
// place of the target's feature, which does not exist yet. After verification the drafter keeps
// only rows built from the target's own features: the root's row stays, the tree's rows go, and
// the accepted tokens come back as rows over the features the verify forward computed (the session
// passes them, TargetFeatureReader::ObserveTarget). A position whose feature the drafter never saw
// (the first token, or a prefix another sequence computed) reads a zero feature: worse guesses,
// never a different output.
//
// The parallel form (ParallelSpec, papers/parallelspec.txt §4.1; its file has K mask tokens): the
// root's forward also runs K mask rows after the root (their own learned embeddings, a zero
// feature, positions root + 1 .. root + K, causal among themselves), and the K + 1 rows give the
// distributions of depths 1 .. K + 1 at once. Every node at depth d proposes its children from the
// same q_d, whatever its path: a valid proposal for the rejection rules, which only need the
// distribution a child was drawn from. Deeper levels propose nothing. The mask rows leave the cache
// as soon as the forward returns.
#pragma once

#include <vector>

#include "model/model.h"
#include "ops/matmul.h"
#include "speculate/drafter.h"
#include "speculate/target_feature_reader.h"

namespace grove {

class FeatureDrafter : public Drafter, public TargetFeatureReader {
 public:
  // `layer` is the drafter's model (model/drafter_file.h), loaded with the target's context length
  // or more. Drafts into its sequence `seq`. Throws grove::Error if it belongs to another target or
  // its shape does not read this target's features.
  FeatureDrafter(Model& layer, const Model& target, int32_t seq = 0);

  std::string_view name() const override { return masks_ > 0 ? "parallel" : "feature"; }
  // K: the mask tokens of a parallel drafter, 0 for the autoregressive one.
  int32_t masks() const { return masks_; }
  int32_t n_vocab() const override { return model_.config().n_vocab; }
  bool deterministic() const override { return false; }
  void ReuseCache(bool reuse) override { reuse_cache_ = reuse; }
  void Begin(std::span<const int32_t> context) override;
  std::span<const float> Expand(const TokenTree& tree, std::span<const int32_t> frontier) override;
  void Commit(const TokenTree& tree, std::span<const int32_t> accepted,
              int32_t next_token) override;
  void Reserve(int32_t max_frontier, int32_t max_tree_nodes) override;
  bool HasRoomFor(int32_t fed_nodes) const override;
  void ObserveTarget(int32_t first_position, std::span<const float> rows) override;
  int32_t ObservedPrefix() const override { return observed_prefix_; }
  // The target's feature held for `position` (handed by ObserveTarget), or empty where none was
  // (the drafter reads zero there).
  std::span<const float> observed_feature(int32_t position) const;

 private:
  // Writes row i of fused_: fc [e(token); feature] (a null feature is zero).
  void Fuse(int32_t i, int32_t token, const float* feature);
  // Feeds the committed rows of positions [fed_until_, end) with their target features, in chunks
  // of the batch. With `root_outputs` the last row (the root) asks for logits and is followed by
  // the mask rows, which ask for theirs. Returns the logits of the last forward.
  std::span<const float> FeedCommitted(int32_t end, bool root_outputs);
  // A parallel drafter's later levels: each frontier node's children come from its depth's q.
  std::span<const float> DepthRows(const TokenTree& tree, std::span<const int32_t> frontier);
  const float* FeatureAt(int32_t position) const;  // null when never observed
  float* HiddenOfNode(int32_t node) {
    return node_hidden_.data() + static_cast<std::size_t>(node) * n_embd_;
  }

  Model& model_;
  int32_t seq_;
  int32_t n_embd_;
  WeightView fc_;    // (n_embd rows of 2 n_embd)
  WeightView embd_;  // the drafter's copy of the target's token embedding
  MatMulScratch scratch_;
  Batch batch_;
  std::vector<float> concat_;      // (max_batch, 2 n_embd) [e(x); f] rows of one forward
  std::vector<float> fused_;       // (max_batch, n_embd) fc of them: the layer's input
  std::vector<int32_t> tokens_;    // (n_ctx) committed token at each position
  std::vector<float> features_;    // (n_ctx, n_embd) the target's feature at each position
  std::vector<uint8_t> observed_;  // (n_ctx) whether features_ holds it
  int32_t root_position_ = 0;
  bool reuse_cache_ = false;     // ReuseCache
  int32_t observed_prefix_ = 0;  // ObservedPrefix, as Begin left it
  int32_t fed_until_ = 0;        // committed rows of positions below this are in the cache
  int32_t root_slot_ = -1;
  std::vector<float> root_hidden_;     // (n_embd) the root row's output: its children's feature
  std::vector<float> node_hidden_;     // (tree nodes, n_embd) each fed node's output
  std::vector<int32_t> slot_of_node_;  // tree node -> cache slot, -1 if not fed
  int32_t masks_ = 0;                  // K
  std::vector<float> mask_fused_;      // (K, n_embd) fc [m_j; 0]: the mask rows' input
  std::vector<float> depth_logits_;    // (K + 1, n_vocab) q of depths 1 .. K + 1, this step
  std::vector<float> level_out_;       // (frontier, n_vocab) DepthRows' answer
};

}  // namespace grove
