#include "pipe/pipe_benchmark.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "base/error.h"
#include "base/median.h"
#include "base/resident_memory.h"
#include "base/thread_pool.h"
#include "base/timer.h"
#include "speculate/verify_cost.h"

namespace grove {
namespace {

// What measuring one unit's curve may take (each rank in turn).
constexpr double kUnitBudgetSeconds = 0.25;

std::string HostName() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

PipeMessage CurveMessage(const VerifyCostCurve& curve) {
  PipeMessage m;
  for (const auto& [n, seconds] : curve.points()) {
    m.ints.push_back(n);
    m.floats.push_back(static_cast<float>(seconds));
  }
  return m;
}

VerifyCostCurve ReadCurve(const PipeMessage& m) {
  std::vector<std::pair<int32_t, double>> points;
  for (std::size_t i = 0; i < m.ints.size(); ++i) points.emplace_back(m.ints[i], m.floats.at(i));
  return VerifyCostCurve(std::move(points));
}

// This rank's unit's t(m) after the prompt: the draft's whole forward (stage < 0), or a stage's
// layers. `cold`: with the caches flushed before each timed forward (MeasureVerifyCost), as when
// the units take turns on one host's cores.
VerifyCostCurve MeasureUnit(const std::shared_ptr<const ModelParameters>& target,
                            const std::shared_ptr<const ModelParameters>& draft,
                            std::span<const int32_t> prompt, int32_t stage,
                            const std::vector<LayerRange>& stages, int32_t max_tokens, int threads,
                            bool cold) {
  const auto position = static_cast<int32_t>(prompt.size());
  const bool is_draft = stage < 0;
  const LayerRange layers =
      is_draft ? LayerRange{0, draft->config().n_layer} : stages[static_cast<std::size_t>(stage)];
  if (layers.size() == 0) return VerifyCostCurve({{1, 1e-9}});
  auto model = Model::Create(is_draft ? draft : target, {.n_threads = std::max(1, threads),
                                                         .n_ctx = position + max_tokens + 8});
  // A stage after the first reads hidden rows: zeros stand for them.
  const std::vector<float> zeros(
      layers.first == 0 ? 0 : prompt.size() * static_cast<std::size_t>(model->config().n_embd),
      0.0f);
  Batch batch;
  batch.AddChain(prompt, 0, 0);
  model->ForwardLayers(batch, layers.first, layers.last, zeros);
  return MeasureVerifyCost(*model, 0, prompt.back(), position, max_tokens, kUnitBudgetSeconds,
                           layers.first, layers.last, cold);
}

// Rank 0 and rank 1 bounce a small message, then a tree layer's hidden rows. Each side pauses
// 300 us before it sends, so that the other has been waiting a while, as a stage waits for its
// neighbour's compute in a run (a waiting MPI rank sleeps between polls: a message to it costs
// more than one to a rank polling without pause). One message's time is half of the round trip
// less rank 1's pause (which rank 1 measures and sends back); the large message's extra time
// gives the bandwidth.
LinkProbe ProbeLink(PipeTransport& t, std::size_t big_floats) {
  const int32_t r = t.rank();
  constexpr auto kPause = std::chrono::microseconds(300);
  auto bounce = [&](PipeMessage m, int n) {
    std::vector<double> trips;
    for (int i = 0; i < n; ++i) {
      if (r == 0) {
        std::this_thread::sleep_for(kPause);
        const Timer timer;
        t.Send(1, kPipeToolTag, m);
        const PipeMessage reply = t.Receive(1, kPipeToolTag);
        trips.push_back((timer.Seconds() - reply.floats.back()) / 2);
      } else if (r == 1) {
        PipeMessage in = t.Receive(0, kPipeToolTag);
        const Timer pause;
        std::this_thread::sleep_for(kPause);
        in.floats.push_back(static_cast<float>(pause.Seconds()));
        t.Send(0, kPipeToolTag, in);
      }
    }
    return std::max(0.0, Median(trips));
  };
  LinkProbe probe;
  if (r > 1) return probe;
  probe.latency_seconds = bounce({{1}, {}}, 51);
  const double big = bounce({{}, std::vector<float>(big_floats, 1.0f)}, 21);
  probe.bytes_per_second =
      big > probe.latency_seconds
          ? static_cast<double>(big_floats * sizeof(float)) / (big - probe.latency_seconds)
          : 1e12;
  return probe;
}

// Where the ranks are (rank 0 gathers every host's name and resident memory) and whether they
// share one host; every rank learns the latter.
void GatherHosts(PipeTransport& t, PipeBenchmarkReport& report) {
  if (t.rank() == 0) {
    report.hosts.push_back(HostName());
    report.resident_mib.push_back(ResidentMiB());
    for (int32_t k = 1; k < t.size(); ++k) {
      const PipeMessage m = t.Receive(k, kPipeToolTag);
      report.hosts.emplace_back(m.ints.begin(), m.ints.end());
      report.resident_mib.push_back(m.floats.at(0));
    }
  } else {
    const std::string host = HostName();
    t.Send(0, kPipeToolTag, {{host.begin(), host.end()}, {static_cast<float>(ResidentMiB())}});
  }
  const bool same = std::all_of(report.hosts.begin(), report.hosts.end(),
                                [&](const std::string& h) { return h == report.hosts[0]; });
  report.one_host = Broadcast(t, 0, kPipeToolTag, {{same}, {}}).ints.at(0) != 0;
}

// Each unit's cost, one rank after another (so that they do not share the cores); rank 0 keeps
// its own as the draft's and gathers the stages'.
void MeasureUnits(PipeTransport& t, const std::shared_ptr<const ModelParameters>& target,
                  const std::shared_ptr<const ModelParameters>& draft,
                  std::span<const int32_t> prompt, int32_t max_tokens,
                  PipeBenchmarkReport& report) {
  const PipelineOptions& p = report.pipeline;
  const int32_t r = t.rank();
  // Whether the ranks take turns on the host's cores (more ranks' threads than cores on one host):
  // then the other units' weights pass through the caches between two forwards of a unit.
  const bool shared_cores = t.size() * std::max(1, p.n_threads) > PoolThreadCount(0);
  if (r > 0) t.Receive(r - 1, kPipeToolTag);
  const VerifyCostCurve own = MeasureUnit(target, draft, prompt, r - 1, p.stages, max_tokens,
                                          p.n_threads, report.one_host && shared_cores);
  if (r + 1 < t.size()) t.Send(r + 1, kPipeToolTag, {});
  if (r == 0) {
    report.draft_curve = own;
    for (int32_t k = 1; k < t.size(); ++k) {
      report.stage_curves.push_back(ReadCurve(t.Receive(k, kPipeToolTag)));
    }
  } else {
    t.Send(0, kPipeToolTag, CurveMessage(own));
  }
}

// Every rank's time split of a run, gathered on rank 0 (the others return nothing).
std::vector<PipelineResult::RankTimes> GatherRankTimes(PipeTransport& t,
                                                       const PipelineResult::RankTimes& own) {
  if (t.rank() != 0) {
    t.Send(0, kPipeToolTag,
           {{},
            {static_cast<float>(own.forward), static_cast<float>(own.wait),
             static_cast<float>(own.other)}});
    return {};
  }
  std::vector<PipelineResult::RankTimes> all = {own};
  for (int32_t q = 1; q < t.size(); ++q) {
    const PipeMessage m = t.Receive(q, kPipeToolTag);
    all.push_back({m.floats.at(0), m.floats.at(1), m.floats.at(2)});
  }
  return all;
}

// The run's pipeline options, checked against the ranks; PipeDec's tree width shrunk to what
// fits the context beside the prompt and the tokens to generate.
PipelineOptions CheckedPipeline(PipeTransport& t, const ModelParameters& target,
                                std::span<const int32_t> prompt,
                                const PipeBenchmarkOptions& options) {
  GROVE_CHECK(!options.kinds.empty() && options.reps >= 1, "pipe benchmark: no run");
  PipelineOptions p = options.pipeline;
  const auto n_stages = static_cast<int32_t>(p.stages.size());
  if (t.size() != n_stages + 1) {
    Fail(n_stages, " stages and the draft need ", n_stages + 1, " ranks, not ", t.size(),
         " (mpirun -np ", n_stages + 1, ")");
  }
  CheckRanksAgree(t, kPipeToolTag, options.inputs);
  p.sampling.Validate();
  const bool pipedec = std::find(options.kinds.begin(), options.kinds.end(),
                                 PipelineRunKind::kPipeDec) != options.kinds.end();
  if (pipedec) {
    const int32_t depth = p.groups.empty() ? n_stages : static_cast<int32_t>(p.groups.size());
    const int32_t most =
        PipeDecMaxWidth(target, static_cast<int32_t>(prompt.size()), p.n_predict, depth);
    if (most < 1) Fail("PipeDec: no tree fits the context beside the prompt and -n ", p.n_predict);
    p.width = std::min(p.width, most);
  }
  return p;
}

// Each run `reps` times, in turn; a repetition must generate the first one's tokens.
void RunRepetitions(PipeTransport& t, const std::shared_ptr<const ModelParameters>& target,
                    const std::shared_ptr<const ModelParameters>& draft,
                    std::span<const int32_t> prompt, const PipeBenchmarkOptions& options,
                    PipeBenchmarkReport& report) {
  for (PipelineRunKind kind : options.kinds) report.runs.push_back({.kind = kind});
  for (int rep = 0; rep < options.reps; ++rep) {
    for (PipeBenchmarkRun& run : report.runs) {
      PipelineResult result = RunPipelineRank(run.kind, t, target, draft, prompt, report.pipeline);
      run.seconds_per_token.push_back(
          result.decode_seconds /
          static_cast<double>(std::max<std::size_t>(1, result.tokens.size() - 1)));
      run.rank_times = GatherRankTimes(t, result.times);
      if (rep == 0) {
        run.result = std::move(result);
      } else if (result.tokens != run.result.tokens) {
        Fail(PipelineRunName(run.kind), " generated other tokens in repetition ", rep + 1);
      }
    }
  }
}

// On rank 0: every run must generate the same tokens; the clock, fed what was measured (on one
// host the ranks share its cores), gives each run's clocked time per token.
void ClockRuns(const ModelParameters& target, PipeBenchmarkReport& report) {
  for (const PipeBenchmarkRun& run : report.runs) {
    if (run.result.tokens != report.runs[0].result.tokens) {
      Fail(PipelineRunName(run.kind), " generated other tokens than ",
           PipelineRunName(report.runs[0].kind), " (a bug: please report it)");
    }
  }
  const int32_t n_threads = report.pipeline.n_threads;
  report.clock_cores = report.one_host ? PoolThreadCount(0) / std::max(1, n_threads) : 0;
  const PipelineCosts costs = MeasuredStageCosts(
      report.stage_curves, report.draft_curve, report.link.latency_seconds,
      report.link.bytes_per_second, 4.0 * target.config().n_embd, report.clock_cores);
  for (PipeBenchmarkRun& run : report.runs) {
    const double n = static_cast<double>(run.result.tokens.size()) - 1;
    run.clocked_seconds_per_token = n > 0 ? ClockedSeconds(run.result, run.kind, costs) / n : 0.0;
  }
}

}  // namespace

PipeBenchmarkReport RunPipeBenchmark(PipeTransport& t,
                                     const std::shared_ptr<const ModelParameters>& target,
                                     const std::shared_ptr<const ModelParameters>& draft,
                                     std::span<const int32_t> prompt,
                                     const PipeBenchmarkOptions& options) {
  PipeBenchmarkReport report;
  report.pipeline = CheckedPipeline(t, *target, prompt, options);
  const PipelineOptions& p = report.pipeline;
  const int32_t stpp_tokens = StaticPipelineTree(p).size() + 1;

  // Loading and measuring take each rank its own time (the measurements one rank after another):
  // meanwhile a rank waits up to setup_timeout; during the runs, the pipeline's timeout.
  const std::chrono::milliseconds run_timeout(p.timeout_ms);
  t.set_timeout(std::max(run_timeout, options.setup_timeout));
  GatherHosts(t, report);
  MeasureUnits(t, target, draft, prompt, std::max({p.width, stpp_tokens, 8}), report);
  report.link = ProbeLink(t, static_cast<std::size_t>(p.width) * target->config().n_embd);

  // Every rank ready: from here on a silent rank is reported after the run timeout.
  Broadcast(t, 0, kPipeToolTag, {});
  t.set_timeout(run_timeout);
  RunRepetitions(t, target, draft, prompt, options, report);
  if (t.rank() != 0) return {};
  ClockRuns(*target, report);
  return report;
}

}  // namespace grove
