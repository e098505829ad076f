// What the pipeline runs share (pipedec.h): each rank's unit (a target stage running its layer
// range, or the draft), with the prompt already through it; and the checks and stop rule of a run.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "base/thread_pool.h"
#include "base/timer.h"
#include "model/model.h"
#include "pipe/pipe_transport.h"
#include "pipe/pipedec.h"
#include "pipe/tree_cache.h"

namespace grove {

class Tokenizer;

// A stage without layers (a virtual stage of the simulator, pipeline_clock.h) passes its rows on
// unchanged and holds no cache.
class TargetStage {
 public:
  TargetStage(std::shared_ptr<const ModelParameters> target, LayerRange layers, bool last,
              const ModelOptions& options);

  Model* model() { return model_.get(); }
  // Runs a batch through the stage's layers: hidden_in is the previous stage's output (ignored by
  // the first stage, which embeds); returns hidden rows, or the last stage's logits.
  std::span<const float> Run(const Batch& batch, std::span<const float> hidden_in);
  // PipeDec: from here on the stage's cache holds the prediction tree after the committed text.
  void StartTree();
  // STPP: keeps slots [0, prefix) and `kept` (KvCache::Compact); nothing for a stage without
  // layers.
  void Compact(int32_t prefix, std::span<const int32_t> kept);
  // A sync (TreeCache::Sync); nothing for a stage without layers.
  void Sync(int64_t old_root, const PredictionTree* pruned);
  // One tree layer (its parents already here); the last stage returns its nodes' logits.
  std::span<const float> RunLayer(const PredictionTree& tree, std::span<const int64_t> nodes,
                                  std::span<const float> hidden_in);

 private:
  std::unique_ptr<Model> model_;
  LayerRange layers_;
  bool last_;
  std::optional<TreeCache> tree_;
  Batch batch_;
};

// What one rank of a run holds: a target stage (a stage rank) or the draft's forward context (the
// draft rank, when the run drafts), over a thread pool of its own, with the prompt already through
// it; and the first token, sampled by the last stage and known on every rank.
class PipelineRank {
 public:
  // draft: null for a run without one (PP), its rank then holding nothing. Throws grove::Error
  // when the transport's size is not the run's ranks.
  PipelineRank(PipeTransport& transport, const std::shared_ptr<const ModelParameters>& target,
               const std::shared_ptr<const ModelParameters>& draft, std::span<const int32_t> prompt,
               const PipelineOptions& options, int32_t n_ctx, Sampler& sampler);

  // The run's transport, its receives timed as this rank's waiting.
  PipeTransport& transport() { return transport_; }
  // This rank's decoding clock (PipelineResult::decode_seconds and times): started after the
  // prompt; forward seconds are what the run reports with AddForwardSeconds.
  void StartDecodeClock();
  void AddForwardSeconds(double seconds) { forward_seconds_ += seconds; }
  // decode_seconds and times of `result`, from the clock.
  void StopDecodeClock(PipelineResult& result) const;
  int32_t n_stages() const { return n_stages_; }
  // This rank's stage, or -1 on the draft rank.
  int32_t stage_index() const { return transport_.rank() - 1; }
  bool last_stage() const { return stage_index() + 1 == n_stages_; }
  TargetStage& stage() { return *stage_; }
  Model& draft() { return *draft_; }
  int32_t first_token() const { return first_token_; }
  // PP and STPP: `batch` (the same on every stage rank) through every stage in turn, a timestep
  // each, logged in `result` on every rank. Returns the last
  // stage's logits on its rank, nothing on the others.
  std::span<const float> Pass(const Batch& batch, PipelineResult& result);
  // The last stage's tokens, sent to every rank (`tokens` on the last stage's rank, ignored
  // elsewhere).
  std::vector<int32_t> ShareTokens(std::vector<int32_t> tokens);

 private:
  // Counts the seconds spent in Receive.
  class TimedTransport : public ForwardingTransport {
   public:
    using ForwardingTransport::ForwardingTransport;
    PipeMessage Receive(int32_t from, int32_t tag) override;
    double waited_seconds = 0.0;
  };

  TimedTransport transport_;
  int32_t n_stages_;
  Timer decode_clock_;
  double forward_seconds_ = 0.0;
  double waited_at_start_ = 0.0;
  std::shared_ptr<ThreadPool> pool_;
  std::unique_ptr<TargetStage> stage_;
  std::unique_ptr<Model> draft_;
  int32_t first_token_ = 0;
};

// The context a pipeline run's forward contexts may have (the model's, at most 4096), and the
// tokens it keeps spare beside prompt, generation and tree.
int32_t PipelineContextLimit(const ModelParameters& target);
inline constexpr int32_t kPipelineSpareTokens = 2;

// Checks a run's stages (contiguous, covering every layer, the first and the last holding at least
// one; those between may hold none), prompt, length and sampling, and that
// the prompt, the generation and `tree_tokens` more fit the context; *n_ctx: the context to give
// the forward contexts. Throws grove::Error naming the problem.
void CheckPipelineRun(const ModelParameters& target, std::span<const int32_t> prompt,
                      const PipelineOptions& options, int32_t tree_tokens, int32_t* n_ctx);

// Whether generation ends after the last token of `result`: n_predict reached, or end of
// generation.
bool PipelineStops(const PipelineResult& result, const PipelineOptions& options,
                   const Tokenizer* tokenizer);
// The same for `n_tokens` generated, the last of them `last`.
bool PipelineStops(std::size_t n_tokens, int32_t last, const PipelineOptions& options,
                   const Tokenizer* tokenizer);

// STPP's rank loop (static_tree_pipeline.cc), for RunPipelineRank.
PipelineResult StaticTreePipelineRank(PipeTransport& transport,
                                      const std::shared_ptr<const ModelParameters>& target,
                                      const std::shared_ptr<const ModelParameters>& draft,
                                      std::span<const int32_t> prompt,
                                      const PipelineOptions& options);

}  // namespace grove
