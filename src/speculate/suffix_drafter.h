// Suffix drafting (SuffixDecoding, Oliaro et al., NeurIPS 2025): no draft model. The continuation
// of a node is looked up in two suffix indexes (speculate/suffix_index.h): one over this sequence
// (prompt and output so far), one over every output the engine has produced (a SuffixStore shared
// by all sequences, which this drafter adds its own output to when the sequence ends). The row of
// a node holds every token that followed the longest matched suffix of its text, ranked by how
// often it did, so trees branch where the record branches; a request served before is drafted
// from its earlier output.
//
// Choices where the paper differs: the paper grows each step's tree greedily from the counts and
// takes whichever of the two indexes' trees scores higher; here the tree's shape is the session's
// plan (chain, k-ary, Sequoia, OPT-Tree or auto, all fed by this drafter's rows), and each row
// comes from the index with the longer match (counts of both added when the matches are equally
// long), since a longer context predicts better. The rows are guesses ranked by counts, not a
// distribution the children are sampled from: the drafter is deterministic, so it pairs with
// verification rules that are lossless for any tree (greedy, target-sample).
#pragma once

#include <memory>
#include <vector>

#include "speculate/drafter.h"
#include "speculate/lookup_matches.h"
#include "speculate/suffix_index.h"
#include "speculate/suffix_store.h"

namespace grove {

class SuffixDrafter : public Drafter, public LookupMatches {
 public:
  // store: the outputs shared with other sequences (null: this sequence's text alone); the
  // drafter's own index counts substrings of the same depth as the store's. max_context: the most
  // tokens a sequence holds (the target's context): the index is reserved for it once, so that no
  // step allocates.
  SuffixDrafter(int32_t n_vocab, int32_t max_context, std::shared_ptr<SuffixStore> store);

  std::string_view name() const override { return "suffix"; }
  int32_t n_vocab() const override { return n_vocab_; }
  bool deterministic() const override { return true; }
  void Begin(std::span<const int32_t> context) override;
  // Rows of logits: log(count) for each token that followed the matched suffix, -inf elsewhere.
  std::span<const float> Expand(const TokenTree& tree, std::span<const int32_t> frontier) override;
  void Commit(const TokenTree& tree, std::span<const int32_t> accepted,
              int32_t next_token) override;
  // Keeps the output (and the prompt's last tokens that led into it) in the store.
  void End() override;
  bool HasRoomFor(int32_t) const override { return true; }
  void Reserve(int32_t max_frontier, int32_t max_tree_nodes) override;
  std::span<const int32_t> matched_lengths() const override { return matched_; }

 private:
  void Push(int32_t token);
  // The last max_depth - 1 tokens of the text that ends at frontier node `node` (-1: the root).
  std::span<const int32_t> TextBefore(const TokenTree& tree, int32_t node);
  // Adds count to the row's entry for `token` (rows hold counts until Expand takes their logs).
  void Count(float* row, int32_t token, int32_t count);

  int32_t n_vocab_;
  int32_t max_context_;
  std::shared_ptr<SuffixStore> store_;
  int32_t depth_;
  SuffixIndex own_;  // this sequence's text
  SuffixIndex::Cursor cursor_;
  std::vector<int32_t> history_;  // committed tokens, root last
  std::size_t prompt_length_ = 0;
  std::vector<int32_t> text_;     // TextBefore's result
  std::vector<float> rows_;       // (frontier, n_vocab) logits of the last Expand
  std::vector<int32_t> matched_;  // per row of the last Expand: the longer match's length
  std::vector<int32_t> touched_;  // row entries Count wrote
};

}  // namespace grove
