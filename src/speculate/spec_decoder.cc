#include "speculate/spec_decoder.h"

#include <algorithm>

#include "base/error.h"
#include "base/timer.h"
#include "model/tokenizer.h"

namespace grove {
namespace {

bool IsStop(const Model& model, const SpecOptions& o, int32_t token) {
  return o.stop_at_eog && model.tokenizer() && model.tokenizer()->IsEndOfGeneration(token);
}

}  // namespace

SpecDecoder::SpecDecoder(Model& target, Drafter& drafter, TreeBuilder& builder, const SpecOptions& options)
    : target_(target),
      drafter_(drafter),
      builder_(builder),
      options_(options),
      sampler_(options.sampling),
      rng_(options.sampling.seed) {
  if (drafter.n_vocab() != target.config().n_vocab) {
    Fail("drafter '", drafter.name(), "' has ", drafter.n_vocab(), " tokens, the target ", target.config().n_vocab);
  }
  if (builder.spec().is_static()) {
    CheckLossless(options.rule, builder.draw(), builder.spec().shape, options.sampling.greedy());
  } else if (!options.sampling.greedy() && options.rule != VerifyRule::kTargetSample) {
    Fail("tree spec '", builder.spec().text, "' picks the top-k draft tokens (OPT-Tree); at temperature > 0 only "
         "--verify target-sample is lossless for such trees");
  }
  if (drafter.deterministic() && !options.sampling.greedy() && options.rule != VerifyRule::kTargetSample &&
      options.rule != VerifyRule::kGreedy) {
    Fail("drafter '", drafter.name(), "' guesses tokens instead of sampling them; at temperature > 0 only "
         "--verify target-sample is lossless with it");
  }
  if (options.rule == VerifyRule::kGreedy && !options.sampling.greedy()) {
    Fail("--verify greedy needs temperature 0 (it would silently change the output distribution)");
  }
  const int32_t max_rows = builder.spec().max_nodes() + 1;
  if (max_rows > target.max_batch()) {
    Fail("tree spec '", builder.spec().text, "' verifies up to ", max_rows, " tokens, more than the target's batch of ",
         target.max_batch());
  }
  target_rows_.resize(static_cast<std::size_t>(max_rows) * target.config().n_vocab);
  batch_.tokens.reserve(std::max(max_rows, target.max_batch()));
}

std::vector<int32_t> SpecDecoder::Generate(std::span<const int32_t> prompt,
                                           const std::function<bool(int32_t)>& on_token) {
  if (prompt.empty()) Fail("speculative decoding needs at least one prompt token");
  const int32_t nv = target_.config().n_vocab;
  const int32_t max_nodes = builder_.spec().max_nodes();
  stats_ = SpecStats{};
  stats_.prompt_tokens = static_cast<int64_t>(prompt.size());
  if (static_cast<int64_t>(prompt.size()) + max_nodes + 1 > target_.n_ctx()) {
    Fail("the prompt is ", prompt.size(), " tokens; with a tree of up to ", max_nodes,
         " nodes it does not fit the context of ", target_.n_ctx());
  }

  Timer prefill;
  KvCache& cache = target_.cache(0);
  cache.Clear();
  target_.ForwardChain(prompt.first(prompt.size() - 1), 0, 0, batch_, /*want_logits=*/false);
  drafter_.Begin(prompt);
  stats_.prefill_seconds = prefill.Seconds();

  std::vector<int32_t> out;
  int32_t root = prompt.back();
  int32_t root_position = static_cast<int32_t>(prompt.size()) - 1;
  bool done = false;
  Timer total;
  while (!done && static_cast<int32_t>(out.size()) < options_.n_predict) {
    if (root_position + 1 + max_nodes >= target_.n_ctx()) break;  // context full
    Timer draft;
    builder_.Build(drafter_, options_.sequence, root_position);
    stats_.draft_seconds += draft.Seconds();

    Timer verify;
    const TokenTree& tree = builder_.tree();
    batch_.Clear();
    batch_.Add(root, root_position, 0, -1, true);
    tree.AppendToBatch(batch_, root_position + 1, 0, 0);
    std::span<const float> logits = target_.Forward(batch_);
    const int32_t n_rows = tree.size() + 1;
    for (int32_t r = 0; r < n_rows; ++r) {
      sampler_.Distribution(logits.subspan(static_cast<std::size_t>(r) * nv, nv),
                            std::span<float>(target_rows_).subspan(static_cast<std::size_t>(r) * nv, nv));
    }
    verifier_.Verify(options_.rule, tree, ProbRows{target_rows_.data(), nv, n_rows}, builder_.draft_rows(), rng_,
                     options_.sequence, root_position, result_);
    stats_.verify_seconds += verify.Seconds();

    // Commit: the root stays at its slot, the accepted nodes move down behind it.
    kept_slots_.clear();
    accepted_tokens_.clear();
    for (int32_t node : result_.accepted) {
      kept_slots_.push_back(root_position + 1 + node);
      accepted_tokens_.push_back(tree.node(node).token);
    }
    cache.Compact(root_position + 1, kept_slots_);
    drafter_.Commit(accepted_tokens_, result_.next_token);

    ++stats_.steps;
    stats_.tree_nodes += tree.size();
    const std::size_t depth = static_cast<std::size_t>(tree.depth());
    if (stats_.reached_depth.size() < depth) {
      stats_.reached_depth.resize(depth, 0);
      stats_.accepted_at_depth.resize(depth, 0);
    }
    for (std::size_t d = 0; d < depth; ++d) ++stats_.reached_depth[d];
    for (std::size_t d = 0; d < result_.accepted.size(); ++d) ++stats_.accepted_at_depth[d];
    const std::size_t rank = result_.accepted.empty() ? 0 : tree.rank(result_.accepted[0]) + 1;
    if (stats_.first_rank.size() <= rank) stats_.first_rank.resize(rank + 1, 0);
    ++stats_.first_rank[rank];

    accepted_tokens_.push_back(result_.next_token);
    for (int32_t token : accepted_tokens_) {
      if (done || static_cast<int32_t>(out.size()) >= options_.n_predict) break;
      out.push_back(token);
      ++stats_.generated;
      if (IsStop(target_, options_, token) || (on_token && !on_token(token))) done = true;
    }
    root = result_.next_token;
    root_position += static_cast<int32_t>(result_.accepted.size()) + 1;
  }
  stats_.total_seconds = total.Seconds();
  return out;
}

std::vector<int32_t> GeneratePlain(Model& target, std::span<const int32_t> prompt, const SpecOptions& options,
                                   const std::function<bool(int32_t)>& on_token, PlainTiming* timing) {
  if (prompt.empty()) Fail("generation needs at least one prompt token");
  if (static_cast<int64_t>(prompt.size()) >= target.n_ctx()) {
    Fail("the prompt is ", prompt.size(), " tokens but the context holds ", target.n_ctx());
  }
  Sampler sampler(options.sampling);
  Batch batch;
  target.cache(0).Clear();
  Timer prefill;
  std::span<const float> logits = target.ForwardChain(prompt, 0, 0, batch, /*want_logits=*/true);
  if (timing) timing->prefill_seconds = prefill.Seconds();
  std::vector<int32_t> out;
  int32_t position = static_cast<int32_t>(prompt.size());
  Timer timer;
  while (static_cast<int32_t>(out.size()) < options.n_predict) {
    const int32_t token = sampler.Sample(logits, options.sequence, position);
    out.push_back(token);
    if (IsStop(target, options, token) || (on_token && !on_token(token))) break;
    if (position + 1 >= target.n_ctx() || static_cast<int32_t>(out.size()) == options.n_predict) break;
    batch.Clear();
    batch.Add(token, position, 0, -1, true);
    logits = target.Forward(batch);
    ++position;
  }
  if (timing) timing->generation_seconds = timer.Seconds();
  return out;
}

}  // namespace grove
