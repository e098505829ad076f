// grove pipe --transport threads|mpi: the real runs (pipe/pipe_benchmark.h), every unit a rank:
// threads of this process or the processes of an MPI job. This file reads the options, loads what
// each rank runs, checks the tokens against plain decoding where the whole model is at hand, and
// prints rank 0's report: the per-token latency of each run (its wall clock from the first token
// to the last, the median over the repetitions, with the spread), the hit rate, and what the
// virtual clock predicts for the same run from the ranks' measurements.
#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/fnv1a.h"
#include "base/median.h"
#include "base/text_list.h"
#include "base/thread_pool.h"
#include "bundled_models.h"
#include "cmd_pipe.h"
#include "io/gguf.h"
#include "model/model.h"
#include "pipe/fault_transport.h"
#include "pipe/in_process_transport.h"
#include "pipe/pipe_benchmark.h"
#include "pipe/pipe_simulation.h"
#include "pipe/pipedec.h"
#include "sampling_options.h"
#include "speculate/plain_decoding.h"
#include "tokenize/tokenizer.h"
#ifdef GROVE_HAVE_MPI
#include "pipe_mpi/mpi_transport.h"
#include "speculate/model_drafter.h"
#endif

namespace grove::cli {
namespace {

struct Loaded {
  std::shared_ptr<const ModelParameters> target, draft;
};

// The split of a real run: --split, or --stages (one count), or the ranks but one.
std::vector<LayerRange> RealSplit(const PipeOptions& o, int32_t n_layer, int32_t ranks) {
  if (!o.split.empty()) return ParseLayerSplit(o.split, n_layer);
  const std::vector<int> counts = IntList(o.stages, "--stages");
  if (counts.size() != 1) {
    if (ranks > 0) return SplitLayers(n_layer, ranks - 1);
    Fail("--stages: a real run takes one stage count, not '", o.stages, "'");
  }
  return SplitLayers(n_layer, counts[0]);
}

// The pair's parameters, of the parts given (ModelPart: the whole model by default).
Loaded LoadPair(const PipeOptions& o, ModelPart target_part = {}, ModelPart draft_part = {}) {
  ThreadPool pool(std::max(1, o.threads));
  const bool group = ModelOptions{}.group_weights;
  Loaded l{ModelParameters::Load(o.model, group, pool, target_part),
           ModelParameters::Load(o.draft, group, pool, draft_part)};
  CheckSameVocabularySize(l.draft->config(), l.target->config());
  return l;
}

// What an MPI rank loads: the draft rank the draft, a stage rank its layers of the target; each
// the other model's configuration and tokenizer only.
Loaded LoadRankPart(const PipeOptions& o, int32_t rank, int32_t ranks) {
  const Loaded headers = LoadPair(o, {0, 0}, {0, 0});
  if (rank == kDraftRank) return LoadPair(o, {0, 0}, {});
  const std::vector<LayerRange> stages = RealSplit(o, headers.target->config().n_layer, ranks);
  if (rank > static_cast<int32_t>(stages.size())) return headers;  // refused in RunPipeBenchmark
  const LayerRange mine = stages[static_cast<std::size_t>(rank - 1)];
  return LoadPair(o, {mine.first, mine.last}, {0, 0});
}

std::vector<PipelineRunKind> RunKinds(const std::string& text) {
  std::vector<PipelineRunKind> kinds;
  for (const std::string_view item : SplitList(text)) {
    if (item == "pp") {
      kinds.push_back(PipelineRunKind::kPlain);
    } else if (item == "stpp") {
      kinds.push_back(PipelineRunKind::kStaticTree);
    } else if (item == "pipedec") {
      kinds.push_back(PipelineRunKind::kPipeDec);
    } else {
      Fail("--runs: '", item, "' is not pp, stpp or pipedec");
    }
  }
  if (kinds.empty()) Fail("--runs: no run");
  return kinds;
}

// GROVE_PIPE_FAULT=kill:RANK:SENDS or stop:RANK:SENDS: rank RANK sends SENDS messages, then
// kills itself (SIGKILL) or stops (SIGSTOP), as a host that dies or hangs would: what the tests of
// the failure path (tests/pipe_mpi_test.cc) run. Read by the tool only; no other effect.
void StrikeThisProcess(int32_t rank, PipeFaultKind kind) {
  std::fprintf(stderr, "grove pipe: rank %d: GROVE_PIPE_FAULT: %s now\n", rank,
               kind == PipeFaultKind::kKill ? "dying" : "stopping");
  std::fflush(stderr);
  raise(kind == PipeFaultKind::kKill ? SIGKILL : SIGSTOP);
}

// What this rank was given, for CheckRanksAgree: under mpirun every rank parses its own command
// line and opens its own files, and a rank given another file, prompt or option would otherwise
// run and produce other tokens in silence.
std::vector<RankInput> RankInputs(const PipeOptions& o, const Loaded& pair,
                                  const std::vector<int32_t>& prompt,
                                  const std::vector<LayerRange>& stages) {
  Fnv1a options;
  for (const std::string& text : {o.static_tree, o.runs}) options.Mix(text).Mix("\0", 1);
  const double numbers[] = {static_cast<double>(o.n_predict),
                            o.sampling.temperature,
                            static_cast<double>(o.sampling.top_k),
                            o.sampling.top_p,
                            o.sampling.min_p,
                            static_cast<double>(o.sampling.seed),
                            static_cast<double>(o.width),
                            static_cast<double>(o.children),
                            static_cast<double>(o.group_size),
                            static_cast<double>(o.reps)};
  options.Mix(numbers, sizeof(numbers));
  for (const LayerRange& range : stages) options.Mix(&range, sizeof(range));
  return {{"target model files", pair.target->gguf().ContentFingerprint()},
          {"draft model files", pair.draft->gguf().ContentFingerprint()},
          {"prompts", Fnv1a().Mix(prompt.data(), prompt.size() * sizeof(int32_t)).value()},
          {"options (-n, --temp, --seed, --width, --children, --group-size, --static-tree, "
           "--runs, --reps, the stages)",
           options.value()}};
}

// The set-up: ranks and hosts, the split, what each unit measured, each rank's resident memory.
void PrintSetup(const PipeOptions& o, const PipeBenchmarkReport& report,
                std::span<const int32_t> prompt) {
  const PipelineOptions& p = report.pipeline;
  const std::vector<VerifyCostCurve>& curves = report.stage_curves;
  std::string layers, units;
  for (std::size_t k = 0; k < p.stages.size(); ++k) {
    layers += (k ? "," : "") + std::to_string(p.stages[k].size());
    char text[64];
    std::snprintf(text, sizeof text, "%s%.3f/%.3f", k ? ", " : "", 1e3 * curves[k].Seconds(1),
                  1e3 * curves[k].Seconds(curves[k].max_size()));
    units += text;
  }
  const LinkProbe& link = report.link;
  std::printf(
      "grove pipe: %s transport, %zu ranks on %s%s: the draft and %zu stages (layers %s)%s; %zu "
      "prompt tokens, %zu generated, %s; PipeDec w %d, c %d; STPP tree %s; %d "
      "repetitions\n"
      "measured: stage t(1)/t(%d) = %s ms, draft t(1) = %.3f ms; link %.1f us, %.2f GB/s; the "
      "clock's cores: %s\n",
      o.transport.c_str(), report.hosts.size(), report.hosts[0].c_str(),
      report.one_host ? "" : " and others", p.stages.size(), layers.c_str(),
      p.groups.empty() ? "" : (", groups of " + std::to_string(o.group_size)).c_str(),
      prompt.size(), report.runs[0].result.tokens.size(), DescribeSampling(p.sampling).c_str(),
      p.width, p.children, p.static_tree.c_str(), o.reps, curves.empty() ? 1 : curves[0].max_size(),
      units.c_str(), 1e3 * report.draft_curve.Seconds(1), 1e6 * link.latency_seconds,
      link.bytes_per_second / 1e9,
      report.clock_cores ? std::to_string(report.clock_cores).c_str() : "one per unit");
  std::printf("resident memory after loading (each rank loads only what it runs), MiB:");
  for (std::size_t q = 0; q < report.resident_mib.size(); ++q) {
    std::printf("%s %s %.1f", q ? "," : "", q ? ("stage " + std::to_string(q)).c_str() : "draft",
                report.resident_mib[q]);
  }
  std::printf("%s\n\n", o.transport == "threads" ? " (one process: the same figure)" : "");
}

// Each run's real milliseconds per token against the clock's, and PipeDec's speedups.
void PrintRuns(const PipeBenchmarkReport& report) {
  std::printf(
      "| run | ms/token (median) | min - max | clock's ms/token | clock / real | hit rate | "
      "timesteps/token |\n|---|---:|---|---:|---:|---:|---:|\n");
  std::vector<double> real;
  for (const PipeBenchmarkRun& run : report.runs) {
    const double n = static_cast<double>(run.result.tokens.size()) - 1;
    std::vector<double> seconds = run.seconds_per_token;
    real.push_back(1e3 * Median(seconds));
    const auto [lo, hi] =
        std::minmax_element(run.seconds_per_token.begin(), run.seconds_per_token.end());
    const double clocked = 1e3 * run.clocked_seconds_per_token;
    std::printf("| %s | %.3f | %.3f - %.3f | %.3f | %.2f | %.3f | %.2f |\n",
                PipelineRunName(run.kind), real.back(), 1e3 * *lo, 1e3 * *hi, clocked,
                real.back() > 0 ? clocked / real.back() : 0.0, run.result.hit_rate(),
                n > 0 ? static_cast<double>(run.result.timesteps) / n : 0.0);
  }
  for (std::size_t i = 0; i < report.runs.size(); ++i) {
    for (std::size_t j = 0; j < report.runs.size(); ++j) {
      if (report.runs[i].kind == PipelineRunKind::kPipeDec && j != i && real[i] > 0) {
        std::printf("PipeDec / %s: %.2fx\n", PipelineRunName(report.runs[j].kind),
                    real[j] / real[i]);
      }
    }
  }
}

void PrintRankTimes(const PipeBenchmarkReport& report) {
  std::printf(
      "\nwhere each rank's time went, ms per token (last repetition): its unit's forwards / "
      "waiting for messages / the rest\n| run |");
  for (std::size_t q = 0; q < report.hosts.size(); ++q) {
    std::printf(q == 0 ? " draft (rank 0) |" : " stage %zu |", q);
  }
  std::printf("\n|---|");
  for (std::size_t q = 0; q < report.hosts.size(); ++q) std::printf("---|");
  std::printf("\n");
  for (const PipeBenchmarkRun& run : report.runs) {
    const double n = std::max(1.0, static_cast<double>(run.result.tokens.size()) - 1);
    std::printf("| %s |", PipelineRunName(run.kind));
    for (const PipelineResult::RankTimes& s : run.rank_times) {
      std::printf(" %.3f / %.3f / %.3f |", 1e3 * s.forward / n, 1e3 * s.wait / n,
                  1e3 * s.other / n);
    }
    std::printf("\n");
  }
}

// Rank 0's report, printed: the set-up, a table of the runs (real against the clock) and where
// each rank's time went.
void PrintReport(const PipeOptions& o, const PipeBenchmarkReport& report,
                 std::span<const int32_t> prompt) {
  PrintSetup(o, report, prompt);
  PrintRuns(report);
  PrintRankTimes(report);
  std::printf("outputs: identical across the runs and repetitions\n");
  if (o.print_tokens) {
    std::printf("tokens:");
    for (int32_t token : report.runs[0].result.tokens) std::printf(" %d", token);
    std::printf("\n");
  }
  std::fflush(stdout);
}

// One rank's whole part. Returns rank 0's tokens (of the first run), nothing on the others.
std::vector<int32_t> RunRank(const PipeOptions& o, const Loaded& pair, PipeTransport& transport) {
  const char* fault = std::getenv("GROVE_PIPE_FAULT");
  FaultTransport t(
      transport, ParsePipeFault(fault ? fault : ""),
      [rank = transport.rank()](PipeFaultKind kind) { StrikeThisProcess(rank, kind); });
  const std::vector<LayerRange> stages = RealSplit(o, pair.target->config().n_layer, t.size());
  const Tokenizer& tok = *pair.target->tokenizer();
  const std::vector<int32_t> prompt = tok.Encode(o.prompt, tok.add_bos_by_default());
  PipeBenchmarkOptions options;
  options.kinds = RunKinds(o.runs);
  options.pipeline = {.stages = stages,
                      .groups = UniformGroups(static_cast<int32_t>(stages.size()), o.group_size),
                      .sampling = o.sampling,
                      .n_predict = o.n_predict,
                      .n_threads = o.threads,
                      .timeout_ms = static_cast<int32_t>(o.timeout_seconds * 1000),
                      .width = o.width,
                      .children = o.children,
                      .static_tree = o.static_tree};
  options.reps = o.reps;
  options.inputs = RankInputs(o, pair, prompt, stages);
  const PipeBenchmarkReport report = RunPipeBenchmark(t, pair.target, pair.draft, prompt, options);
  if (t.rank() != 0) return {};
  PrintReport(o, report, prompt);
  return report.runs[0].result.tokens;
}

}  // namespace

int RunPipeRanks(const PipeOptions& in) {
  const PipeOptions o = WithPairResolved(in);
  RunKinds(o.runs);  // a bad --runs stops here, on every rank
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_seconds * 1000));
  if (o.transport == "mpi") {
#ifdef GROVE_HAVE_MPI
    MpiTransport transport(timeout);
    // mpirun stops every rank (SIGTERM) when one dies: each says so, with its rank.
    static int rank_for_signal = 0;
    rank_for_signal = transport.rank();
    std::signal(SIGTERM, [](int) {
      char text[160];
      const int n = std::snprintf(text, sizeof text,
                                  "grove pipe: rank %d: stopped by mpirun: another rank of the "
                                  "job failed or died (mpirun says which)\n",
                                  rank_for_signal);
      if (n > 0) (void)!write(2, text, static_cast<std::size_t>(n));
      _exit(1);
    });
    try {
      const Loaded pair = LoadRankPart(o, transport.rank(), transport.size());
      RunRank(o, pair, transport);
    } catch (const std::exception& e) {
      transport.Abort(e.what());
    }
    return 0;
#else
    Fail(
        "this grove was built without MPI: install Open MPI (scripts/install-deps.sh) and build "
        "again, or use --transport threads");
#endif
  }
  const Loaded pair = LoadPair(o);
  const int32_t n_stages =
      static_cast<int32_t>(RealSplit(o, pair.target->config().n_layer, 0).size());
  const std::vector<std::vector<int32_t>> tokens = RunRanksInProcess<std::vector<int32_t>>(
      n_stages + 1, timeout, [&](PipeTransport& t) { return RunRank(o, pair, t); });
  // The whole model is in this process: plain decoding says what the tokens must be.
  const Tokenizer& tok = *pair.target->tokenizer();
  const std::vector<int32_t> prompt = tok.Encode(o.prompt, tok.add_bos_by_default());
  auto target = Model::Create(pair.target, {.n_threads = std::max(1, o.threads)});
  const std::vector<int32_t> plain =
      GeneratePlain(*target, prompt, o.sampling, {.n_predict = o.n_predict}, {});
  if (tokens[0] != plain) Fail("the runs generated other tokens than plain decoding (a bug)");
  std::printf("plain decoding in this process: the same tokens\n");
  return 0;
}

}  // namespace grove::cli
