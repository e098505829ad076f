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

namespace {

// One rank of an STPP run (see the top of the file).
class StaticTreeRun {
 public:
  StaticTreeRun(PipeTransport& transport, const std::shared_ptr<const ModelParameters>& target,
                const std::shared_ptr<const ModelParameters>& draft,
                std::span<const int32_t> prompt, const PipelineOptions& o, TokenTree shape,
                int32_t n_ctx)
      : o_(o),
        shape_(std::move(shape)),
        sampler_(o.sampling),
        unit_(transport, target, draft, prompt, o, n_ctx, sampler_),
        tokenizer_(target->tokenizer()),
        k_(unit_.stage_index()),
        builder_(ChildDraw::kDeterministic, o.sampling),
        state_(builder_.NewState(draft->config().n_vocab)),
        rng_(o.sampling.seed),
        n_vocab_(static_cast<std::size_t>(target->config().n_vocab)),
        greedy_(o.sampling.greedy()),
        probs_(n_vocab_) {}

  PipelineResult Run(std::span<const int32_t> prompt) {
    unit_.StartDecodeClock();
    result_.groups.assign(static_cast<std::size_t>(unit_.n_stages()), 1);
    result_.tokens.push_back(unit_.first_token());
    // The draft rank: the drafter (vocabularies were checked against the target's parameters, so
    // the draft stands for itself in ModelDrafter's check) and the tree builder.
    if (k_ < 0) {
      drafter_.emplace(unit_.draft(), unit_.draft());
      std::vector<int32_t> context(prompt.begin(), prompt.end());
      context.push_back(unit_.first_token());
      drafter_->Begin(context);
    }
    auto position = static_cast<int32_t>(prompt.size());  // the root's
    while (!PipelineStops(result_, o_, tokenizer_)) {
      const TokenTree& tree = DraftTree(position);
      batch_.Clear();
      batch_.Add(result_.tokens.back(), position, 0, -1, true);
      tree.AppendToBatch(batch_, position + 1, 0, 0);
      const int32_t first_slot = k_ >= 0 ? unit_.stage().model()->cache(0).length() : 0;
      const std::span<const float> out = unit_.Pass(batch_, result_);
      emitted_.clear();
      if (!out.empty()) VerifyTree(tree, out, position);
      const std::span<const int32_t> accepted = ShareEmitted();
      Commit(accepted, first_slot);
      position += 1 + static_cast<int32_t>(accepted.size());
    }
    unit_.StopDecodeClock(result_);
    return std::move(result_);
  }

 private:
  // The draft rank fills the static tree and sends it to every rank; the timestep is logged.
  const TokenTree& DraftTree(int32_t position) {
    if (drafter_) {
      const Timer timer;
      builder_.BuildShape(shape_, *drafter_, rng_, o_.sequence, position, state_);
      unit_.AddForwardSeconds(timer.Seconds());
    }
    ReadTree(Broadcast(unit_.transport(), kDraftRank, kPipeTreeTag,
                       drafter_ ? TreeMessage(state_.tree()) : PipeMessage{}),
             received_);
    const TokenTree& tree = drafter_ ? state_.tree() : received_;
    PipelineTimestep draft_step;
    draft_step.stage_rows.assign(static_cast<std::size_t>(unit_.n_stages()), 0);
    draft_step.draft_rows = tree.size();
    draft_step.draft_levels = tree.depth();
    result_.log.push_back(std::move(draft_step));
    ++result_.timesteps;
    return tree;
  }

  // The last stage verifies the tree as a session does, with the target's own draws (greedy, or
  // target-sample: every drawn token is plain sampling's): row 0 is the root's, row v + 1 node
  // v's. emitted_: the tokens, cut after the first that ends the generation, then the nodes they
  // took (one fewer: a drawn token ends every walk).
  void VerifyTree(const TokenTree& tree, std::span<const float> out, int32_t position) {
    auto target_row = [&](int32_t r) -> std::span<const float> {
      const std::span<const float> row =
          out.subspan(static_cast<std::size_t>(r) * n_vocab_, n_vocab_);
      if (greedy_) return row;
      sampler_.Distribution(row, probs_);
      return probs_;
    };
    const VerifyRule rule = greedy_ ? VerifyRule::kGreedy : VerifyRule::kTargetSample;
    verifier_.Verify(rule, tree, target_row, static_cast<int32_t>(n_vocab_), {}, rng_, o_.sequence,
                     position, verified_);
    std::size_t n_tokens = 0;
    for (const std::size_t n_path = verified_.accepted.size(); n_tokens <= n_path;) {
      const int32_t x =
          n_tokens < n_path ? tree.node(verified_.accepted[n_tokens]).token : verified_.next_token;
      emitted_.push_back(x);
      ++n_tokens;
      if (PipelineStops(result_.tokens.size() + n_tokens, x, o_, tokenizer_)) break;
    }
    emitted_.insert(emitted_.end(), verified_.accepted.begin(),
                    verified_.accepted.begin() + static_cast<std::ptrdiff_t>(n_tokens - 1));
  }

  // The last stage's tokens and path to every rank: the tokens join the result; the path's nodes
  // are returned.
  std::span<const int32_t> ShareEmitted() {
    emitted_ = unit_.ShareTokens(std::move(emitted_));
    const auto n_path = static_cast<std::size_t>(emitted_.size() / 2);
    const std::size_t n_tokens = emitted_.size() - n_path;
    result_.tokens.insert(result_.tokens.end(), emitted_.begin(),
                          emitted_.begin() + static_cast<std::ptrdiff_t>(n_tokens));
    const std::span<const int32_t> accepted(emitted_.data() + n_tokens, n_path);
    if (!accepted.empty()) ++result_.hits;
    return accepted;
  }

  // Every stage keeps the root and the accepted path; the draft commits them.
  void Commit(std::span<const int32_t> accepted, int32_t first_slot) {
    if (k_ >= 0) {
      kept_.assign(1, first_slot);
      for (int32_t v : accepted) kept_.push_back(first_slot + 1 + v);
      unit_.stage().Compact(first_slot, kept_);
    } else {
      drafter_->Commit(state_.drafted_tree(), accepted, result_.tokens.back());
    }
  }

  const PipelineOptions& o_;
  const TokenTree shape_;
  Sampler sampler_;
  PipelineRank unit_;
  const Tokenizer* tokenizer_;
  const int32_t k_;  // -1: the draft
  std::optional<ModelDrafter> drafter_;
  const TreeBuilder builder_;
  DraftState state_;
  const CounterRng rng_;
  const std::size_t n_vocab_;
  const bool greedy_;
  PipelineResult result_;
  TokenTree received_;
  Batch batch_;
  std::vector<int32_t> emitted_, kept_;
  Verifier verifier_;
  VerifyResult verified_;
  std::vector<float> probs_;
};

}  // namespace

PipelineResult StaticTreePipelineRank(PipeTransport& transport,
                                      const std::shared_ptr<const ModelParameters>& target,
                                      const std::shared_ptr<const ModelParameters>& draft,
                                      std::span<const int32_t> prompt, const PipelineOptions& o) {
  TokenTree shape = StaticPipelineTree(o);
  int32_t n_ctx = 0;
  CheckPipelineRun(*target, prompt, o, shape.size() + 1, &n_ctx);
  return StaticTreeRun(transport, target, draft, prompt, o, std::move(shape), n_ctx).Run(prompt);
}

}  // namespace grove
