#include "pipe/pipeline_stages.h"

#include <algorithm>

#include "base/error.h"
#include "tokenize/tokenizer.h"

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

int32_t PipelineRankCount(const PipelineOptions& o) {
  return static_cast<int32_t>(o.stages.size()) + 1;
}

PipelineRank::PipelineRank(PipeTransport& transport,
                           const std::shared_ptr<const ModelParameters>& target,
                           const std::shared_ptr<const ModelParameters>& draft,
                           std::span<const int32_t> prompt, const PipelineOptions& o, int32_t n_ctx,
                           Sampler& sampler)
    : transport_(transport), n_stages_(static_cast<int32_t>(o.stages.size())) {
  if (transport.size() != PipelineRankCount(o)) {
    Fail("pipeline: ", o.stages.size(), " stages and the draft need ", PipelineRankCount(o),
         " ranks, not ", transport.size());
  }
  const int32_t k = stage_index();
  if (k < 0 && !draft) {
    // PP: the draft rank holds nothing and only follows the tokens.
    first_token_ = ShareTokens({}).at(0);
    return;
  }
  pool_ = std::make_shared<ThreadPool>(std::max(1, o.n_threads));
  const ModelOptions options{.pool = pool_, .n_ctx = n_ctx};
  if (k < 0) {
    draft_ = Model::Create(draft, options);
    Batch batch;
    draft_->ForwardChain(prompt, 0, 0, batch, /*want_logits=*/false);
    first_token_ = ShareTokens({}).at(0);
    return;
  }
  stage_ = std::make_unique<TargetStage>(target, o.stages[static_cast<std::size_t>(k)],
                                         last_stage(), options);
  // The prompt in chunks of a batch, each through the stages in turn.
  Batch batch;
  std::span<const float> out;
  for (std::size_t begin = 0; begin < prompt.size(); begin += kDefaultMaxBatch) {
    const std::size_t end = std::min(prompt.size(), begin + kDefaultMaxBatch);
    batch.Clear();
    batch.AddChain(prompt.subspan(begin, end - begin), static_cast<int32_t>(begin), 0);
    PipeMessage in;
    if (k > 0) in = transport_.Receive(StageRank(k - 1), kPipeHiddenTag);
    out = stage_->Run(batch, in.floats);
    if (!last_stage())
      transport_.Send(StageRank(k + 1), kPipeHiddenTag, {{}, {out.begin(), out.end()}});
  }
  std::vector<int32_t> first;
  if (last_stage()) first.push_back(sampler.Sample(out, o.sequence, prompt.size()));
  first_token_ = ShareTokens(std::move(first)).at(0);
}

PipeMessage PipelineRank::TimedTransport::Receive(int32_t from, int32_t tag) {
  const Timer timer;
  PipeMessage message = ForwardingTransport::Receive(from, tag);
  waited_seconds += timer.Seconds();
  return message;
}

void PipelineRank::StartDecodeClock() {
  decode_clock_.Reset();
  forward_seconds_ = 0.0;
  waited_at_start_ = transport_.waited_seconds;
}

void PipelineRank::StopDecodeClock(PipelineResult& result) const {
  result.decode_seconds = decode_clock_.Seconds();
  result.times.forward = forward_seconds_;
  result.times.wait = transport_.waited_seconds - waited_at_start_;
  result.times.other =
      std::max(0.0, result.decode_seconds - result.times.forward - result.times.wait);
}

std::vector<int32_t> PipelineRank::ShareTokens(std::vector<int32_t> tokens) {
  return Broadcast(transport_, StageRank(n_stages_ - 1), kPipeTokenTag, {std::move(tokens), {}})
      .ints;
}

std::span<const float> PipelineRank::Pass(const Batch& batch, PipelineResult& result) {
  const int32_t k = stage_index();
  std::span<const float> out;
  if (k >= 0) {
    PipeMessage in;
    if (k > 0) in = transport_.Receive(StageRank(k - 1), kPipeHiddenTag);
    const Timer timer;
    out = stage_->Run(batch, in.floats);
    forward_seconds_ += timer.Seconds();
    if (!last_stage()) {
      transport_.Send(StageRank(k + 1), kPipeHiddenTag, {{}, {out.begin(), out.end()}});
      out = {};
    }
  }
  for (int32_t s = 0; s < n_stages_; ++s) {
    PipelineTimestep step;
    step.stage_rows.assign(static_cast<std::size_t>(n_stages_), 0);
    step.stage_rows[static_cast<std::size_t>(s)] = batch.size();
    step.synced = s + 1 == n_stages_;
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
  return PipelineStops(result.tokens.size(), result.tokens.back(), o, tokenizer);
}

bool PipelineStops(std::size_t n_tokens, int32_t last, const PipelineOptions& o,
                   const Tokenizer* tokenizer) {
  return n_tokens >= static_cast<std::size_t>(o.n_predict) ||
         (o.stop_at_eog && tokenizer && tokenizer->IsEndOfGeneration(last));
}

}  // namespace grove
