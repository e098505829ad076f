// STPP (pipedec.h): static-tree speculation verified in one pass through the pipeline's stages.
#include <algorithm>

#include "base/error.h"
#include "model/model.h"
#include "model/tokenizer.h"
#include "pipe/pipedec.h"
#include "pipe/pipeline_stages.h"
#include "speculate/model_drafter.h"
#include "speculate/tree_builder.h"
#include "speculate/tree_plan.h"

namespace grove {

TokenTree StaticPipelineTree(const PipelineOptions& o) {
  const TreePlan plan = ParseTreePlan(o.static_tree, {.max_tokens = kDefaultMaxBatch});
  if (!plan.is_static() || plan.is_auto() || plan.shape.empty()) {
    Fail("stpp: '", o.static_tree, "' is not a static tree");
  }
  return plan.shape;
}

PipelineResult RunStaticTreePipeline(std::shared_ptr<const ModelParameters> target,
                                     std::shared_ptr<const ModelParameters> draft,
                                     std::span<const int32_t> prompt, const PipelineOptions& o) {
  const TokenTree shape = StaticPipelineTree(o);
  int32_t n_ctx = 0;
  CheckPipelineRun(*target, prompt, o, shape.size() + 1, &n_ctx);
  Sampler sampler(o.sampling);
  PipelineStages pipe(target, prompt, o, n_ctx, sampler);
  auto draft_model = Model::Create(std::move(draft), {.pool = pipe.pool(), .n_ctx = n_ctx});
  ModelDrafter drafter(*draft_model, *pipe.stage(0).model());
  const TreeBuilder builder(ChildDraw::kDeterministic, o.sampling);
  DraftState state = builder.NewState(draft_model->config().n_vocab);
  const CounterRng rng(o.sampling.seed);
  const Tokenizer* tokenizer = target->tokenizer();
  const auto d = static_cast<int32_t>(pipe.size());

  PipelineResult result;
  result.tokens.push_back(pipe.first_token());
  std::vector<int32_t> context(prompt.begin(), prompt.end());
  context.push_back(pipe.first_token());
  drafter.Begin(context);
  Batch batch;
  std::vector<int32_t> accepted, kept;
  auto position = static_cast<int32_t>(prompt.size());  // the root's
  while (!PipelineStops(result, o, tokenizer)) {
    builder.BuildShape(shape, drafter, rng, o.sequence, position, state);
    const TokenTree& tree = state.tree();
    PipelineTimestep draft_step;
    draft_step.stage_rows.assign(static_cast<std::size_t>(d), 0);
    draft_step.draft_rows = tree.size();
    draft_step.draft_levels = tree.depth();
    result.log.push_back(std::move(draft_step));
    ++result.timesteps;
    batch.Clear();
    batch.Add(result.tokens.back(), position, 0, -1, true);
    tree.AppendToBatch(batch, position + 1, 0, 0);
    const int32_t first_slot = pipe.stage(0).model()->cache(0).length();
    const std::span<const float> out = pipe.Pass(batch, result);
    // Walk the tree with the target's own draws: row 0 is the root's, row v + 1 node v's.
    const auto n_vocab = static_cast<std::size_t>(target->config().n_vocab);
    accepted.clear();
    int32_t row = 0;
    for (;;) {
      const int32_t x =
          sampler.Sample(out.subspan(static_cast<std::size_t>(row) * n_vocab, n_vocab), o.sequence,
                         position + 1 + static_cast<int32_t>(accepted.size()));
      result.tokens.push_back(x);
      if (PipelineStops(result, o, tokenizer)) break;
      int32_t next = -1;
      for (int32_t child : tree.children(row - 1)) {
        if (tree.node(child).token == x) next = child;
      }
      if (next < 0) break;
      accepted.push_back(next);
      row = next + 1;
    }
    if (!accepted.empty()) ++result.hits;
    // Every stage keeps the root and the accepted path; the draft commits them.
    kept.assign(1, first_slot);
    for (int32_t v : accepted) kept.push_back(first_slot + 1 + v);
    for (int32_t k = 0; k < d; ++k) pipe.stage(k).Compact(first_slot, kept);
    drafter.Commit(state.drafted_tree(), accepted, result.tokens.back());
    position += 1 + static_cast<int32_t>(accepted.size());
  }
  return result;
}

}  // namespace grove
