// The simulator of `grove pipe` (--transport simulate): plain pipeline parallelism (PP),
// static-tree speculation (STPP) and PipeDec run through stages of the target in this process,
// each checked token for token against plain decoding, and priced by the virtual clock
// (pipeline_clock.h): the stages share the target's measured verify curve evenly, the draft costs
// its own curve's time, links are modelled. Virtual stages (SpreadLayers) run the same logic on
// more stages than the model has layers. The tool chooses the splits and prints the figures.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "model/model.h"
#include "pipe/pipedec.h"
#include "pipe/pipeline_clock.h"
#include "pipe/stage_split.h"
#include "speculate/sequoia.h"

namespace grove {

// Groups of group_size stages over n_stages (the last holding the rest); empty for groups of 1
// (PipelineOptions::groups: a stage each).
std::vector<int32_t> UniformGroups(int32_t n_stages, int32_t group_size);

// The widest PipeDec tree, at most `wanted`, that the target's context holds on n_stages in groups
// of group_size beside the prompt and the generation. grove::Error when no tree fits.
int32_t PipeDecFittedWidth(const ModelParameters& target, int32_t prompt_tokens, int32_t n_predict,
                           int32_t n_stages, int32_t group_size, int32_t wanted);

struct PipeSimulationOptions {
  // Sampling, n_predict, threads, w, c and STPP's tree; the stages and groups are set per run.
  PipelineOptions pipeline;
  int32_t group_size = 1;  // PipeDec: stages per group
  double link_bytes_per_second = 1.25e9;
};

// One split at one link latency: the clock's milliseconds per generated token of each run.
struct PipeSimulationRow {
  int32_t stages = 0;
  int32_t width = 0;  // PipeDec's w, fitted to the context
  double link_us = 0.0;
  double pp_ms = 0.0, stpp_ms = 0.0, pipedec_ms = 0.0;
  double hit_rate = 0.0;             // PipeDec's
  double timesteps_per_token = 0.0;  // PipeDec's
};

// PipeDec with one (w, c) on one split.
struct PipeSweepPoint {
  double hit_rate = 0.0;
  double ms_per_token = 0.0;
  double timesteps_per_token = 0.0;
};

class PipeSimulation {
 public:
  // Decodes the prompt plainly (the tokens every run must generate) and measures the target's and
  // the draft's verify curves after it. The models must outlive this object.
  PipeSimulation(Model& target, Model& draft, std::vector<int32_t> prompt,
                 const PipeSimulationOptions& options);

  const VerifyCostCurve& target_curve() const { return target_curve_; }
  const VerifyCostCurve& draft_curve() const { return draft_curve_; }

  // PipeDecFittedWidth for this prompt and options.
  int32_t FittedWidth(int32_t n_stages, int32_t wanted) const;

  // PP, STPP and PipeDec on `stages`, priced at each link latency (microseconds): a row each.
  // grove::Error when a run generated other tokens than plain decoding (a bug).
  std::vector<PipeSimulationRow> Run(const std::vector<LayerRange>& stages,
                                     std::span<const double> links_us) const;

  // PipeDec alone with w = width and c = children on `stages`; nullopt when that tree does not fit
  // the context. grove::Error when it generated other tokens than plain decoding.
  std::optional<PipeSweepPoint> Sweep(const std::vector<LayerRange>& stages, int32_t width,
                                      int32_t children, double link_us) const;

 private:
  PipelineOptions OptionsFor(const std::vector<LayerRange>& stages) const;
  PipelineCosts CostsFor(int32_t n_stages, double link_us) const;

  Model& target_;
  Model& draft_;
  std::vector<int32_t> prompt_;
  PipeSimulationOptions options_;
  std::vector<int32_t> plain_;  // plain decoding's tokens
  VerifyCostCurve target_curve_, draft_curve_;
};

}  // namespace grove
