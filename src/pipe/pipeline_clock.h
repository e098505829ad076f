// The virtual clock (issue 11): what a run's log (pipedec.h) would take on a pipeline whose stage
// compute, draft and links are modelled rather than run, so 7, 14 or 21 stages and slow links can
// be studied on one small machine with the real stage logic deciding every token, hit and prune.
//
// A PipeDec timestep (the paper's BSP step, digest §3.5): the draft and every group with input
// compute at once (a group's stages one after another, a message between each two), then the
// largest message crosses its link, then a sync broadcasts the target's token: max(draft(m_0),
// stage_k(m_k)) + link(max m_k) + (sync ? latency : 0). A PP or STPP timestep is one stage's
// compute and its message (or the draft's levels, for STPP's draft timestep).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "pipe/pipedec.h"
#include "speculate/sequoia.h"

namespace grove {

struct PipelineCosts {
  // Seconds for stage k (0-based) to process m tokens, and for the draft.
  std::function<double(int32_t stage, int32_t tokens)> stage_seconds;
  std::function<double(int32_t tokens)> draft_seconds;
  double link_latency_seconds = 100e-6;   // per message
  double link_bytes_per_second = 1.25e9;  // 10 GbE
  double bytes_per_token = 0.0;           // of a hidden row (n_embd x 4 for f32)
  // The cores the units share (0: each unit on hardware of its own). A PipeDec timestep's compute
  // is then at least the sum of its units' seconds over the cores, as when a small host runs every
  // stage (the real runs of grove pipe --transport).
  int32_t cores = 0;

  double LinkSeconds(int32_t tokens) const {
    return link_latency_seconds + tokens * bytes_per_token / link_bytes_per_second;
  }
};

// Costs for n_stages stages sharing the target's compute evenly (the paper balances its groups):
// a stage processes m tokens in t(m) / n_stages, t the whole target's measured verify curve
// (extended linearly past its last point); the draft in its own curve's time.
PipelineCosts EvenStageCosts(const VerifyCostCurve& target, const VerifyCostCurve& draft,
                             int32_t n_stages, double link_latency_seconds,
                             double link_bytes_per_second, double bytes_per_token);

// Costs from a measured curve per stage (stage_seconds(k, m) = stages[k]'s t(m)) and the draft's:
// what the real runs of grove pipe measure on each rank, for the clock to predict them.
PipelineCosts MeasuredStageCosts(std::vector<VerifyCostCurve> stages, const VerifyCostCurve& draft,
                                 double link_latency_seconds, double link_bytes_per_second,
                                 double bytes_per_token, int32_t cores);

// Seconds of the decoding part of the run (prefill excluded, as the paper measures).
double ClockedSeconds(const PipelineResult& run, PipelineRunKind kind, const PipelineCosts& costs);

}  // namespace grove
