// grove pipe --transport threads|mpi: the real runs. Every unit is a rank (the draft rank 0, stage
// k at rank k + 1), threads of this process or the processes of an MPI job. Each rank measures its
// own unit's cost (one rank at a time, so the measurements do not share the cores) and rank 0
// probes the link to rank 1; then PP, STPP and PipeDec run --reps times each. Rank 0 prints the
// per-token latency of each (its wall clock from the first token to the last, the median over the
// repetitions, with the spread), the hit rate, and what the virtual clock predicts for the same
// run from those measurements, so the simulator is checked against a run it can also do.
#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/fnv1a.h"
#include "base/thread_pool.h"
#include "base/timer.h"
#include "bundled_models.h"
#include "cmd_pipe.h"
#include "io/gguf.h"
#include "model/model.h"
#include "model/tokenizer.h"
#include "pipe/in_process_transport.h"
#include "pipe/pipedec.h"
#include "pipe/pipeline_clock.h"
#include "sampling_options.h"
#include "speculate/auto_planner.h"
#include "speculate/plain_decoding.h"
#ifdef GROVE_HAVE_MPI
#include "pipe_mpi/mpi_transport.h"
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
  if (l.draft->config().n_vocab != l.target->config().n_vocab) {
    Fail("the draft has ", l.draft->config().n_vocab, " tokens but the target has ",
         l.target->config().n_vocab);
  }
  return l;
}

// What an MPI rank loads: the draft rank the draft, a stage rank its layers of the target; each
// the other model's configuration and tokenizer only.
Loaded LoadRankPart(const PipeOptions& o, int32_t rank, int32_t ranks) {
  const Loaded headers = LoadPair(o, {0, 0}, {0, 0});
  if (rank == kDraftRank) return LoadPair(o, {0, 0}, {});
  const std::vector<LayerRange> stages = RealSplit(o, headers.target->config().n_layer, ranks);
  if (rank > static_cast<int32_t>(stages.size())) return headers;  // refused in RunRank
  const LayerRange mine = stages[static_cast<std::size_t>(rank - 1)];
  return LoadPair(o, {mine.first, mine.last}, {0, 0});
}

double ResidentMiB() {
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return static_cast<double>(resident) * sysconf(_SC_PAGESIZE) / 1048576.0;
}

