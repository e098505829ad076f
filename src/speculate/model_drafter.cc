#include "speculate/model_drafter.h"

#include <algorithm>

#include "base/error.h"
#include "io/gguf.h"

namespace grove {

void CheckSameVocabulary(const Model& draft, const Model& target) {
  const int32_t nd = draft.config().n_vocab, nt = target.config().n_vocab;
  if (nd != nt) {
    Fail("draft and target vocabularies differ: the draft has ", nd, " tokens, the target ", nt,
         " (speculative decoding needs one shared tokenizer)");
  }
  const char* key = "tokenizer.ggml.tokens";
  if (draft.gguf().Has(key) && target.gguf().Has(key)) {
    auto a = draft.gguf().GetStringArray(key);
    auto b = target.gguf().GetStringArray(key);
    for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
      if (a[i] != b[i]) {
        Fail("draft and target vocabularies differ at token ", i, ": '", a[i], "' vs '", b[i], "'");
      }
    }
  }
}

namespace {

// At temperature 0 plain sampling's distribution is one-hot, which would leave a top-k tree one child
// per node. Greedy verification never reads the draft rows, so rank candidates (and give OPT-Tree its
// probabilities) by the draft's own softmax instead.
SamplerParams DraftParams(const SamplerParams& sampling) {
  if (!sampling.greedy()) return sampling;
  return SamplerParams{.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = sampling.seed};
}

}  // namespace

ModelDrafter::ModelDrafter(Model& draft, const Model& target, const SamplerParams& sampling)
    : draft_(draft), sampler_(DraftParams(sampling)) {
  CheckSameVocabulary(draft, target);
  batch_.tokens.reserve(draft.max_batch());
  fed_.reserve(256);
  fed_of_node_.reserve(256);
}

void ModelDrafter::Begin(std::span<const int32_t> context) {
  GROVE_CHECK(!context.empty());
  draft_.cache(0).Clear();
  // Everything but the root goes into the cache now; the root is fed with the first level.
  draft_.ForwardChain(context.first(context.size() - 1), 0, 0, batch_, /*want_logits=*/false);
  pending_.assign(1, context.back());
  root_position_ = static_cast<int32_t>(context.size()) - 1;
}

void ModelDrafter::FeedPending() {
  // Tokens committed since the last step that the draft has not seen: the accepted tokens beyond the
  // levels it drafted, then the new root. One chain; only the root's row is needed.
  KvCache& cache = draft_.cache(0);
  const int32_t first_position = root_position_ - static_cast<int32_t>(pending_.size()) + 1;
  batch_.Clear();
  batch_.AddChain(pending_, first_position, 0);
  GROVE_CHECK(cache.length() == first_position, "draft cache out of step with the committed text");
  pending_.clear();
}

void ModelDrafter::Expand(const TokenTree& tree, std::span<const int32_t> frontier, std::span<float> rows) {
  const int32_t nv = n_vocab();
  GROVE_CHECK(rows.size() >= frontier.size() * static_cast<std::size_t>(nv));
  KvCache& cache = draft_.cache(0);
  if (frontier.size() == 1 && frontier[0] == -1) {
    FeedPending();
    fed_.clear();
    fed_of_node_.clear();
  } else {
    batch_.Clear();
    for (int32_t node : frontier) {
      const TreeNode& t = tree.node(node);
      int32_t parent_slot = root_slot_;
      if (t.parent >= 0) {
        GROVE_CHECK(static_cast<std::size_t>(t.parent) < fed_of_node_.size() && fed_of_node_[t.parent] >= 0,
                    "draft: node ", node, " expanded before its parent");
        parent_slot = fed_[fed_of_node_[t.parent]].slot;
      }
      batch_.Add(t.token, root_position_ + t.depth, 0, -1, true, parent_slot);
    }
  }
  const int32_t first_slot = cache.length();
  std::span<const float> logits = draft_.Forward(batch_);
  if (frontier.size() == 1 && frontier[0] == -1) {
    root_slot_ = cache.length() - 1;
  } else {
    if (fed_of_node_.size() < static_cast<std::size_t>(tree.size())) fed_of_node_.resize(tree.size(), -1);
    for (std::size_t i = 0; i < frontier.size(); ++i) {
      const TreeNode& t = tree.node(frontier[i]);
      fed_of_node_[frontier[i]] = static_cast<int32_t>(fed_.size());
      fed_.push_back({t.parent < 0 ? -1 : fed_of_node_[t.parent], t.token, first_slot + static_cast<int32_t>(i)});
    }
  }
  for (std::size_t i = 0; i < frontier.size(); ++i) {
    sampler_.Distribution(logits.subspan(i * nv, nv), rows.subspan(i * nv, nv));
  }
}

void ModelDrafter::Commit(std::span<const int32_t> accepted_tokens, int32_t next_token) {
  // Walk the accepted path through the nodes the draft has seen; keep their cache slots.
  kept_slots_.clear();
  int32_t current = -1;
  std::size_t n_fed = 0;
  for (; n_fed < accepted_tokens.size(); ++n_fed) {
    int32_t found = -1;
    for (std::size_t f = 0; f < fed_.size(); ++f) {
      if (fed_[f].parent == current && fed_[f].token == accepted_tokens[n_fed]) {
        found = static_cast<int32_t>(f);
        break;
      }
    }
    if (found < 0) break;
    kept_slots_.push_back(fed_[found].slot);
    current = found;
  }
  draft_.cache(0).Compact(root_slot_ + 1, kept_slots_);
  pending_.assign(accepted_tokens.begin() + n_fed, accepted_tokens.end());
  pending_.push_back(next_token);
  root_position_ += static_cast<int32_t>(accepted_tokens.size()) + 1;
  fed_.clear();
  fed_of_node_.clear();
}

}  // namespace grove
