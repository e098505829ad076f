#include "pipe/pipeline_stages.h"

#include <algorithm>

#include "base/error.h"
#include "model/tokenizer.h"

namespace grove {
namespace {

void CheckStages(const std::vector<LayerRange>& stages, int32_t n_layer) {
  if (stages.empty()) Fail("pipeline: no stages");
  int32_t next = 0;
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const bool end = s == 0 || s + 1 == stages.size();
    if (stages[s].first != next || stages[s].size() < (end ? 1 : 0)) {
      Fail("pipeline: stage ", s + 1, " holds layers [", stages[s].first, ", ", stages[s].last,
           "); it must start at layer ", next, end ? " and hold at least one" : "");
    }
    next = stages[s].last;
  }
  if (next != n_layer) {
    Fail("pipeline: the stages hold ", next, " layers; the model has ", n_layer);
  }
}

}  // namespace

TargetStage::TargetStage(std::shared_ptr<const ModelParameters> target, LayerRange layers,
                         bool last, const ModelOptions& options)
    : model_(Model::Create(std::move(target), options)), layers_(layers), last_(last) {}

std::span<const float> TargetStage::Run(const Batch& batch, std::span<const float> hidden_in) {
  if (layers_.size() == 0) return hidden_in;
  return model_->ForwardLayers(batch, layers_.first, layers_.last,
                               layers_.first == 0 ? std::span<const float>() : hidden_in);
}

void TargetStage::StartTree() {
  if (layers_.size() > 0) tree_.emplace(model_->cache(0), model_->cache(0).length());
}

void TargetStage::Compact(int32_t prefix, std::span<const int32_t> kept) {
  if (layers_.size() > 0) model_->cache(0).Compact(prefix, kept);
}

void TargetStage::Sync(int64_t old_root, const PredictionTree* pruned) {
  if (tree_) tree_->Sync(old_root, pruned);
}

std::span<const float> TargetStage::RunLayer(const PredictionTree& tree,
                                             std::span<const int64_t> nodes,
                                             std::span<const float> hidden_in) {
  if (!tree_) return hidden_in;
  batch_.Clear();
  tree_->AppendLayer(tree, nodes, last_, batch_);
  const int32_t first_slot = model_->cache(0).length();
  const std::span<const float> out = Run(batch_, hidden_in);
  tree_->Placed(nodes, first_slot);
  return out;
}

PipelineStages::PipelineStages(const std::shared_ptr<const ModelParameters>& target,
                               std::span<const int32_t> prompt, const PipelineOptions& o,
                               int32_t n_ctx, Sampler& sampler)
    : pool_(std::make_shared<ThreadPool>(std::max(1, o.n_threads))) {
  const ModelOptions options{.pool = pool_, .n_ctx = n_ctx};
  for (std::size_t s = 0; s < o.stages.size(); ++s) {
    stages_.push_back(
        std::make_unique<TargetStage>(target, o.stages[s], s + 1 == o.stages.size(), options));
  }
  Batch batch;
  std::span<const float> out;
  for (std::size_t begin = 0; begin < prompt.size(); begin += kDefaultMaxBatch) {
    const std::size_t end = std::min(prompt.size(), begin + kDefaultMaxBatch);
    batch.Clear();
    batch.AddChain(prompt.subspan(begin, end - begin), static_cast<int32_t>(begin), 0);
    out = {};
    for (auto& stage : stages_) out = stage->Run(batch, out);
  }
  first_token_ = sampler.Sample(out, o.sequence, prompt.size());
}

std::span<const float> PipelineStages::Pass(const Batch& batch, PipelineResult& result) {
  std::span<const float> out;
  for (int32_t k = 0; k < size(); ++k) {
    out = stage(k).Run(batch, out);
    PipelineTimestep step;
    step.stage_rows.assign(stages_.size(), 0);
    step.stage_rows[static_cast<std::size_t>(k)] = batch.size();
    step.synced = k + 1 == size();
    result.log.push_back(std::move(step));
    ++result.timesteps;
  }
  ++result.syncs;
  return out;
}

int32_t PipelineContextLimit(const ModelParameters& target) {
  const int32_t trained = target.config().n_ctx_train;
  return trained > 0 ? std::min(trained, 4096) : 4096;
}

void CheckPipelineRun(const ModelParameters& target, std::span<const int32_t> prompt,
                      const PipelineOptions& o, int32_t tree_tokens, int32_t* n_ctx) {
  CheckStages(o.stages, target.config().n_layer);
  if (prompt.empty()) Fail("pipeline: the prompt is empty");
  if (o.n_predict < 1) Fail("pipeline: n_predict ", o.n_predict, " < 1");
  o.sampling.Validate();
  const int64_t needed =
      static_cast<int64_t>(prompt.size()) + o.n_predict + tree_tokens + kPipelineSpareTokens;
  const int32_t limit = PipelineContextLimit(target);
  if (needed > limit) {
    Fail("pipeline: the prompt (", prompt.size(), " tokens), ", o.n_predict,
         " new ones and a tree of up to ", tree_tokens, " do not fit the context of ", limit);
  }
  *n_ctx = static_cast<int32_t>(needed);
}

bool PipelineStops(const PipelineResult& result, const PipelineOptions& o,
                   const Tokenizer* tokenizer) {
  const int32_t token = result.tokens.back();
  return static_cast<int32_t>(result.tokens.size()) >= o.n_predict ||
         (o.stop_at_eog && tokenizer && tokenizer->IsEndOfGeneration(token));
}

}  // namespace grove
