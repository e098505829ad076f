#include "speculate/ngram_drafter.h"

#include <algorithm>
#include <limits>

#include "base/error.h"

namespace grove {

NgramDrafter::NgramDrafter(int32_t n_vocab, int32_t max_context, int32_t max_ngram,
                           int32_t min_ngram)
    : n_vocab_(n_vocab), max_ngram_(max_ngram), min_ngram_(min_ngram) {
  if (min_ngram < 1 || max_ngram < min_ngram || max_ngram > 16) {
    Fail("ngram drafter: n-gram sizes ", min_ngram, "..", max_ngram,
         " must satisfy 1 <= min <= max <= 16");
  }
  // The history and a node's path never exceed the context: no allocation once decoding runs.
  history_.reserve(static_cast<std::size_t>(std::max(max_context, 1)));
  scratch_.reserve(static_cast<std::size_t>(std::max(max_context, 1)) + 64);
}

void NgramDrafter::Begin(std::span<const int32_t> context) {
  history_.assign(context.begin(), context.end());
}

int32_t NgramDrafter::Predict(std::span<const int32_t> text) const {
  const int64_t len = static_cast<int64_t>(text.size());
  for (int32_t n = std::min<int64_t>(max_ngram_, len - 1); n >= min_ngram_; --n) {
    const auto suffix = text.subspan(len - n);
    // Most recent earlier match whose following token exists: scan right to left.
    for (int64_t start = len - n - 1; start >= 0; --start) {
      if (std::equal(suffix.begin(), suffix.end(), text.begin() + start)) return text[start + n];
    }
  }
  return -1;
}

void NgramDrafter::Reserve(int32_t max_frontier, int32_t max_tree_nodes) {
  rows_.reserve(static_cast<std::size_t>(max_frontier) * static_cast<std::size_t>(n_vocab_));
  scratch_.reserve(history_.capacity() + static_cast<std::size_t>(max_tree_nodes));
}

std::span<const float> NgramDrafter::Expand(const TokenTree& tree,
                                            std::span<const int32_t> frontier) {
  const std::size_t nv = static_cast<std::size_t>(n_vocab_);
  rows_.resize(std::max(rows_.size(), frontier.size() * nv));
  std::fill(rows_.begin(), rows_.begin() + frontier.size() * nv,
            -std::numeric_limits<float>::infinity());
  for (std::size_t i = 0; i < frontier.size(); ++i) {
    scratch_.assign(history_.begin(), history_.end());
    if (frontier[i] >= 0) {
      const std::size_t base = scratch_.size();
      for (int32_t v = frontier[i]; v >= 0; v = tree.node(v).parent)
        scratch_.push_back(tree.node(v).token);
      std::reverse(scratch_.begin() + base, scratch_.end());
    }
    const int32_t guess = Predict(scratch_);
    if (guess >= 0 && guess < n_vocab_) rows_[i * nv + guess] = 0.0f;
  }
  return {rows_.data(), frontier.size() * nv};
}

void NgramDrafter::Commit(const TokenTree& tree, std::span<const int32_t> accepted,
                          int32_t next_token) {
  for (int32_t node : accepted) history_.push_back(tree.node(node).token);
  history_.push_back(next_token);
}

}  // namespace grove
