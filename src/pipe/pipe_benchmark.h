// The real runs side by side: PP, STPP and PipeDec on ranks (threads of one process or the
// processes of an MPI job), every unit a rank (the draft rank 0, stage k at rank k + 1). Each rank
// measures its own unit's cost, one rank after another so that the measurements do not share the
// cores, and rank 0 probes the link to rank 1; then every run goes `reps` times. Rank 0 gathers
// what every rank measured and spent, and what the virtual clock (pipeline_clock.h) predicts for
// each run from those measurements, so that the simulator is checked against runs it can also do.
#pragma once

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/model.h"
#include "pipe/pipe_transport.h"
#include "pipe/pipedec.h"
#include "pipe/pipeline_clock.h"
#include "speculate/tree_plan.h"

namespace grove {

struct PipeBenchmarkOptions {
  std::vector<PipelineRunKind> kinds;  // in order; the first's tokens are the reference
  // The runs' options; with PipeDec among the kinds, the width is narrowed to what the context
  // holds beside the prompt and the generation.
  PipelineOptions pipeline;
  int32_t reps = 3;
  // How long a rank waits for another while they load and measure (each rank in turn); during the
  // runs, pipeline.timeout_ms.
  std::chrono::milliseconds setup_timeout{600000};
  // What this rank was given (model files, prompt, options): the ranks check that they agree
  // before anything runs (CheckRanksAgree).
  std::vector<RankInput> inputs;
};

struct LinkProbe {
  double latency_seconds = 0.0;
  double bytes_per_second = 0.0;
};

struct PipeBenchmarkRun {
  PipelineRunKind kind = PipelineRunKind::kPlain;
  PipelineResult result;                              // of the first repetition
  std::vector<double> seconds_per_token;              // each repetition's, rank 0's wall clock
  std::vector<PipelineResult::RankTimes> rank_times;  // each rank's, last repetition
  double clocked_seconds_per_token = 0.0;             // the virtual clock's, from the measurements
};

// Rank 0's report (the other ranks get one with no runs).
struct PipeBenchmarkReport {
  PipelineOptions pipeline;        // as run
  std::vector<std::string> hosts;  // each rank's host name
  bool one_host = true;
  std::vector<double> resident_mib;  // each rank's resident memory after loading
  std::vector<VerifyCostCurve> stage_curves;
  VerifyCostCurve draft_curve{{{1, 1e-9}}};  // rank 0's own unit
  LinkProbe link;
  int32_t clock_cores = 0;  // cores the clock shares among units (0: one per unit)
  std::vector<PipeBenchmarkRun> runs;
};

// This rank's part. target and draft: the parameters this rank runs (RunPipelineRank). Throws
// grove::Error on every rank when the ranks' inputs differ, when the transport has another number
// of ranks than the stages need, when no PipeDec tree fits the context, or when a run or a
// repetition generates other tokens than the first (a bug); PipeTransportError when a rank fails
// or stops answering.
PipeBenchmarkReport RunPipeBenchmark(PipeTransport& transport,
                                     const std::shared_ptr<const ModelParameters>& target,
                                     const std::shared_ptr<const ModelParameters>& draft,
                                     std::span<const int32_t> prompt,
                                     const PipeBenchmarkOptions& options);

}  // namespace grove
