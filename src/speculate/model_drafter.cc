#include "speculate/model_drafter.h"

#include <algorithm>
#include <cstdlib>
#include <limits>

#include "base/error.h"
#include "model/drafter_file.h"
#include "model/prefix_reuse.h"
#include "tokenize/tokenizer.h"

namespace grove {
namespace {

void CheckTokens(const ModelParameters& draft, const ModelParameters& target, int32_t n) {
  std::string a, b;
  const int32_t i = FirstDifferentTokenText(draft.gguf(), target.gguf(), n, &a, &b);
  if (i >= 0) Fail("draft and target vocabularies differ at token ", i, ": '", a, "' vs '", b, "'");
}

}  // namespace

void CheckSameVocabularySize(const ModelConfig& draft, const ModelConfig& target) {
  if (draft.n_vocab != target.n_vocab) {
    Fail("the draft has ", draft.n_vocab, " tokens but the target has ", target.n_vocab);
  }
}

void CheckSameVocabulary(const ModelParameters& draft, const ModelParameters& target) {
  const int32_t nd = draft.config().n_vocab, nt = target.config().n_vocab;
  if (nd != nt) {
    Fail("draft and target vocabularies differ: the draft has ", nd, " tokens, the target ", nt,
         " (speculative decoding needs one shared tokenizer)");
  }
  CheckTokens(draft, target, nd);
}

void CheckPairVocabulary(const ModelParameters& draft, const ModelParameters& target) {
  const int32_t nd = draft.config().n_vocab, nt = target.config().n_vocab;
  if (std::abs(nd - nt) > kMaxPairVocabDifference) {
    Fail("draft and target vocabularies differ: the draft has ", nd, " tokens, the target ", nt,
         " (more than ", kMaxPairVocabDifference,
         " apart: speculative decoding needs one shared tokenizer)");
  }
  CheckTokens(draft, target, std::min(nd, nt));
  const Tokenizer* a = draft.tokenizer();
  const Tokenizer* b = target.tokenizer();
  if (a && b) {
    if (a->bos() != b->bos() || a->eos() != b->eos()) {
      Fail("draft and target vocabularies differ in their special tokens: BOS ", a->bos(), " vs ",
           b->bos(), ", EOS ", a->eos(), " vs ", b->eos());
    }
  }
}

ModelDrafter::ModelDrafter(Model& draft, const Model& target, int32_t seq)
    : draft_(draft), seq_(seq), n_vocab_(target.config().n_vocab) {
  CheckPairVocabulary(*draft.parameters(), *target.parameters());
  if (seq < 0 || seq >= draft.n_seq())
    Fail("draft model: sequence ", seq, " outside 0..", draft.n_seq() - 1);
  batch_.tokens.reserve(draft.max_batch());
  // Every committed token may wait here while the session decodes plainly (a long context).
  pending_.reserve(static_cast<std::size_t>(draft.n_ctx()) + 1);
  // An accepted path is at most as long as the context: reserved so steps do not allocate.
  kept_slots_.reserve(static_cast<std::size_t>(draft.n_ctx()));
}

void ModelDrafter::Begin(std::span<const int32_t> context) {
  GROVE_CHECK(!context.empty());
  pending_.clear();
  for (int32_t token : context) pending_.push_back(DraftToken(token));
  // With ReuseCache, the draft cache keeps what it holds of the context (but the root, which the
  // first level feeds); the rest waits in pending_.
  KvCache& cache = draft_.cache(seq_);
  const int32_t kept =
      reuse_cache_ && PrefixReusable(draft_.config())
          ? cache.MatchingPrefix(std::span<const int32_t>(pending_).first(pending_.size() - 1))
          : 0;
  cache.Truncate(kept);
  pending_.erase(pending_.begin(), pending_.begin() + kept);
  root_position_ = static_cast<int32_t>(context.size()) - 1;
  root_slot_ = -1;
  // The prompt goes into the cache now, as a prefill; the root is fed with the first level.
  FeedPendingBeforeRoot();
}

void ModelDrafter::FeedPendingBeforeRoot() {
  const int32_t n_before_root = static_cast<int32_t>(pending_.size()) - 1;
  if (n_before_root <= 0) return;
  const int32_t first_position = root_position_ - n_before_root;
  GROVE_CHECK(draft_.cache(seq_).length() == first_position,
              "draft cache out of step with the committed text");
  draft_.ForwardChain(std::span<const int32_t>(pending_).first(n_before_root), first_position, seq_,
                      batch_,
                      /*want_logits=*/false);
  pending_.erase(pending_.begin(), pending_.begin() + n_before_root);
}

std::span<const float> ModelDrafter::Expand(const TokenTree& tree,
                                            std::span<const int32_t> frontier) {
  KvCache& cache = draft_.cache(seq_);
  const bool root_level = frontier.size() == 1 && frontier[0] == -1;
  if (root_level) {
    // Tokens committed since the last step that the draft has not seen: the accepted tokens beyond
    // the levels it drafted, then the new root. Only the root's row is needed. A long backlog
    // (after plain steps) goes in max_batch chunks first.
    if (static_cast<int32_t>(pending_.size()) > draft_.max_batch()) FeedPendingBeforeRoot();
    const int32_t first_position = root_position_ - static_cast<int32_t>(pending_.size()) + 1;
    GROVE_CHECK(cache.length() == first_position,
                "draft cache out of step with the committed text");
    batch_.Clear();
    batch_.AddChain(pending_, first_position, seq_);
    pending_.clear();
    std::fill(slot_of_node_.begin(), slot_of_node_.end(), -1);
  } else {
    batch_.Clear();
    for (int32_t node : frontier) {
      const TreeNode& t = tree.node(node);
      int32_t parent_slot = root_slot_;
      if (t.parent >= 0) {
        GROVE_CHECK(static_cast<std::size_t>(t.parent) < slot_of_node_.size() &&
                        slot_of_node_[t.parent] >= 0,
                    "draft: node ", node, " expanded before its parent");
        parent_slot = slot_of_node_[t.parent];
      }
      batch_.Add(t.token, root_position_ + t.depth, seq_, -1, true, parent_slot);
    }
  }
  const int32_t first_slot = cache.length();
  std::span<const float> logits = draft_.Forward(batch_);
  if (root_level) {
    root_slot_ = cache.length() - 1;
  } else {
    if (slot_of_node_.size() < static_cast<std::size_t>(tree.size()))
      slot_of_node_.resize(tree.size(), -1);
    for (std::size_t i = 0; i < frontier.size(); ++i) {
      slot_of_node_[frontier[i]] = first_slot + static_cast<int32_t>(i);
    }
  }
  return PadRows(logits);
}

int32_t ModelDrafter::DraftToken(int32_t token) const {
  // A token only the target has (its padding: never produced by a trained target) is shown to the
  // draft as token 0; the draft's guesses after it may be worse, its output is still verified.
  return token < draft_.config().n_vocab ? token : 0;
}

std::span<const float> ModelDrafter::PadRows(std::span<const float> logits) {
  const std::size_t nd = static_cast<std::size_t>(draft_.config().n_vocab);
  const std::size_t nt = static_cast<std::size_t>(n_vocab_);
  if (nd == nt) return logits;
  // Tokens only the target has (its padding) are never proposed; those only the draft has are
  // dropped. The tree is drawn from these rows, so verification stays lossless.
  const std::size_t n_rows = logits.size() / nd;
  padded_rows_.resize(n_rows * nt);
  const std::size_t shared = std::min(nd, nt);
  for (std::size_t r = 0; r < n_rows; ++r) {
    std::copy_n(logits.data() + r * nd, shared, padded_rows_.data() + r * nt);
    std::fill(padded_rows_.data() + r * nt + shared, padded_rows_.data() + (r + 1) * nt,
              -std::numeric_limits<float>::infinity());
  }
  return {padded_rows_.data(), n_rows * nt};
}

void ModelDrafter::Commit(const TokenTree& tree, std::span<const int32_t> accepted,
                          int32_t next_token) {
  // The accepted nodes the draft has already fed keep their cache slots (a prefix of the path);
  // the rest, then the next token, wait for the next step's first forward.
  kept_slots_.clear();
  std::size_t n_fed = 0;
  for (; n_fed < accepted.size(); ++n_fed) {
    const int32_t node = accepted[n_fed];
    if (static_cast<std::size_t>(node) >= slot_of_node_.size() || slot_of_node_[node] < 0) break;
    kept_slots_.push_back(slot_of_node_[node]);
  }
  if (root_slot_ >= 0) {
    draft_.cache(seq_).Compact(root_slot_ + 1, kept_slots_);
    root_slot_ = -1;
  }
  for (std::size_t i = n_fed; i < accepted.size(); ++i)
    pending_.push_back(DraftToken(tree.node(accepted[i]).token));
  pending_.push_back(DraftToken(next_token));
  root_position_ += static_cast<int32_t>(accepted.size()) + 1;
  std::fill(slot_of_node_.begin(), slot_of_node_.end(), -1);
}

void ModelDrafter::Reserve(int32_t max_frontier, int32_t max_tree_nodes) {
  if (draft_.config().n_vocab != n_vocab_) {
    padded_rows_.reserve(static_cast<std::size_t>(std::max(max_frontier, 1)) * n_vocab_);
  }
  batch_.tokens.reserve(static_cast<std::size_t>(std::max(max_frontier, draft_.max_batch())));
  slot_of_node_.reserve(static_cast<std::size_t>(max_tree_nodes));
}

bool ModelDrafter::HasRoomFor(int32_t fed_nodes) const {
  const KvCache& cache = draft_.cache(seq_);
  return static_cast<int64_t>(cache.length()) + static_cast<int64_t>(pending_.size()) + fed_nodes <=
         draft_.n_ctx();
}

}  // namespace grove
