// Prompt lookup (n-gram) drafting: no draft model. The continuation of a node is guessed by finding
// the most recent earlier occurrence of the last n tokens (n = max_ngram down to min_ngram) in the
// text so far and proposing the token that followed it. Pays off on text that repeats its context
// (summaries, code edits, extraction). Its rows are one-hot guesses, so it pairs with verification
// rules that are lossless for any tree (greedy, target-sample matching).
#pragma once

#include <vector>

#include "speculate/drafter.h"

namespace grove {

class NgramDrafter : public Drafter {
 public:
  // max_context: the most tokens a sequence holds (the target's context), reserved up front.
  NgramDrafter(int32_t n_vocab, int32_t max_context, int32_t max_ngram = 3, int32_t min_ngram = 1);

  std::string_view name() const override { return "ngram"; }
  int32_t n_vocab() const override { return n_vocab_; }
  bool deterministic() const override { return true; }
  void Begin(std::span<const int32_t> context) override;
  // Rows of logits: 0 at the guess, -inf elsewhere (no guess: -inf everywhere).
  std::span<const float> Expand(const TokenTree& tree, std::span<const int32_t> frontier) override;
  void Commit(const TokenTree& tree, std::span<const int32_t> accepted,
              int32_t next_token) override;
  bool HasRoomFor(int32_t) const override { return true; }
  void Reserve(int32_t max_frontier, int32_t max_tree_nodes) override;

  // The guess after `text` (whose suffix is matched against earlier parts of itself), or -1.
  int32_t Predict(std::span<const int32_t> text) const;

 private:
  int32_t n_vocab_;
  int32_t max_ngram_;
  int32_t min_ngram_;
  std::vector<int32_t> history_;  // committed tokens, root last
  std::vector<int32_t> scratch_;  // history + the path to the node being expanded
  std::vector<float> rows_;       // (frontier, n_vocab) logits of the last Expand
};

}  // namespace grove
