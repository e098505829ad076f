#include "pipe/pipedec.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>

#include "base/error.h"
#include "base/thread_pool.h"
#include "model/model.h"
#include "model/tokenizer.h"
#include "pipe/pipeline_stages.h"
#include "pipe/prediction_tree.h"
#include "pipe/tree_cache.h"

namespace grove {
namespace {

// The draft unit (the paper's S): the whole draft model, processing the same tree layer as the
// first stage and keeping each node's top-c candidates until the node is pruned.
class TreeDraft {
 public:
  TreeDraft(std::shared_ptr<const ModelParameters> draft, int32_t children,
            const ModelOptions& options)
      : model_(Model::Create(std::move(draft), options)), children_(children) {}

  void Prefill(std::span<const int32_t> prompt) {
    model_->ForwardChain(prompt, 0, 0, batch_, /*want_logits=*/false);
    tree_.emplace(model_->cache(0), model_->cache(0).length());
  }
  TreeCache& tree() { return *tree_; }
  void RunLayer(const PredictionTree& tree, std::span<const int64_t> nodes) {
    batch_.Clear();
    tree_->AppendLayer(tree, nodes, /*want_logits=*/true, batch_);
    const int32_t first_slot = model_->cache(0).length();
    const std::span<const float> logits = model_->Forward(batch_);
    tree_->Placed(nodes, first_slot);
    const auto n_vocab = static_cast<std::size_t>(model_->config().n_vocab);
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      const std::span<const float> row = logits.subspan(i * n_vocab, n_vocab);
      // log q from the draft's raw softmax (temperature 1): only the ranking matters (§8.3).
      const float max = *std::max_element(row.begin(), row.end());
      double sum = 0.0;
      for (float v : row) sum += std::exp(static_cast<double>(v - max));
      const double log_z = max + std::log(sum);
      TopTokens(row, children_, -std::numeric_limits<float>::infinity(), top_);
      std::vector<LeafCandidate>& out = candidates_[nodes[i]];
      out.clear();
      for (int32_t token : top_) {
        out.push_back({token, static_cast<float>(row[static_cast<std::size_t>(token)] - log_z)});
      }
    }
  }
  // The candidates of every node of `leaves`, or nothing when one has none yet.
  std::optional<std::vector<std::vector<LeafCandidate>>> CandidatesOf(
      std::span<const int64_t> leaves) const {
    std::vector<std::vector<LeafCandidate>> out;
    for (int64_t id : leaves) {
      const auto it = candidates_.find(id);
      if (it == candidates_.end()) return std::nullopt;
      out.push_back(it->second);
    }
    return out;
  }
  void Forget(const PredictionTree& tree) {
    std::erase_if(candidates_, [&](const auto& entry) { return !tree.contains(entry.first); });
  }

 private:
  std::unique_ptr<Model> model_;
  int32_t children_;
  std::optional<TreeCache> tree_;
  std::unordered_map<int64_t, std::vector<LeafCandidate>> candidates_;
  std::vector<int32_t> top_;
  Batch batch_;
};

}  // namespace

int32_t PipeDecTreeTokens(int32_t n_stages, int32_t width) {
  // The first stage holds the most: the root and a layer of at most w per stage after the first.
  return 1 + (n_stages - 1) * width;
}

int32_t PipeDecMaxWidth(const ModelParameters& target, int32_t prompt_tokens, int32_t n_predict,
                        int32_t n_stages) {
  const int64_t room = static_cast<int64_t>(PipelineContextLimit(target)) - prompt_tokens -
                       n_predict - kPipelineSpareTokens - 1;
  return n_stages < 2 ? 0 : static_cast<int32_t>(std::max<int64_t>(0, room / (n_stages - 1)));
}