std::vector<PipelineRunKind> RunKinds(const std::string& text) {
  std::vector<PipelineRunKind> kinds;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
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

PipeMessage CurveMessage(const VerifyCostCurve& curve, const std::string& host) {
  PipeMessage m;
  for (const auto& [n, seconds] : curve.points()) {
    m.ints.push_back(n);
    m.floats.push_back(static_cast<float>(seconds));
  }
  m.ints.push_back(-1);  // then the host's name
  for (char ch : host) m.ints.push_back(static_cast<unsigned char>(ch));
  return m;
}

VerifyCostCurve ReadCurve(const PipeMessage& m, std::string* host) {
  std::vector<std::pair<int32_t, double>> points;
  std::size_t i = 0;
  for (; i < m.ints.size() && m.ints[i] >= 0; ++i) points.emplace_back(m.ints[i], m.floats.at(i));
  host->clear();
  for (++i; i < m.ints.size(); ++i) host->push_back(static_cast<char>(m.ints[i]));
  return VerifyCostCurve(std::move(points));
}

// This rank's unit's t(m), the prompt in its cache: the draft's whole forward, or a stage's layers.
// `cold`: the caches flushed before each timed forward, as when the units take turns on one host's
// cores and the other units' weights pass through the caches between two forwards of this one (a
// unit on cores of its own keeps its weights warm: timed back to back).
VerifyCostCurve MeasureUnit(const Loaded& pair, std::span<const int32_t> prompt, int32_t stage,
                            const std::vector<LayerRange>& stages, int32_t max_tokens, int threads,
                            bool cold) {
  const auto position = static_cast<int32_t>(prompt.size());
  const ModelOptions options{.n_threads = std::max(1, threads), .n_ctx = position + max_tokens + 8};
  const bool draft = stage < 0;
  const LayerRange layers =
      draft ? LayerRange{0, pair.draft->config().n_layer} : stages[static_cast<std::size_t>(stage)];
  if (layers.size() == 0) return VerifyCostCurve({{1, 1e-9}});
  auto model = Model::Create(draft ? pair.draft : pair.target, options);
  const auto n_embd = static_cast<std::size_t>(model->config().n_embd);
  const std::vector<float> zeros(std::max<std::size_t>(prompt.size(), max_tokens) * n_embd, 0.0f);
  auto in = [&](std::size_t rows) {
    return layers.first == 0 ? std::span<const float>()
                             : std::span<const float>(zeros).first(rows * n_embd);
  };
  Batch batch;
  batch.AddChain(prompt, 0, 0);
  model->ForwardLayers(batch, layers.first, layers.last, in(prompt.size()));
  std::vector<uint8_t> flush(cold ? 64u << 20 : 0);
  std::vector<std::pair<int32_t, double>> points;
  std::vector<int32_t> sizes;
  for (int32_t m = 1; m < max_tokens; m = m < 4 ? m + 1 : m * 2) sizes.push_back(m);
  sizes.push_back(max_tokens);
  // The sizes in turn, repetition after repetition: a disturbance of the host (another process
  // on the core) spreads over the sizes instead of raising one size's median.
  std::vector<std::vector<double>> times(sizes.size());
  for (int rep = 0; rep < 13; ++rep) {
    for (std::size_t j = 0; j < sizes.size(); ++j) {
      const int32_t m = sizes[j];
      for (std::size_t i = 0; i < flush.size(); i += 64) flush[i] += 1;
      batch.Clear();
      for (int32_t i = 0; i < m; ++i) batch.Add(prompt.back(), position + i, 0, i - 1, true);
      const Timer timer;
      model->ForwardLayers(batch, layers.first, layers.last, in(static_cast<std::size_t>(m)));
      if (rep > 0) times[j].push_back(timer.Seconds());
      model->cache(0).Truncate(position);
    }
  }
  for (std::size_t j = 0; j < sizes.size(); ++j) {
    std::sort(times[j].begin(), times[j].end());
    const double t =
        std::max(times[j][times[j].size() / 2], points.empty() ? 1e-9 : points.back().second);
    points.emplace_back(sizes[j], t);
  }
  return VerifyCostCurve(std::move(points));
}

// GROVE_PIPE_FAULT=kill:RANK:SENDS or stop:RANK:SENDS: rank RANK sends SENDS messages, then
// kills itself (SIGKILL) or stops (SIGSTOP), as a host that dies or hangs would: what the tests of
// the failure path (tests/pipe_mpi_test.sh) run. Read by the tool only; no other effect.
class FaultTransport : public ForwardingTransport {
 public:
  FaultTransport(PipeTransport& inner, int signal, int64_t sends)
      : ForwardingTransport(inner), signal_(signal), sends_left_(sends) {}
  void Send(int32_t to, int32_t tag, const PipeMessage& message) override {
    if (signal_ != 0 && sends_left_-- == 0) {
      std::fprintf(stderr, "grove pipe: rank %d: GROVE_PIPE_FAULT: %s now\n", rank(),
                   signal_ == SIGKILL ? "dying" : "stopping");
      std::fflush(stderr);
      raise(signal_);
    }
    ForwardingTransport::Send(to, tag, message);
  }

 private:
  int signal_;
  int64_t sends_left_;
};

// The fault GROVE_PIPE_FAULT asks of `rank`: a signal and a count of sends (signal 0: none).
std::pair<int, int64_t> FaultFor(int32_t rank) {
  const char* spec = std::getenv("GROVE_PIPE_FAULT");
  if (spec == nullptr || *spec == '\0') return {0, 0};
  char kind[8] = {};
  int target = -1;
  long long sends = 0;
  if (std::sscanf(spec, "%7[a-z]:%d:%lld", kind, &target, &sends) != 3 || sends < 0 ||
      (std::string(kind) != "kill" && std::string(kind) != "stop")) {
    Fail("GROVE_PIPE_FAULT: '", spec, "' is not kill:RANK:SENDS or stop:RANK:SENDS");
  }
  if (target != rank) return {0, 0};
  return {std::string(kind) == "kill" ? SIGKILL : SIGSTOP, sends};
}

std::string HostName() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

struct LinkProbe {
  double latency_seconds = 0.0;
  double bytes_per_second = 0.0;
};

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
        in.floats.push_back(0.0f);
        in.floats.back() = static_cast<float>(pause.Seconds());
        t.Send(0, kPipeToolTag, in);
      }
    }
    if (trips.empty()) return 0.0;
    std::nth_element(trips.begin(), trips.begin() + n / 2, trips.end());
    return std::max(0.0, trips[static_cast<std::size_t>(n / 2)]);
  };
  LinkProbe probe;
  if (r > 1) return probe;
  probe.latency_seconds = bounce({{1}, {}}, 51);
  const double big = bounce({{}, std::vector<float>(big_floats, 1.0f)}, 21);
  probe.bytes_per_second = big > probe.latency_seconds
                               ? big_floats * sizeof(float) / (big - probe.latency_seconds)
                               : 1e12;
  return probe;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
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

