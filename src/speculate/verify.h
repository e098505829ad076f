// Verification rules of tree speculative decoding: given a draft token tree, the target's
// next-token distribution after the root and after every node, and (for the rejection rules) the
// draft distributions the children were drawn from, decide which root-to-node path the target
// accepts and sample the token that follows it. Every rule is lossless: the emitted tokens (the
// accepted path, then next_token) have exactly the distribution plain sampling from the target
// would give, provided the tree was drawn the way the rule assumes (see CheckLossless).
//
// Rules (papers in ../shared/papers; section numbers are Sequoia's, arXiv 2402.12374v3):
//   greedy         temperature 0: follow the child equal to the target argmax (§2.2, "top-k").
//   chain          Leviathan et al. rejection sampling on a chain (Sequoia App. D, Algorithm 3).
//   specinfer      SpecInfer multi-round speculative sampling; children drawn i.i.d. WITH
//                  replacement from the draft (§2.2; Algorithm 2 without the blue lines 10-16).
//   sequoia        children drawn WITHOUT replacement; the draft is updated after each rejection,
//                  with the uniform fallback once its support is used up (§3.2.1, Algorithm 2).
//   target-sample  sample y from the target at the node and follow the child equal to y (§2.2,
//                  "naive sampling"): lossless for any tree, deterministic top-k trees included.
//
// Randomness (contract 4): every uniform number comes from CounterRng(seed) with counter
// (sequence, position, draw), where position is the absolute position of the token being decided:
// at a node of depth d (the root has depth 0) that is root_position + d + 1. Draw indices at one
// position:
//   0      the emitted sample (target row, or residual after rejections). For a leaf, or for
//          target-sample, this is exactly the draw plain sampling (Sampler::Sample) makes there, so
//          with the same seed target-sample reproduces plain sampling token for token.
//   1 + i  the accept coin of child i (rank i) of the node.
// Children drawn from the draft must use draws >= kDraftDrawBase (see DrawChildren): a coin that
// also chose the token it tests is not independent of it, and the rule would no longer be lossless.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/function_ref.h"
#include "sample/rng.h"
#include "speculate/token_tree.h"

namespace grove {

enum class VerifyRule { kGreedy, kChain, kSpecInfer, kSequoia, kTargetSample };

// How the tree builder chose each node's children from the draft distribution of that node.
enum class ChildDraw {
  kDeterministic,       // top-k of the draft, or a fixed shape filled deterministically
  kWithReplacement,     // i.i.d. draws from the draft (SpecInfer, SpecTr, naive sampling)
  kWithoutReplacement,  // Sequoia: each draw from the draft with earlier siblings removed
};

// First draw index a builder may use when it draws children with the verifier's CounterRng.
inline constexpr uint32_t kDraftDrawBase = 0x80000000u;

// "greedy", "chain", "specinfer", "sequoia", "target-sample".
std::string_view VerifyRuleName(VerifyRule rule);
// Throws grove::Error listing the known names when `name` is not one of them.
VerifyRule ParseVerifyRule(std::string_view name);
// "deterministic", "with-replacement", "without-replacement".
std::string_view ChildDrawName(ChildDraw draw);
ChildDraw ParseChildDraw(std::string_view name);

// The rule grove uses when none is named: greedy at temperature 0; otherwise Sequoia's, or
// target-sample matching when the children are top-k guesses (prompt lookup, OPT-Tree), the one
// sampling rule that is lossless for such trees.
VerifyRule DefaultVerifyRule(bool greedy_sampling, bool deterministic_children);
// How a builder must draw children for `rule` to be lossless at temperature > 0.
ChildDraw RequiredChildDraw(VerifyRule rule);

// Throws grove::Error explaining why verifying `tree` (its shape: token values are not looked at)
// with `rule`, children drawn as `draw`, would not be lossless. greedy_sampling is true when the
// target distributions are one-hot (temperature 0); then every rejection rule reduces to exact
// argmax matching and any draw mode is lossless.
void CheckLossless(VerifyRule rule, ChildDraw draw, const TokenTree& tree, bool greedy_sampling);

// Dense probability rows over the vocabulary, row-major: (n_rows, n_vocab). Not owning.
struct ProbRows {
  const float* data = nullptr;
  int32_t n_vocab = 0;
  int32_t n_rows = 0;