PipelineResult RunPipeDec(std::shared_ptr<const ModelParameters> target,
                          std::shared_ptr<const ModelParameters> draft,
                          std::span<const int32_t> prompt, const PipelineOptions& o) {
  if (o.stages.size() < 2) Fail("pipedec: needs at least 2 stages, not ", o.stages.size());
  if (o.width < 1 || o.children < 1) {
    Fail("pipedec: tree width ", o.width, " and children ", o.children, " must be >= 1");
  }
  if (o.width > kDefaultMaxBatch) Fail("pipedec: tree width ", o.width, " > ", kDefaultMaxBatch);
  if (draft->config().n_vocab != target->config().n_vocab) {
    Fail("pipedec: the draft has ", draft->config().n_vocab, " tokens but the target has ",
         target->config().n_vocab);
  }
  const auto d = static_cast<int32_t>(o.stages.size());
  int32_t n_ctx = 0;
  CheckPipelineRun(*target, prompt, o, PipeDecTreeTokens(d, o.width), &n_ctx);
  Sampler sampler(o.sampling);
  PipelineStages pipe(target, prompt, o, n_ctx, sampler);
  TreeDraft drafter(draft, o.children, {.pool = pipe.pool(), .n_ctx = n_ctx});
  drafter.Prefill(prompt);
  for (int32_t k = 0; k < pipe.size(); ++k) pipe.stage(k).StartTree();
  const Tokenizer* tokenizer = target->tokenizer();

  PipelineResult result;
  result.tokens.push_back(pipe.first_token());
  if (PipelineStops(result, o, tokenizer)) return result;
  PredictionTree tree;
  tree.Reset(pipe.first_token(), static_cast<int32_t>(prompt.size()));
  // What reaches each stage at the next timestep: tree nodes (of one layer) and, past the first
  // stage, the previous stage's hidden rows for them.
  std::vector<std::vector<int64_t>> in_nodes(static_cast<std::size_t>(d));
  std::vector<std::vector<float>> in_hidden(static_cast<std::size_t>(d));
  in_nodes[0] = {tree.root()};
  std::vector<int64_t> draft_nodes = in_nodes[0];
  std::vector<std::vector<int64_t>> out_nodes(static_cast<std::size_t>(d));
  std::vector<std::vector<float>> out_hidden(static_cast<std::size_t>(d));
  for (bool done = false; !done;) {
    PipelineTimestep step;
    step.stage_rows.assign(static_cast<std::size_t>(d), 0);
    // Compute: the draft and every stage with input, each on its own layer.
    if (!draft_nodes.empty()) {
      drafter.RunLayer(tree, draft_nodes);
      step.draft_rows = static_cast<int32_t>(draft_nodes.size());
    }
    std::span<const float> root_logits;
    for (int32_t k = 0; k < d; ++k) {
      const auto ku = static_cast<std::size_t>(k);
      out_nodes[ku].clear();
      out_hidden[ku].clear();
      if (in_nodes[ku].empty()) continue;
      step.stage_rows[ku] = static_cast<int32_t>(in_nodes[ku].size());
      const std::span<const float> out = pipe.stage(k).RunLayer(tree, in_nodes[ku], in_hidden[ku]);
      if (k + 1 == d) {
        GROVE_CHECK(in_nodes[ku].size() == 1 && in_nodes[ku][0] == tree.root(),
                    "pipedec: the last stage got a layer other than the root");
        root_logits = out;
      } else {
        out_nodes[ku] = in_nodes[ku];
        out_hidden[ku].assign(out.begin(), out.end());
      }
    }
    // Synchronization: the target's token after the root; every unit commits the root and
    // prunes to the hit child's subtree, or drops its tree on a miss.
    bool miss = false;
    if (!root_logits.empty()) {
      step.synced = true;
      ++result.syncs;
      const int64_t root = tree.root();
      const int32_t x = sampler.Sample(root_logits, o.sequence, tree.node(root).position + 1);
      result.tokens.push_back(x);
      const int64_t hit = tree.ChildOfRoot(x);
      if (hit >= 0) {
        tree.PruneTo(hit);
        step.hit = true;
        ++result.hits;
      } else {
        miss = true;
      }
      for (int32_t k = 0; k < d; ++k) pipe.stage(k).Sync(root, miss ? nullptr : &tree);
      drafter.tree().Sync(root, miss ? nullptr : &tree);
      if (miss) tree.Reset(x, tree.node(root).position + 1);
      drafter.Forget(tree);
      // In-flight rows follow the tree: those of pruned nodes are dropped, in place.
      const auto n_embd = static_cast<std::size_t>(target->config().n_embd);
      for (int32_t k = 0; k + 1 < d; ++k) {
        std::vector<int64_t>& nodes = out_nodes[static_cast<std::size_t>(k)];
        std::vector<float>& hidden = out_hidden[static_cast<std::size_t>(k)];
        std::size_t kept = 0;
        for (std::size_t i = 0; i < nodes.size() && !miss; ++i) {
          if (!tree.contains(nodes[i])) continue;
          std::copy_n(hidden.begin() + i * n_embd, n_embd, hidden.begin() + kept * n_embd);
          nodes[kept++] = nodes[i];
        }
        nodes.resize(kept);
        hidden.resize(kept * n_embd);
      }
      done = PipelineStops(result, o, tokenizer);
    }
    ++result.timesteps;
    result.log.push_back(std::move(step));
    if (done) break;
    // Transmission: every stage's output moves one stage on; the draft's next layer enters the
    // first stage (and the draft), or after a miss the target's token alone refills the pipeline.
    for (int32_t k = d - 1; k >= 1; --k) {
      in_nodes[static_cast<std::size_t>(k)] = std::move(out_nodes[static_cast<std::size_t>(k - 1)]);
      in_hidden[static_cast<std::size_t>(k)] =
          std::move(out_hidden[static_cast<std::size_t>(k - 1)]);
    }
    in_nodes[0].clear();
    if (miss) {
      in_nodes[0] = {tree.root()};
    } else if (const auto candidates = drafter.CandidatesOf(tree.layer(tree.n_layers() - 1))) {
      const std::span<const int64_t> layer = tree.Expand(*candidates, o.width);
      in_nodes[0].assign(layer.begin(), layer.end());
    }
    draft_nodes = in_nodes[0];
  }
  return result;
}

PipelineResult RunPlainPipeline(std::shared_ptr<const ModelParameters> target,
                                std::span<const int32_t> prompt, const PipelineOptions& o) {
  int32_t n_ctx = 0;
  CheckPipelineRun(*target, prompt, o, 0, &n_ctx);
  Sampler sampler(o.sampling);
  PipelineStages pipe(target, prompt, o, n_ctx, sampler);
  const Tokenizer* tokenizer = target->tokenizer();
  PipelineResult result;
  result.tokens.push_back(pipe.first_token());
  Batch batch;
  for (auto position = static_cast<int32_t>(prompt.size()); !PipelineStops(result, o, tokenizer);
       ++position) {
    batch.Clear();
    batch.Add(result.tokens.back(), position, 0, -1, true);
    const std::span<const float> out = pipe.Pass(batch, result);
    result.tokens.push_back(sampler.Sample(out, o.sequence, position + 1));
  }
  return result;
}

}  // namespace grove