// One rank's whole part. Returns rank 0's tokens (of the first run), nothing on the others.
std::vector<int32_t> RunRank(const PipeOptions& o, const Loaded& pair, PipeTransport& transport) {
  const auto [fault_signal, fault_sends] = FaultFor(transport.rank());
  FaultTransport t(transport, fault_signal, fault_sends);
  const std::vector<PipelineRunKind> kinds = RunKinds(o.runs);
  const int32_t n_layer = pair.target->config().n_layer;
  const std::vector<LayerRange> stages = RealSplit(o, n_layer, t.size());
  const auto n_stages = static_cast<int32_t>(stages.size());
  if (t.size() != n_stages + 1) {
    Fail(n_stages, " stages and the draft need ", n_stages + 1, " ranks, not ", t.size(),
         " (mpirun -np ", n_stages + 1, ")");
  }
  const Tokenizer& tok = *pair.target->tokenizer();
  const std::vector<int32_t> prompt = tok.Encode(o.prompt, tok.add_bos_by_default());
  CheckRanksAgree(t, kPipeToolTag, RankInputs(o, pair, prompt, stages));
  const SamplerParams& sampling = o.sampling;
  sampling.Validate();
  PipelineOptions options{.stages = stages,
                          .groups = UniformGroups(n_stages, o.group_size),
                          .sampling = sampling,
                          .n_predict = o.n_predict,
                          .n_threads = o.threads,
                          .timeout_ms = static_cast<int32_t>(o.timeout_seconds * 1000),
                          .width = o.width,
                          .children = o.children,
                          .static_tree = o.static_tree};
  if (std::find(kinds.begin(), kinds.end(), PipelineRunKind::kPipeDec) != kinds.end()) {
    const int32_t depth =
        options.groups.empty() ? n_stages : static_cast<int32_t>(options.groups.size());
    const int32_t most =
        PipeDecMaxWidth(*pair.target, static_cast<int32_t>(prompt.size()), o.n_predict, depth);
    if (most < 1) Fail("PipeDec: no tree fits the context beside the prompt and -n ", o.n_predict);
    options.width = std::min(options.width, most);
  }
  const int32_t stpp_tokens = StaticPipelineTree(options).size() + 1;

  // Loading and measuring take each rank its own time (the measurements one rank after another):
  // meanwhile a rank waits up to 10 minutes; during the runs, --timeout.
  const auto run_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(o.timeout_seconds * 1000));
  t.set_timeout(std::max(run_timeout, std::chrono::milliseconds(600000)));
  // Where the ranks are: rank 0 gathers the hosts' names and says whether they are one.
  const int32_t r = t.rank();
  std::vector<std::string> hosts;
  std::vector<double> resident;  // MiB per rank, after loading
  if (r == 0) {
    hosts.push_back(HostName());
    resident.push_back(ResidentMiB());
    for (int32_t k = 1; k < t.size(); ++k) {
      const PipeMessage m = t.Receive(k, kPipeToolTag);
      hosts.emplace_back(m.ints.begin(), m.ints.end());
      resident.push_back(m.floats.at(0));
    }
  } else {
    const std::string host = HostName();
    t.Send(0, kPipeToolTag, {{host.begin(), host.end()}, {static_cast<float>(ResidentMiB())}});
  }
  const bool one_host =
      Broadcast(t, 0, kPipeToolTag,
                {{std::all_of(hosts.begin(), hosts.end(),
                              [&](const std::string& h) { return h == hosts[0]; })},
                 {}})
          .ints.at(0) != 0;
  // Whether the ranks take turns on the host's cores (more ranks' threads than cores on one host):
  // then the other units' weights pass through the caches between two forwards of a unit, and
  // its cost is measured with them flushed.
  const bool shared_cores = static_cast<unsigned>(t.size() * std::max(1, o.threads)) >
                            std::max(1u, std::thread::hardware_concurrency());
  // Each unit's cost, one rank after another (so that they do not share the cores); rank 0
  // gathers them.
  if (r > 0) t.Receive(r - 1, kPipeToolTag);
  const VerifyCostCurve own =
      MeasureUnit(pair, prompt, r - 1, stages, std::max({options.width, stpp_tokens, 8}), o.threads,
                  one_host && shared_cores);
  if (r + 1 < t.size()) t.Send(r + 1, kPipeToolTag, {});
  std::vector<VerifyCostCurve> curves;
  if (r == 0) {
    for (int32_t k = 1; k < t.size(); ++k) {
      std::string unused;
      curves.push_back(ReadCurve(t.Receive(k, kPipeToolTag), &unused));
    }
  } else {
    t.Send(0, kPipeToolTag, CurveMessage(own, ""));
  }
  const LinkProbe link =
      ProbeLink(t, static_cast<std::size_t>(options.width) * pair.target->config().n_embd);

  // Every rank ready: from here on a silent rank is reported after --timeout.
  Broadcast(t, 0, kPipeToolTag, {});
  t.set_timeout(run_timeout);
  std::vector<PipelineResult> first(kinds.size());
  std::vector<std::vector<double>> seconds_per_token(kinds.size());
  std::vector<std::vector<PipelineResult::RankTimes>> splits(kinds.size());
  for (int rep = 0; rep < o.reps; ++rep) {
    for (std::size_t i = 0; i < kinds.size(); ++i) {
      PipelineResult run = RunPipelineRank(kinds[i], t, pair.target, pair.draft, prompt, options);
      seconds_per_token[i].push_back(run.decode_seconds /
                                     std::max<std::size_t>(1, run.tokens.size() - 1));
      // Every rank's time split, kept by rank 0 from the last repetition.
      const PipelineResult::RankTimes& own_times = run.times;
      if (r != 0) {
        t.Send(0, kPipeToolTag,
               {{},
                {static_cast<float>(own_times.forward), static_cast<float>(own_times.wait),
                 static_cast<float>(own_times.other)}});
      } else {
        splits[i].assign(1, own_times);
        for (int32_t q = 1; q < t.size(); ++q) {
          const PipeMessage m = t.Receive(q, kPipeToolTag);
          splits[i].push_back({m.floats.at(0), m.floats.at(1), m.floats.at(2)});
        }
      }
      if (rep == 0) {
        first[i] = std::move(run);
      } else if (run.tokens != first[i].tokens) {
        Fail(PipelineRunName(kinds[i]), " generated other tokens in repetition ", rep + 1);
      }
    }
  }
  if (r != 0) return {};
  for (std::size_t i = 1; i < kinds.size(); ++i) {
    if (first[i].tokens != first[0].tokens) {
      Fail(PipelineRunName(kinds[i]), " generated other tokens than ", PipelineRunName(kinds[0]),
           " (a bug: please report it)");
    }
  }
  // The clock, fed what was measured: on one host the ranks share its cores.
  const auto cores = static_cast<int32_t>(
      one_host ? std::max(1u, std::thread::hardware_concurrency()) / std::max(1, o.threads) : 0);
  const PipelineCosts costs =
      MeasuredStageCosts(curves, own, link.latency_seconds, link.bytes_per_second,
                         4.0 * pair.target->config().n_embd, cores);

  std::string layers, units;
  for (std::size_t k = 0; k < stages.size(); ++k) {
    layers += (k ? "," : "") + std::to_string(stages[k].size());
    char text[64];
    std::snprintf(text, sizeof text, "%s%.3f/%.3f", k ? ", " : "", 1e3 * curves[k].Seconds(1),
                  1e3 * curves[k].Seconds(curves[k].max_size()));
    units += text;
  }
  std::printf(
      "grove pipe: %s transport, %d ranks on %s%s: the draft and %d stages (layers %s)%s; %zu "
      "prompt tokens, %zu generated, %s; PipeDec w %d, c %d; STPP tree %s; %d "
      "repetitions\n"
      "measured: stage t(1)/t(%d) = %s ms, draft t(1) = %.3f ms; link %.1f us, %.2f GB/s; the "
      "clock's "
      "cores: %s\n",
      o.transport.c_str(), t.size(), hosts[0].c_str(), one_host ? "" : " and others", n_stages,
      layers.c_str(),
      options.groups.empty() ? "" : (", groups of " + std::to_string(o.group_size)).c_str(),
      prompt.size(), first[0].tokens.size(), DescribeSampling(o.sampling).c_str(), options.width,
      options.children, options.static_tree.c_str(), o.reps,
      curves.empty() ? 1 : curves[0].max_size(), units.c_str(), 1e3 * own.Seconds(1),
      1e6 * link.latency_seconds, link.bytes_per_second / 1e9,
      cores ? std::to_string(cores).c_str() : "one per unit");
  std::printf("resident memory after loading (each rank loads only what it runs), MiB:");
  for (std::size_t q = 0; q < resident.size(); ++q) {
    std::printf("%s %s %.1f", q ? "," : "", q ? ("stage " + std::to_string(q)).c_str() : "draft",
                resident[q]);
  }
  std::printf("%s\n\n", o.transport == "threads" ? " (one process: the same figure)" : "");
  std::printf(
      "| run | ms/token (median) | min - max | clock's ms/token | clock / real | hit rate | "
      "timesteps/token |\n|---|---:|---|---:|---:|---:|---:|\n");
  std::vector<double> real(kinds.size());
  for (std::size_t i = 0; i < kinds.size(); ++i) {
    const PipelineResult& run = first[i];
    const double n = static_cast<double>(run.tokens.size()) - 1;
    real[i] = 1e3 * Median(seconds_per_token[i]);
    const auto [lo, hi] =
        std::minmax_element(seconds_per_token[i].begin(), seconds_per_token[i].end());
    const double clocked = n > 0 ? 1e3 * ClockedSeconds(run, kinds[i], costs) / n : 0.0;
    std::printf("| %s | %.3f | %.3f - %.3f | %.3f | %.2f | %.3f | %.2f |\n",
                PipelineRunName(kinds[i]), real[i], 1e3 * *lo, 1e3 * *hi, clocked,
                real[i] > 0 ? clocked / real[i] : 0.0, run.hit_rate(),
                n > 0 ? run.timesteps / n : 0.0);
  }
  for (std::size_t i = 0; i < kinds.size(); ++i) {
    for (std::size_t j = 0; j < kinds.size(); ++j) {
      if (kinds[i] == PipelineRunKind::kPipeDec && j != i && real[i] > 0) {
        std::printf("PipeDec / %s: %.2fx\n", PipelineRunName(kinds[j]), real[j] / real[i]);
      }
    }
  }
  std::printf(
      "\nwhere each rank's time went, ms per token (last repetition): its unit's forwards / "
      "waiting for messages / the rest\n| run |");
  for (int32_t q = 0; q < t.size(); ++q) {
    std::printf(q == 0 ? " draft (rank 0) |" : " stage %d |", q);
  }
  std::printf("\n|---|");
  for (int32_t q = 0; q < t.size(); ++q) std::printf("---|");
  std::printf("\n");
  for (std::size_t i = 0; i < kinds.size(); ++i) {
    const double n = std::max(1.0, static_cast<double>(first[i].tokens.size()) - 1);
    std::printf("| %s |", PipelineRunName(kinds[i]));
    for (const PipelineResult::RankTimes& s : splits[i]) {
      std::printf(" %.3f / %.3f / %.3f |", 1e3 * s.forward / n, 1e3 * s.wait / n,
                  1e3 * s.other / n);
    }
    std::printf("\n");
  }
  std::printf("outputs: identical across the runs and repetitions\n");
  if (o.print_tokens) {
    std::printf("tokens:");
    for (int32_t token : first[0].tokens) std::printf(" %d", token);
    std::printf("\n");
  }
  std::fflush(stdout);
  return first[0].tokens;
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