  std::span<const float> Row(int32_t i) const {
    return {data + static_cast<size_t>(i) * static_cast<size_t>(n_vocab),
            static_cast<size_t>(n_vocab)};
  }
};

struct VerifyResult {
  std::vector<int32_t> accepted;  // accepted node indices, root to leaf
  int32_t next_token = -1;        // the token after the last accepted node (the "bonus" token)
};

// Holds the scratch the rejection rules need (residual and current draft, one value per vocabulary
// entry) so that verification in the decoding loop does not allocate once the buffers have grown.
// One Verifier per thread; Verify is a pure function of its arguments.
class Verifier {
 public:
  // target: rows processed by Sampler::Distribution (temperature, top-k, top-p, min-p applied as in
  // plain sampling); row 0 follows the root, row i + 1 follows node i; at least tree.size() + 1
  // rows. draft: the same layout for the draft distributions each node's children were drawn from;
  // read by chain, specinfer and sequoia only (pass {} otherwise). Throws grove::Error when the
  // rows do not match the tree (too few rows, different vocabularies, a token outside the
  // vocabulary) or the chain rule meets a node with two children; `result` is then unspecified.
  void Verify(VerifyRule rule, const TokenTree& tree, const ProbRows& target, const ProbRows& draft,
              const CounterRng& rng, uint64_t sequence, int64_t root_position,
              VerifyResult& result);

  // The same walk with the target rows computed on demand: target_row(r) returns row r (r = 0 after
  // the root, v + 1 after node v) of n_vocab entries, valid until the next call. The walk asks only
  // for the rows of the nodes it reaches: the root and the accepted path, each once, in that order.
  // So a caller turns only those rows of logits into distributions. For the greedy rule a row of
  // logits serves as well (the argmax is the same). The caller guarantees tree.size() + 1 rows.
  using TargetRowFn = FunctionRef<std::span<const float>(int32_t row)>;
  void Verify(VerifyRule rule, const TokenTree& tree, TargetRowFn target_row, int32_t n_vocab,
              const ProbRows& draft, const CounterRng& rng, uint64_t sequence,
              int64_t root_position, VerifyResult& result);

 private:
  // One node of the rejection rules: returns the accepted child's node index, or -1 with
  // next_token set to the sample from the residual.
  int32_t RejectAtNode(VerifyRule rule, const TokenTree& tree, int32_t node,
                       std::span<const float> p, std::span<const float> q, const CounterRng& rng,
                       uint64_t sequence, int64_t position, int32_t& next_token);
  void LoadSequoiaDraft(std::span<const float> q);

  std::vector<double> residual_;  // (n_vocab) R: the target less what rejected children covered
  std::vector<double> draft_;     // (n_vocab) D: the distribution the current child was drawn from
  std::vector<uint8_t> drawn_;    // (n_vocab) Sequoia: 1 for siblings already drawn and rejected
};

// Convenience for callers without a Verifier (allocates its scratch per call).
VerifyResult Verify(VerifyRule rule, const TokenTree& tree, const ProbRows& target,
                    const ProbRows& draft, const CounterRng& rng, uint64_t sequence,
                    int64_t root_position);

// Draws k children tokens from the draft row q the way `draw` says, at the position of the tokens
// being drawn, with draws kDraftDrawBase + i. kWithoutReplacement follows Sequoia Algorithm 2
// exactly: each draw from q with earlier draws removed, then uniform over the tokens not yet drawn
// once q's support is used up (so k may be up to the vocabulary size). kDeterministic gives the k
// most probable tokens (lowest id first on ties), zero-probability ones included when k asks for
// them. (The tree builder ranks draft rows with TopTokens directly, leaving tokens without mass
// out; DrawChildren serves callers that hold probability rows, such as the verifier's tests.)
// Throws grove::Error if k exceeds the vocabulary (without replacement, deterministic) or q has no
// mass (with replacement). The builders of sampled trees call this so the verifier's replay of the
// draft matches the draw.
void DrawChildren(std::span<const float> q, int32_t k, ChildDraw draw, const CounterRng& rng,
                  uint64_t sequence, int64_t position, std::vector<int32_t>& tokens);

}  // namespace grove
