#include "speculate/ngram_drafter.h"

#include <algorithm>

#include "base/error.h"

namespace grove {

NgramDrafter::NgramDrafter(int32_t n_vocab, int32_t max_ngram, int32_t min_ngram)
    : n_vocab_(n_vocab), max_ngram_(max_ngram), min_ngram_(min_ngram) {
  if (min_ngram < 1 || max_ngram < min_ngram || max_ngram > 16) {
    Fail("ngram drafter: n-gram sizes ", min_ngram, "..", max_ngram, " must satisfy 1 <= min <= max <= 16");
  }
}

void NgramDrafter::Begin(std::span<const int32_t> context) { history_.assign(context.begin(), context.end()); }

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

void NgramDrafter::Expand(const TokenTree& tree, std::span<const int32_t> frontier, std::span<float> rows) {
  std::fill(rows.begin(), rows.begin() + frontier.size() * n_vocab_, 0.0f);
  for (std::size_t i = 0; i < frontier.size(); ++i) {
    scratch_ = history_;
    if (frontier[i] >= 0) {
      const std::size_t base = scratch_.size();
      for (int32_t v = frontier[i]; v >= 0; v = tree.node(v).parent) scratch_.push_back(tree.node(v).token);
      std::reverse(scratch_.begin() + base, scratch_.end());
    }
    const int32_t guess = Predict(scratch_);
    if (guess >= 0 && guess < n_vocab_) rows[i * n_vocab_ + guess] = 1.0f;
  }
}

void NgramDrafter::Commit(std::span<const int32_t> accepted_tokens, int32_t next_token) {
  history_.insert(history_.end(), accepted_tokens.begin(), accepted_tokens.end());
  history_.push_back(next_token);
}

}  // namespace grove
