// What proposes draft tokens: a small model, or a cheap guesser such as prompt lookup. Tree builders
// (speculate/tree_builder.h) ask a drafter for next-token distributions one tree level at a time; the
// decoding loop tells it which tokens were committed.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "speculate/token_tree.h"

namespace grove {

class Drafter {
 public:
  virtual ~Drafter() = default;

  virtual std::string_view name() const = 0;
  virtual int32_t n_vocab() const = 0;
  // True when the rows are guesses (one-hot or empty) rather than a distribution the children are
  // sampled from: only verification rules that are lossless for any tree may then be used.
  virtual bool deterministic() const = 0;

  // Starts a sequence whose committed tokens are `context`; the last one is the root of the first
  // tree (it is not in the target's KV cache yet either).
  virtual void Begin(std::span<const int32_t> context) = 0;

  // Writes, for each frontier node of `tree` (-1 is the root), the distribution of the token that
  // follows it into rows[i * n_vocab(), (i + 1) * n_vocab()). A step starts with the frontier {-1};
  // later calls pass one level at a time, in order, each node's parent expanded before it. `tree`
  // only grows between calls of one step (new nodes are appended).
  virtual void Expand(const TokenTree& tree, std::span<const int32_t> frontier, std::span<float> rows) = 0;

  // Ends a step: the tokens the target accepted along one root-to-node path, then the next token,
  // which becomes the root of the next step.
  virtual void Commit(std::span<const int32_t> accepted_tokens, int32_t next_token) = 0;
};

}  // namespace grove
