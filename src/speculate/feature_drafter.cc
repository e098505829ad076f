#include "speculate/feature_drafter.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "base/error.h"
#include "model/drafter_file.h"
#include "model/prefix_reuse.h"
#include "quant/quant.h"
#include "speculate/model_drafter.h"

namespace grove {

FeatureDrafter::FeatureDrafter(Model& layer, const Model& target, int32_t seq)
    : model_(layer), seq_(seq), n_embd_(layer.config().n_embd) {
  Offer({.feature_reader = this});
  const FeatureDrafterTensors own = ReadFeatureDrafterTensors(layer.gguf(), target.gguf());
  CheckSameVocabulary(*layer.parameters(), *target.parameters());
  if (layer.n_ctx() < target.n_ctx()) {
    Fail("feature drafter: context ", layer.n_ctx(), " is shorter than the target's ",
         target.n_ctx());
  }
  if (seq < 0 || seq >= layer.n_seq())
    Fail("feature drafter: sequence ", seq, " outside 0..", layer.n_seq() - 1);
  fc_ = own.fusion;
  embd_ = layer.parameters()->weights().token_embd;
  const std::size_t d = static_cast<std::size_t>(n_embd_);
  const auto rows = static_cast<std::size_t>(layer.max_batch());
  scratch_ = MatMulScratch(layer.max_batch(), 2 * static_cast<int64_t>(n_embd_));
  concat_.resize(rows * 2 * d);
  fused_.resize(rows * d);
  const auto n_ctx = static_cast<std::size_t>(layer.n_ctx());
  tokens_.resize(n_ctx);
  features_.resize(n_ctx * d);
  observed_.resize(n_ctx);
  root_hidden_.resize(d);
  batch_.tokens.reserve(rows);
  masks_ = own.masks;
  if (masks_ > 0) {
    if (masks_ >= layer.max_batch())
      Fail("parallel drafter: ", masks_, " masks do not fit a batch of ", layer.max_batch());
    // The mask rows' input is the same at every step: fc [m_j; 0], computed once.
    const float* m = own.mask_embeddings;
    for (int32_t j = 0; j < masks_; ++j) {
      float* row = concat_.data() + static_cast<std::size_t>(j) * 2 * d;
      std::copy_n(m + static_cast<std::size_t>(j) * d, d, row);
      std::fill(row + d, row + 2 * d, 0.0f);
    }
    mask_fused_.resize(static_cast<std::size_t>(masks_) * d);
    MatMul(fc_, concat_.data(), masks_, mask_fused_.data(), scratch_, layer.pool());
    depth_logits_.resize(static_cast<std::size_t>(masks_ + 1) * layer.config().n_vocab);
  }
}

void FeatureDrafter::Begin(std::span<const int32_t> context) {
  GROVE_CHECK(!context.empty());
  if (context.size() > tokens_.size())
    Fail("feature drafter: a context of ", context.size(), " tokens exceeds ", tokens_.size());
  // Fuse reads embedding rows before any forward validates the tokens: check them here.
  for (int32_t token : context) {
    if (token < 0 || token >= n_vocab())
      Fail("feature drafter: token ", token, " is outside the vocabulary of ", n_vocab());
  }
  // With ReuseCache, what the last sequence left that the new context shares: the committed
  // tokens up to the old root, the target's features of those positions (a feature depends on
  // the tokens up to its own position only), and the cache rows fed from them (row p also reads
  // the feature of p - 1, so a row is kept only where that feature was held). Tree rows past the
  // committed ones read the drafter's own guesses and are never kept.
  int32_t same = 0;
  if (reuse_cache_ && PrefixReusable(model_.config())) {
    const int32_t old_committed =
        std::min(root_position_ + 1, static_cast<int32_t>(context.size()));
    while (same < old_committed &&
           tokens_[static_cast<std::size_t>(same)] == context[static_cast<std::size_t>(same)]) {
      ++same;
    }
  }
  int32_t observed = 0;
  while (observed < same && observed_[static_cast<std::size_t>(observed)]) ++observed;
  KvCache& cache = model_.cache(seq_);
  const int32_t rows =
      std::min({same, fed_until_, observed + 1, static_cast<int32_t>(context.size()) - 1});
  const int32_t kept = cache.ReusablePrefix(std::min(rows, cache.MatchingPrefix(context)));
  cache.Truncate(std::min(kept, cache.length()));
  std::copy(context.begin(), context.end(), tokens_.begin());
  std::fill(observed_.begin() + observed, observed_.end(), uint8_t{0});
  observed_prefix_ = observed;
  root_position_ = static_cast<int32_t>(context.size()) - 1;
  // Row p reads the feature of p - 1; position 0 has none and reads zero (as in training).
  fed_until_ = kept;
  root_slot_ = -1;
}

void FeatureDrafter::ObserveTarget(int32_t first_position, std::span<const float> rows) {
  const auto d = static_cast<std::size_t>(n_embd_);
  GROVE_CHECK(rows.size() % d == 0, "feature drafter: rows of ", d, " floats expected");
  const auto n = static_cast<int32_t>(rows.size() / d);
  GROVE_CHECK(first_position >= 0 && first_position + n <= static_cast<int32_t>(observed_.size()),
              "feature drafter: features past the context");
  std::memcpy(features_.data() + static_cast<std::size_t>(first_position) * d, rows.data(),
              rows.size() * sizeof(float));
  std::fill_n(observed_.begin() + first_position, n, uint8_t{1});
}

const float* FeatureDrafter::FeatureAt(int32_t position) const {
  if (position < 0 || !observed_[static_cast<std::size_t>(position)]) return nullptr;
  return features_.data() + static_cast<std::size_t>(position) * n_embd_;
}

std::span<const float> FeatureDrafter::observed_feature(int32_t position) const {
  const float* feature =
      position < static_cast<int32_t>(observed_.size()) ? FeatureAt(position) : nullptr;
  return feature ? std::span<const float>(feature, static_cast<std::size_t>(n_embd_))
                 : std::span<const float>();
}

void FeatureDrafter::Fuse(int32_t i, int32_t token, const float* feature) {
  const auto d = static_cast<std::size_t>(n_embd_);
  float* row = concat_.data() + static_cast<std::size_t>(i) * 2 * d;
  DequantizeRow(embd_.type,
                static_cast<const uint8_t*>(embd_.data) +
                    static_cast<std::size_t>(token) * static_cast<std::size_t>(embd_.row_bytes),
                row, n_embd_);
  if (feature) {
    std::memcpy(row + d, feature, d * sizeof(float));
  } else {
    std::fill(row + d, row + 2 * d, 0.0f);
  }
}

std::span<const float> FeatureDrafter::FeedCommitted(int32_t end, bool root_outputs) {
  const auto d = static_cast<std::size_t>(n_embd_);
  std::span<const float> logits;
  const int32_t n_layer = model_.config().n_layer;
  const int32_t masks = root_outputs ? masks_ : 0;
  while (fed_until_ < end) {
    // The last chunk leaves room for the mask rows.
    const int32_t n = std::min(end - fed_until_, model_.max_batch() - masks);
    const bool last = fed_until_ + n == end;
    batch_.Clear();
    for (int32_t i = 0; i < n; ++i) {
      const int32_t p = fed_until_ + i;
      Fuse(i, tokens_[static_cast<std::size_t>(p)], FeatureAt(p - 1));
      batch_.Add(tokens_[static_cast<std::size_t>(p)], p, seq_, i == 0 ? -1 : i - 1,
                 root_outputs && last && i == n - 1);
    }
    MatMul(fc_, concat_.data(), n, fused_.data(), scratch_, model_.pool());
    const int32_t extra = last ? masks : 0;
    for (int32_t j = 0; j < extra; ++j) {
      // Mask j + 1 continues the chain after the root: position end + j, sees the root and the
      // masks before it. Its token id is never read (the input is given).
      std::copy_n(mask_fused_.data() + static_cast<std::size_t>(j) * d, d,
                  fused_.data() + static_cast<std::size_t>(n + j) * d);
      batch_.Add(0, end + j, seq_, n - 1 + j, true);
    }
    logits = model_.ForwardLayers(
        batch_, 0, n_layer,
        std::span<const float>(fused_).first(static_cast<std::size_t>(n + extra) * d));
    fed_until_ += n;
  }
  return logits;
}

std::span<const float> FeatureDrafter::Expand(const TokenTree& tree,
                                              std::span<const int32_t> frontier) {
  const auto d = static_cast<std::size_t>(n_embd_);
  KvCache& cache = model_.cache(seq_);
  if (frontier.size() == 1 && frontier[0] == -1) {
    // The committed rows the drafter has not fed (the accepted tokens of the last step over the
    // target's features, or the prompt), the root's last.
    GROVE_CHECK(fed_until_ <= root_position_, "feature drafter: the root was fed already");
    std::span<const float> logits = FeedCommitted(root_position_ + 1, /*root_outputs=*/true);
    std::fill(slot_of_node_.begin(), slot_of_node_.end(), -1);
    if (masks_ > 0) {
      // Depths 1 .. K + 1 in one forward; the mask rows leave the cache at once.
      std::copy(logits.begin(), logits.end(), depth_logits_.begin());
      root_slot_ = cache.length() - 1 - masks_;
      cache.Truncate(root_slot_ + 1);
      return std::span<const float>(depth_logits_).first(static_cast<std::size_t>(n_vocab()));
    }
    root_slot_ = cache.length() - 1;
    const std::span<const float> hidden = model_.hidden_states();
    std::memcpy(root_hidden_.data(), hidden.data() + hidden.size() - d, d * sizeof(float));
    return logits;
  }
  if (masks_ > 0) return DepthRows(tree, frontier);
  GROVE_CHECK(root_slot_ >= 0, "feature drafter: a level expanded before the root");
  GROVE_CHECK(static_cast<int32_t>(frontier.size()) <= model_.max_batch(),
              "feature drafter: a level of ", frontier.size(), " nodes exceeds the batch");
  batch_.Clear();
  for (std::size_t i = 0; i < frontier.size(); ++i) {
    const TreeNode& t = tree.node(frontier[i]);
    int32_t parent_slot = root_slot_;
    const float* parent_hidden = root_hidden_.data();
    if (t.parent >= 0) {
      GROVE_CHECK(
          static_cast<std::size_t>(t.parent) < slot_of_node_.size() && slot_of_node_[t.parent] >= 0,
          "feature drafter: node ", frontier[i], " expanded before its parent");
      parent_slot = slot_of_node_[t.parent];
      parent_hidden = HiddenOfNode(t.parent);
    }
    Fuse(static_cast<int32_t>(i), t.token, parent_hidden);
    batch_.Add(t.token, root_position_ + t.depth, seq_, -1, true, parent_slot);
  }
  const auto n = static_cast<int32_t>(frontier.size());
  MatMul(fc_, concat_.data(), n, fused_.data(), scratch_, model_.pool());
  const int32_t first_slot = cache.length();
  std::span<const float> logits =
      model_.ForwardLayers(batch_, 0, model_.config().n_layer,
                           std::span<const float>(fused_).first(static_cast<std::size_t>(n) * d));
  if (slot_of_node_.size() < static_cast<std::size_t>(tree.size())) {
    slot_of_node_.resize(static_cast<std::size_t>(tree.size()), -1);
    node_hidden_.resize(static_cast<std::size_t>(tree.size()) * d);
  }
  const std::span<const float> hidden = model_.hidden_states();
  for (std::size_t i = 0; i < frontier.size(); ++i) {
    slot_of_node_[static_cast<std::size_t>(frontier[i])] = first_slot + static_cast<int32_t>(i);
    std::memcpy(HiddenOfNode(frontier[i]), hidden.data() + i * d, d * sizeof(float));
  }
  return logits;
}

std::span<const float> FeatureDrafter::DepthRows(const TokenTree& tree,
                                                 std::span<const int32_t> frontier) {
  const auto v = static_cast<std::size_t>(n_vocab());
  level_out_.resize(frontier.size() * v);  // grows once to the widest level (Reserve)
  for (std::size_t i = 0; i < frontier.size(); ++i) {
    const int32_t depth = tree.node(frontier[i]).depth;  // its children are at depth + 1
    float* out = level_out_.data() + i * v;
    if (depth <= masks_) {
      std::copy_n(depth_logits_.data() + static_cast<std::size_t>(depth) * v, v, out);
    } else {
      std::fill_n(out, v, -std::numeric_limits<float>::infinity());
    }
  }
  return std::span<const float>(level_out_).first(frontier.size() * v);
}

void FeatureDrafter::Commit(const TokenTree& tree, std::span<const int32_t> accepted,
                            int32_t next_token) {
  // The root's row was built from the target's feature and stays; the tree's rows read the
  // drafter's own guesses and go. The accepted tokens and the next one are fed again at the next
  // step over the features the target computed for them.
  if (root_slot_ >= 0) {
    model_.cache(seq_).Compact(root_slot_ + 1, {});
    root_slot_ = -1;
  }
  const auto n_ctx = static_cast<int32_t>(tokens_.size());
  GROVE_CHECK(root_position_ + static_cast<int32_t>(accepted.size()) + 1 < n_ctx,
              "feature drafter: commit past the context");
  int32_t p = root_position_;
  for (int32_t node : accepted) tokens_[static_cast<std::size_t>(++p)] = tree.node(node).token;
  tokens_[static_cast<std::size_t>(++p)] = next_token;
  root_position_ = p;
  std::fill(slot_of_node_.begin(), slot_of_node_.end(), -1);
}

void FeatureDrafter::Reserve(int32_t max_frontier, int32_t max_tree_nodes) {
  GROVE_CHECK(max_frontier <= model_.max_batch(), "feature drafter: a level of ", max_frontier,
              " nodes exceeds the batch of ", model_.max_batch());
  slot_of_node_.reserve(static_cast<std::size_t>(max_tree_nodes));
  if (masks_ > 0) level_out_.reserve(static_cast<std::size_t>(max_frontier) * n_vocab());
  node_hidden_.reserve(static_cast<std::size_t>(max_tree_nodes) * n_embd_);
}

bool FeatureDrafter::HasRoomFor(int32_t fed_nodes) const {
  const int64_t pending = root_position_ + 1 - fed_until_ + masks_;
  return static_cast<int64_t>(model_.cache(seq_).length()) + pending + fed_nodes <= model_.n_ctx();
}

}  // namespace grove
