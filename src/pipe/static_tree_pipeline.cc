// STPP (pipedec.h): static-tree speculation verified in one pass through the pipeline's stages.
// Per iteration the draft rank fills the static tree and sends it to every stage; the stages pass
// it on in turn; the last verifies it with the session's Verifier (greedy or target-sample) and
// sends the tokens it emitted (and the tree nodes they took) to every rank, whose units keep the
// root and that path.
#include <algorithm>
#include <optional>

#include "base/error.h"
#include "base/timer.h"
#include "model/model.h"
#include "pipe/pipedec.h"
#include "pipe/pipeline_stages.h"
#include "speculate/model_drafter.h"
#include "speculate/tree_builder.h"
#include "speculate/tree_plan.h"
#include "speculate/verify.h"
#include "tokenize/tokenizer.h"

namespace grove {
namespace {

// A tree as a message: per node its token and parent, in node order.
PipeMessage TreeMessage(const TokenTree& tree) {
  PipeMessage m;
  for (const TreeNode& node : tree.nodes()) {
    m.ints.push_back(node.token);
    m.ints.push_back(node.parent);
  }
  return m;
}

void ReadTree(const PipeMessage& m, TokenTree& tree) {
  tree.Clear();
  for (std::size_t i = 0; i + 1 < m.ints.size(); i += 2) tree.AddChild(m.ints[i + 1], m.ints[i], 0);
}

}  // namespace

TokenTree StaticPipelineTree(const PipelineOptions& o) {
  const TreePlan plan = ParseTreePlan(o.static_tree, {.max_tokens = kDefaultMaxBatch});
  if (!plan.is_static() || plan.is_auto() || plan.shape.empty()) {
    Fail("stpp: '", o.static_tree, "' is not a static tree");
  }
  return plan.shape;
}

PipelineResult StaticTreePipelineRank(PipeTransport& transport,
                                      const std::shared_ptr<const ModelParameters>& target,
                                      const std::shared_ptr<const ModelParameters>& draft,
                                      std::span<const int32_t> prompt, const PipelineOptions& o) {
  const TokenTree shape = StaticPipelineTree(o);
  int32_t n_ctx = 0;
  CheckPipelineRun(*target, prompt, o, shape.size() + 1, &n_ctx);
  Sampler sampler(o.sampling);
  PipelineRank unit(transport, target, draft, prompt, o, n_ctx, sampler);
  unit.StartDecodeClock();
  PipeTransport& net = unit.transport();
  const Tokenizer* tokenizer = target->tokenizer();
  const int32_t k = unit.stage_index();
  const int32_t d = unit.n_stages();

  PipelineResult result;
  result.groups.assign(static_cast<std::size_t>(d), 1);
  result.tokens.push_back(unit.first_token());
  // The draft rank: the drafter (vocabularies were checked against the target's parameters, so
  // the draft stands for itself in ModelDrafter's check) and the tree builder.
  std::optional<ModelDrafter> drafter;
  const TreeBuilder builder(ChildDraw::kDeterministic, o.sampling);
  DraftState state = builder.NewState(draft->config().n_vocab);
  const CounterRng rng(o.sampling.seed);
  if (k < 0) {
    drafter.emplace(unit.draft(), unit.draft());
    std::vector<int32_t> context(prompt.begin(), prompt.end());
    context.push_back(unit.first_token());
    drafter->Begin(context);
  }
  TokenTree received;
  Batch batch;
  std::vector<int32_t> emitted, kept;
  const auto n_vocab = static_cast<std::size_t>(target->config().n_vocab);
  const bool greedy = o.sampling.greedy();
  const VerifyRule rule = greedy ? VerifyRule::kGreedy : VerifyRule::kTargetSample;
  Verifier verifier;
  VerifyResult verified;
  std::vector<float> probs(n_vocab);
  auto position = static_cast<int32_t>(prompt.size());  // the root's
  while (!PipelineStops(result, o, tokenizer)) {
    if (drafter) {
      const Timer timer;
      builder.BuildShape(shape, *drafter, rng, o.sequence, position, state);
      unit.AddForwardSeconds(timer.Seconds());
    }
    ReadTree(Broadcast(net, kDraftRank, kPipeTreeTag,
                       drafter ? TreeMessage(state.tree()) : PipeMessage{}),
             received);
    const TokenTree& tree = drafter ? state.tree() : received;
    PipelineTimestep draft_step;
    draft_step.stage_rows.assign(static_cast<std::size_t>(d), 0);
    draft_step.draft_rows = tree.size();
    draft_step.draft_levels = tree.depth();
    result.log.push_back(std::move(draft_step));
    ++result.timesteps;
    batch.Clear();
    batch.Add(result.tokens.back(), position, 0, -1, true);
    tree.AppendToBatch(batch, position + 1, 0, 0);
    const int32_t first_slot = k >= 0 ? unit.stage().model()->cache(0).length() : 0;
    const std::span<const float> out = unit.Pass(batch, result);
    // The last stage verifies the tree as a session does, with the target's own draws (greedy, or
    // target-sample: every drawn token is plain sampling's): row 0 is the root's, row v + 1 node
    // v's. It sends the tokens, cut after the first that ends the generation, then the nodes they
    // took (one fewer: a drawn token ends every walk).
    emitted.clear();
    if (!out.empty()) {
      auto target_row = [&](int32_t r) -> std::span<const float> {
        const std::span<const float> row =
            out.subspan(static_cast<std::size_t>(r) * n_vocab, n_vocab);
        if (greedy) return row;
        sampler.Distribution(row, probs);
        return probs;
      };
      verifier.Verify(rule, tree, target_row, static_cast<int32_t>(n_vocab), {}, rng, o.sequence,
                      position, verified);
      std::size_t n_tokens = 0;
      for (const std::size_t n_path = verified.accepted.size(); n_tokens <= n_path;) {
        const int32_t x =
            n_tokens < n_path ? tree.node(verified.accepted[n_tokens]).token : verified.next_token;
        emitted.push_back(x);
        ++n_tokens;
        if (PipelineStops(result.tokens.size() + n_tokens, x, o, tokenizer)) break;
      }
      emitted.insert(emitted.end(), verified.accepted.begin(),
                     verified.accepted.begin() + static_cast<std::ptrdiff_t>(n_tokens - 1));
    }
    emitted = unit.ShareTokens(std::move(emitted));
    // emitted: the tokens, then the path's nodes, one fewer (a token ends every walk).
    const auto n_path = static_cast<std::size_t>(emitted.size() / 2);
    const std::size_t n_tokens = emitted.size() - n_path;
    result.tokens.insert(result.tokens.end(), emitted.begin(),
                         emitted.begin() + static_cast<std::ptrdiff_t>(n_tokens));
    const std::span<const int32_t> accepted(emitted.data() + n_tokens, n_path);
    if (!accepted.empty()) ++result.hits;
    // Every stage keeps the root and the accepted path; the draft commits them.
    if (k >= 0) {
      kept.assign(1, first_slot);
      for (int32_t v : accepted) kept.push_back(first_slot + 1 + v);
      unit.stage().Compact(first_slot, kept);
    } else {
      drafter->Commit(state.drafted_tree(), accepted, result.tokens.back());
    }
    position += 1 + static_cast<int32_t>(accepted.size());
  }
  unit.StopDecodeClock(result);
  return result;
}

}  // namespace grove
