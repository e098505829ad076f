#include "speculate/suffix_drafter.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace grove {

namespace {
constexpr float kNone = -std::numeric_limits<float>::infinity();
}  // namespace

SuffixDrafter::SuffixDrafter(int32_t n_vocab, int32_t max_context,
                             std::shared_ptr<SuffixStore> store)
    : n_vocab_(n_vocab),
      max_context_(std::max(max_context, 1)),
      store_(std::move(store)),
      depth_(store_ ? store_->max_depth() : SuffixStoreOptions{}.max_depth),
      own_(depth_) {
  Offer({.lookup_matches = this});
  // Each token adds at most depth_ nodes (the substrings it ends).
  own_.Reserve(static_cast<std::size_t>(max_context_) * static_cast<std::size_t>(depth_) + 1);
  history_.reserve(static_cast<std::size_t>(max_context_));
}

void SuffixDrafter::Push(int32_t token) {
  history_.push_back(token);
  own_.Append(cursor_, token);
}

void SuffixDrafter::Begin(std::span<const int32_t> context) {
  own_.Clear();
  cursor_.Clear();
  history_.clear();
  for (int32_t token : context) Push(token);
  prompt_length_ = context.size();
}

void SuffixDrafter::Reserve(int32_t max_frontier, int32_t max_tree_nodes) {
  rows_.reserve(static_cast<std::size_t>(max_frontier) * static_cast<std::size_t>(n_vocab_));
  text_.reserve(static_cast<std::size_t>(depth_) + static_cast<std::size_t>(max_tree_nodes));
  touched_.reserve(static_cast<std::size_t>(n_vocab_));
  matched_.reserve(static_cast<std::size_t>(max_frontier));
}

std::span<const int32_t> SuffixDrafter::TextBefore(const TokenTree& tree, int32_t node) {
  const std::size_t want = static_cast<std::size_t>(depth_ - 1);
  text_.clear();
  for (int32_t v = node; v >= 0 && text_.size() < want; v = tree.node(v).parent)
    text_.push_back(tree.node(v).token);
  for (auto it = history_.rbegin(); it != history_.rend() && text_.size() < want; ++it)
    text_.push_back(*it);
  std::reverse(text_.begin(), text_.end());
  return text_;
}

void SuffixDrafter::Count(float* row, int32_t token, int32_t count) {
  if (token < 0 || token >= n_vocab_ || count <= 0) return;
  if (row[token] == kNone) {
    row[token] = 0.0f;
    touched_.push_back(token);
  }
  row[token] += static_cast<float>(count);
}

std::span<const float> SuffixDrafter::Expand(const TokenTree& tree,
                                             std::span<const int32_t> frontier) {
  const std::size_t nv = static_cast<std::size_t>(n_vocab_);
  rows_.resize(std::max(rows_.size(), frontier.size() * nv));
  std::fill(rows_.begin(), rows_.begin() + frontier.size() * nv, kNone);
  matched_.resize(frontier.size());
  // served: the store's index (null without a store), read under its lock.
  auto read = [&](const SuffixIndex* served_index) {
    for (std::size_t i = 0; i < frontier.size(); ++i) {
      const std::span<const int32_t> text = TextBefore(tree, frontier[i]);
      const SuffixIndex::Match own = own_.LongestMatch(text);
      const SuffixIndex::Match served =
          served_index ? served_index->LongestMatch(text) : SuffixIndex::Match{};
      float* row = rows_.data() + i * nv;
      matched_[i] = std::max(own.length, served.length);
      touched_.clear();
      if (own.length >= served.length && own.node >= 0)
        own_.ForEachNext(own.node, [&](int32_t t, int32_t c) { Count(row, t, c); });
      if (served.length >= own.length && served.node >= 0)
        served_index->ForEachNext(served.node, [&](int32_t t, int32_t c) { Count(row, t, c); });
      for (int32_t t : touched_) row[t] = std::log(row[t]);
    }
    return 0;
  };
  if (store_) {
    store_->Read([&](const SuffixIndex& index) { return read(&index); });
  } else {
    read(nullptr);
  }
  return {rows_.data(), frontier.size() * nv};
}

void SuffixDrafter::Commit(const TokenTree& tree, std::span<const int32_t> accepted,
                           int32_t next_token) {
  for (int32_t node : accepted) Push(tree.node(node).token);
  Push(next_token);
}

void SuffixDrafter::End() {
  if (!store_ || history_.size() <= prompt_length_) return;
  // The prompt's last tokens lead into the output: a request that ends the same way finds it.
  const std::size_t lead = std::min<std::size_t>(prompt_length_, depth_ - 1);
  store_->Add(std::span<const int32_t>(history_).subspan(prompt_length_ - lead));
}

}  // namespace grove
