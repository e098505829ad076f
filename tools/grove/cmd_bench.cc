// grove bench: tokens/s of prompt processing (ppN) and generation (tgN) in the manner of
// llama-bench, achieved weight bandwidth beside the machine's measured read bandwidth, resident
// memory, and the verification cost curve t(n) that the tree optimiser consumes (--verify-curve,
// --profile-out).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/replacing_file.h"
#include "base/resident_memory.h"
#include "base/thread_pool.h"
#include "bench_bandwidth.h"
#include "bench_speculative.h"
#include "bench_stats.h"
#include "bench_timing.h"
#include "commands.h"
#include "cuda/device.h"
#include "engine_options.h"
#include "io/gguf.h"
#include "kernels/cpu_features.h"
#include "kernels/kernel_set.h"
#include "model/config.h"
#include "model/model.h"
#include "option_checks.h"
#include "output_path.h"
#include "sampling_options.h"
#include "speculate/plan_files.h"

namespace grove::cli {
namespace {

using Json = nlohmann::ordered_json;

constexpr int32_t kMaxBatch = kDefaultMaxBatch;
constexpr int kProbePasses = 5;

struct BenchOptions {
  std::vector<std::string> models;
  std::vector<int32_t> n_prompt{512};
  std::vector<int32_t> n_gen{128};
  int repetitions = 5;
  std::vector<int> threads;  // empty: all hardware threads
  std::string output = "md";
  std::vector<int32_t> curve;
  int32_t curve_prefix = 128;
  std::string profile_out;
  int64_t probe_mib = 1024;
  uint64_t seed = 1;
  bool verbose = false;
  std::string device = "auto";
  std::string draft_device = "auto";
  std::string cache_type = "f32";
  SpecBenchOptions spec;  // --spec given: speculative decoding benchmark instead
};

// What the table says about a model file.
struct ModelFacts {
  std::string path;
  std::string name;  // file name: the table compares files, often of one model in several types
  uint64_t size_bytes = 0;  // all tensor data
  uint64_t params = 0;
  std::string types;          // types of the matrices, most bytes first: "q8_0", "q4_K+q6_K"
  uint64_t weight_bytes = 0;  // read per forward (a mixture: with every expert)
  // A mixture's experts: how many per layer, and the bytes of one expert of one layer (its gate,
  // up and down rows), which a forward reads once per expert it runs in that layer.
  int32_t n_expert = 0;
  uint64_t expert_bytes = 0;  // of all experts of all layers
  uint64_t bytes_per_expert = 0;
  uint64_t kv_bytes = 0;  // of one sequence's cache, for the bench's context
  // KV bytes one more token costs once the sliding-window layers' rings are full (their global
  // layers' share): what a long context costs per token.
  uint64_t kv_bytes_per_token = 0;
  std::string kv_type;  // the KV cache's element type, f32 or f16
};

struct TestResult {
  std::string test;  // "pp512", "tg128"
  int32_t n_prompt = 0;
  int32_t n_gen = 0;
  std::vector<double> seconds;  // per repetition
  SampleStats tokens_per_s;
  SampleStats gbps;
};

struct CurvePoint {
  int32_t n = 0;
  SampleStats seconds;
  double ratio = 0;              // median t(n) / median t(1)
  double experts_per_layer = 0;  // a mixture's: mean experts read per expert layer
};

// One (model, thread count) load and everything measured on it.
struct BenchRun {
  ModelFacts model;
  int threads = 0;
  int32_t n_ctx = 0;
  std::optional<ResidentMemory> after_load;
  std::optional<ResidentMemory> after_runs;
  bool peak_reset = false;
  std::vector<TestResult> tests;
  std::vector<CurvePoint> curve;
};

std::string FormatBytes(uint64_t bytes) {
  char buf[32];
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024) {
    std::snprintf(buf, sizeof buf, "%.2f GiB", b / (1024.0 * 1024 * 1024));
  } else if (b >= 1024.0 * 1024) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", b / (1024.0 * 1024));
  } else {
    std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  }
  return buf;
}

std::string FormatCount(uint64_t n) {
  char buf[32];
  const double x = static_cast<double>(n);
  if (x >= 1e9) {
    std::snprintf(buf, sizeof buf, "%.2f B", x / 1e9);
  } else if (x >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.2f M", x / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f K", x / 1e3);
  }
  return buf;
}

ModelFacts DescribeModel(const Model& model, const std::string& path) {
  ModelFacts f;
  f.path = path;
  f.name = std::filesystem::path(path).filename().string();
  std::map<GgmlType, uint64_t> matrix_bytes;
  for (const GgufTensor& t : model.gguf().tensors()) {
    f.size_bytes += t.n_bytes;
    f.params += static_cast<uint64_t>(t.n_elements());
    if (t.shape.size() >= 2) matrix_bytes[t.type] += t.n_bytes;
    if (t.name.ends_with("_exps.weight")) f.expert_bytes += t.n_bytes;
  }
  std::vector<std::pair<uint64_t, GgmlType>> by_bytes;
  by_bytes.reserve(matrix_bytes.size());
  for (auto [type, bytes] : matrix_bytes) by_bytes.emplace_back(bytes, type);
  std::sort(by_bytes.rbegin(), by_bytes.rend());
  for (auto [bytes, type] : by_bytes)
    f.types += (f.types.empty() ? "" : "+") + std::string(GgmlTypeName(type));
  f.weight_bytes = model.weight_bytes();
  const ModelConfig& c = model.config();
  f.n_expert = c.n_expert;
  int32_t expert_layers = 0;
  for (const LayerKind& kind : c.layer_kinds)
    expert_layers += kind.feed_forward == FeedForwardKind::kExperts;
  if (c.n_expert > 0 && expert_layers > 0)
    f.bytes_per_expert = f.expert_bytes / (static_cast<uint64_t>(c.n_expert) * expert_layers);
  f.kv_bytes = model.cache(0).bytes();
  f.kv_type = KvCacheTypeName(model.cache_type());
  f.kv_bytes_per_token =
      2ull * model.cache(0).element_bytes() * c.kv_dim() *
      static_cast<uint64_t>(c.n_layer - (model.cache(0).ring_rows() > 0 ? c.n_local_layers() : 0));
  return f;
}

void Validate(BenchOptions& o) {
  if (o.repetitions < 1) Fail("-r ", o.repetitions, ": repetitions must be at least 1");
  for (int32_t p : o.n_prompt)
    if (p < 0) Fail("-p ", p, ": prompt length must be >= 0 (0 skips the test)");
  for (int32_t n : o.n_gen)
    if (n < 0) Fail("-n ", n, ": generation length must be >= 0 (0 skips the test)");
  if (o.threads.empty()) o.threads.push_back(PoolThreadCount(0));
  for (int& t : o.threads) {
    if (t < 0) Fail("-t ", t, ": thread count must be >= 0 (0: all hardware threads)");
    t = PoolThreadCount(t);
  }
  for (int32_t n : o.curve) {
    if (n < 1 || n > kMaxBatch)
      Fail("--verify-curve: n=", n, " must be in 1..", kMaxBatch, " (tokens in one forward)");
  }
  std::sort(o.curve.begin(), o.curve.end());
  o.curve.erase(std::unique(o.curve.begin(), o.curve.end()), o.curve.end());
  // Every ratio is relative to t(1), so one token is always measured.
  if (!o.curve.empty() && o.curve.front() != 1) o.curve.insert(o.curve.begin(), 1);
  if (o.curve_prefix < 0) Fail("--curve-prefix ", o.curve_prefix, " must be >= 0");
  if (o.probe_mib < 0)
    Fail("--probe-mib ", o.probe_mib, " must be >= 0 (0 skips the bandwidth probe)");
  const bool any_test =
      std::any_of(o.n_prompt.begin(), o.n_prompt.end(), [](int32_t p) { return p > 0; }) ||
      std::any_of(o.n_gen.begin(), o.n_gen.end(), [](int32_t n) { return n > 0; });
  if (!any_test && o.curve.empty())
    Fail("nothing to measure: -p and -n are all 0 and no --verify-curve");
  for (const std::string& m : o.models) {
    if (!o.profile_out.empty()) CheckOutputFile(o.profile_out, "--profile-out", {.inputs = {m}});
  }
  if (!o.profile_out.empty() && o.models.size() * o.threads.size() != 1) {
    Fail("--profile-out describes one (model, threads) pair, but ", o.models.size(), " model(s) x ",
         o.threads.size(), " thread count(s) were given");
  }
  // Every test must fit the model's context: a 100000-token prompt on a 512-token model would run
  // for an hour past what the model can attend to.
  for (const std::string& path : o.models) {
    const int64_t n_ctx = ConfigFromGguf(*GgufFile::Open(path)).n_ctx_train;
    auto check = [&](int64_t needed, const std::string& what) {
      if (needed > n_ctx) {
        Fail(what, " needs a context of ", needed, " tokens, but '", path, "' holds ", n_ctx);
      }
    };
    for (int32_t p : o.n_prompt) check(p, StrCat("-p ", p));
    for (int32_t n : o.n_gen) check(int64_t{kGeneratePrefix} + n, StrCat("-n ", n));
    if (!o.curve.empty()) {
      check(int64_t{o.curve_prefix} + o.curve.back(),
            StrCat("--curve-prefix ", o.curve_prefix, " with --verify-curve n=", o.curve.back()));
    }
  }
}

// Context for the longest test, and no more: the KV cache is part of the resident memory reported.
int32_t ContextNeeded(const BenchOptions& o) {
  int32_t n_ctx = 1;
  for (int32_t p : o.n_prompt) n_ctx = std::max(n_ctx, p);
  for (int32_t n : o.n_gen)
    if (n > 0) n_ctx = std::max(n_ctx, kGeneratePrefix + n);
  if (!o.curve.empty()) n_ctx = std::max(n_ctx, o.curve_prefix + o.curve.back());
  return n_ctx;
}

TestResult TimeTest(BenchTimer& timer, const ModelFacts& model, int32_t n_prompt, int32_t n_gen,
                    int reps) {
  TestResult r;
  r.n_prompt = n_prompt;
  r.n_gen = n_gen;
  r.test = n_prompt > 0 ? "pp" + std::to_string(n_prompt) : "tg" + std::to_string(n_gen);
  auto run = [&] { return n_prompt > 0 ? timer.Prompt(n_prompt) : timer.Generate(n_gen); };
  run();  // warm-up: page in the weights, settle the clocks and the pool; not counted
  std::vector<double> tps, gbps;
  for (int rep = 0; rep < reps; ++rep) {
    const TimedRun t = run();
    r.seconds.push_back(t.seconds);
    tps.push_back((n_prompt + n_gen) / t.seconds);
    // Bytes read: every weight once per forward but the experts, which count as they were run.
    const double bytes =
        static_cast<double>(model.weight_bytes - model.expert_bytes) * t.forwards +
        static_cast<double>(model.bytes_per_expert) * static_cast<double>(t.experts_read);
    gbps.push_back(bytes / t.seconds / 1e9);
  }
  r.tokens_per_s = Summarize(tps);
  r.gbps = Summarize(gbps);
  return r;
}

std::vector<CurvePoint> TimeCurve(BenchTimer& timer, const BenchOptions& o) {
  const auto samples = timer.VerifyCurve(o.curve, o.curve_prefix, o.repetitions);
  std::vector<CurvePoint> curve;
  for (std::size_t i = 0; i < o.curve.size(); ++i) {
    curve.push_back({o.curve[i], Summarize(samples[i].seconds), 0,
                     Summarize(samples[i].experts_per_layer).mean});
  }
  for (CurvePoint& p : curve) p.ratio = p.seconds.median / curve.front().seconds.median;
  return curve;
}

// ---- output
// ---------------------------------------------------------------------------------------

constexpr const char* kTableHeader =
    "| model | size | params | type | threads | test | t/s | GB/s | of probe |\n"
    "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |\n";

void PrintRow(const BenchRun& run, const TestResult& t, const BandwidthProbe* probe) {
  char share[16] = "-";
  if (probe) std::snprintf(share, sizeof share, "%.0f%%", 100.0 * t.gbps.mean / probe->gbps_median);
  std::printf("| %s | %s | %s | %s | %d | %s | %.2f ± %.2f | %.1f | %s |\n", run.model.name.c_str(),
              FormatBytes(run.model.size_bytes).c_str(), FormatCount(run.model.params).c_str(),
              run.model.types.c_str(), run.threads, t.test.c_str(), t.tokens_per_s.mean,
              t.tokens_per_s.sd, t.gbps.mean, share);
  std::fflush(stdout);
}

void PrintMemory(const BenchRun& r) {
  if (!r.after_load || !r.after_runs) {
    std::printf("memory: %s, %d threads: /proc/self/status unavailable\n", r.model.name.c_str(),
                r.threads);
    return;
  }
  std::printf(
      "memory: %s, %d threads: resident %s after load, %s after runs, peak %s%s "
      "(file tensors %s + %s KV cache %s for %d tokens, %s per token beyond it + scratch)\n",
      r.model.name.c_str(), r.threads, FormatBytes(r.after_load->rss_bytes).c_str(),
      FormatBytes(r.after_runs->rss_bytes).c_str(), FormatBytes(r.after_runs->peak_bytes).c_str(),
      r.peak_reset ? "" : " (process-wide)", FormatBytes(r.model.size_bytes).c_str(),
      r.model.kv_type.c_str(), FormatBytes(r.model.kv_bytes).c_str(), r.n_ctx,
      FormatBytes(r.model.kv_bytes_per_token).c_str());
}

void PrintCurve(const BenchRun& r, const BenchOptions& o) {
  std::printf("\nverify curve: %s, %d threads, chain of n tokens after %d, %d repetitions\n\n",
              r.model.name.c_str(), r.threads, o.curve_prefix, o.repetitions);
  // A mixture's verify time follows the experts its tokens read, not n: say how many.
  const bool experts = r.model.n_expert > 0;
  std::printf(
      "| n | t(n) ms (median) | sd ms | t(n)/t(1) |%s\n| ---: | ---: | ---: | ---: |%s\n",
      experts ? StrCat(" experts read per layer (of ", r.model.n_expert, ") |").c_str() : "",
      experts ? " ---: |" : "");
  for (const CurvePoint& p : r.curve) {
    std::printf("| %d | %.2f | %.2f | %.2f |", p.n, p.seconds.median * 1e3, p.seconds.sd * 1e3,
                p.ratio);
    if (experts) std::printf(" %.1f |", p.experts_per_layer);
    std::printf("\n");
  }
}

Json CurveJson(const std::vector<CurvePoint>& curve) {
  Json points = Json::array();
  for (const CurvePoint& p : curve) {
    points.push_back({{"n", p.n},
                      {"seconds_median", p.seconds.median},
                      {"seconds_sd", p.seconds.sd},
                      {"seconds_min", p.seconds.min},
                      {"seconds_max", p.seconds.max},
                      {"ratio", p.ratio},
                      {"experts_per_layer", p.experts_per_layer}});
  }
  return points;
}

Json MemoryJson(const std::optional<ResidentMemory>& m) {
  if (!m) return nullptr;
  return {{"rss_bytes", m->rss_bytes}, {"peak_bytes", m->peak_bytes}};
}

Json ProbeJson(const BandwidthProbe* p) {
  if (!p) return nullptr;
  return {{"threads", p->threads}, {"buffer_bytes", p->buffer_bytes},
          {"passes", p->passes},   {"gbps_median", p->gbps_median},
          {"gbps_sd", p->gbps_sd}, {"gbps_max", p->gbps_max}};
}

Json RunJson(const BenchRun& r, const BenchOptions& o, const BandwidthProbe* probe) {
  Json tests = Json::array();
  for (const TestResult& t : r.tests) {
    Json ns = Json::array();
    for (double s : t.seconds) ns.push_back(static_cast<int64_t>(s * 1e9));
    tests.push_back(
        {{"test", t.test},
         {"n_prompt", t.n_prompt},
         {"n_gen", t.n_gen},
         {"repetitions", o.repetitions},
         {"samples_ns", ns},
         {"avg_ts", t.tokens_per_s.mean},
         {"stddev_ts", t.tokens_per_s.sd},
         {"median_ts", t.tokens_per_s.median},
         {"avg_gbps", t.gbps.mean},
         {"stddev_gbps", t.gbps.sd},
         {"probe_fraction", probe ? Json(t.gbps.mean / probe->gbps_median) : Json(nullptr)}});
  }
  Json j = {{"model", r.model.name},
            {"model_path", r.model.path},
            {"model_size_bytes", r.model.size_bytes},
            {"model_params", r.model.params},
            {"model_types", r.model.types},
            {"weight_bytes", r.model.weight_bytes},
            {"threads", r.threads},
            {"n_ctx", r.n_ctx},
            {"kv_cache_bytes", r.model.kv_bytes},
            {"kv_bytes_per_token", r.model.kv_bytes_per_token},
            {"memory_after_load", MemoryJson(r.after_load)},
            {"memory_after_runs", MemoryJson(r.after_runs)},
            {"peak_is_per_run", r.peak_reset},
            {"tests", tests}};
  if (!r.curve.empty()) {
    j["verify_curve"] = {{"prefix_tokens", o.curve_prefix},
                         {"repetitions", o.repetitions},
                         {"points", CurveJson(r.curve)}};
  }
  return j;
}

// The hardware profile (docs/profile-format.md), for the tree optimiser.
void WriteProfile(const std::string& path, const BenchRun& r, const BenchOptions& o,
                  const BandwidthProbe* probe) {
  VerifyProfile profile{.model = r.model.name,
                        .model_path = r.model.path,
                        .model_types = r.model.types,
                        .model_size_bytes = r.model.size_bytes,
                        .weight_bytes = r.model.weight_bytes,
                        .threads = r.threads,
                        .prefix_tokens = o.curve_prefix,
                        .repetitions = o.repetitions};
  for (const CurvePoint& p : r.curve) {
    profile.curve.push_back({.n = p.n,
                             .seconds_median = p.seconds.median,
                             .seconds_sd = p.seconds.sd,
                             .seconds_min = p.seconds.min,
                             .seconds_max = p.seconds.max});
  }
  if (probe) profile.bandwidth_gbps = probe->gbps_median;
  WriteVerifyProfile(path, profile);
}

// ---- the command
// ----------------------------------------------------------------------------------

// bench --spec: speculative decoding of one target against its plain decoding.
void RunSpecBenchCommand(const BenchOptions& o) {
  if (o.models.size() != 1) Fail("bench --spec takes one target model (-m)");
  if (o.repetitions < 1) Fail("-r ", o.repetitions, " must be >= 1");
  if (o.output != "md" && o.output != "json") Fail("-o ", o.output, ": expected md or json");
  SpecBenchOptions spec = o.spec;
  spec.device = ParseComputeDevice(o.device);
  spec.draft_device = ParseComputeDevice(o.draft_device);
  spec.cache_type = ParseKvCacheType(o.cache_type);
  const bool identical =
      RunSpecBench(spec, o.models[0], o.threads, o.repetitions, o.output == "json", o.seed);
  if (!identical)
    Fail("a speculative greedy output differed from plain decoding: this is a bug in grove");
}

// The read bandwidth of each thread count, first, before any model is resident: its buffer must
// come from DRAM, and it is freed before the peak-memory figures of the models start. On the GPU:
// its device-to-device copy.
std::map<int, BandwidthProbe> ProbeBandwidth(const BenchOptions& o, bool on_gpu) {
  std::map<int, BandwidthProbe> probes;
  if (o.probe_mib <= 0) return probes;
  if (on_gpu) {
    constexpr int kCopies = 20;
    const uint64_t bytes = static_cast<uint64_t>(o.probe_mib) << 20;
    const double gbps = cuda::MeasureCopyBandwidth(bytes, kCopies) / 1e9;
    for (int t : o.threads) {
      probes[t] = BandwidthProbe{.threads = t,
                                 .buffer_bytes = bytes,
                                 .passes = kCopies,
                                 .gbps_median = gbps,
                                 .gbps_max = gbps};
    }
    return probes;
  }
  for (int t : o.threads) {
    if (probes.count(t)) continue;
    ThreadPool pool(t);
    probes[t] = MeasureReadBandwidth(pool, static_cast<uint64_t>(o.probe_mib) << 20, kProbePasses);
  }
  return probes;
}

void PrintMachine(const std::string& kernels, const std::string& cpu, bool on_gpu,
                  const std::map<int, BandwidthProbe>& probes) {
  std::printf("grove %s | kernels: %s | cpu: %s\n", GROVE_VERSION, kernels.c_str(), cpu.c_str());
  if (on_gpu) {
    const cuda::DeviceInfo gpu = cuda::Info();
    std::printf("gpu: %s (sm_%d%d, %d SMs, %.1f GiB)", gpu.name.c_str(), gpu.major, gpu.minor,
                gpu.multiprocessors, static_cast<double>(gpu.total_bytes) / (1 << 30));
    if (!probes.empty()) {
      std::printf(" | copy bandwidth, bytes read + written: %.1f GB/s over %s",
                  probes.begin()->second.gbps_median,
                  FormatBytes(probes.begin()->second.buffer_bytes).c_str());
    }
    std::printf("\n");
  } else {
    for (const auto& [t, p] : probes) {
      std::printf(
          "read bandwidth probe, %d thread%s: %.1f GB/s (median of %d passes over %s, sd %.1f, "
          "max %.1f)\n",
          t, t == 1 ? "" : "s", p.gbps_median, p.passes, FormatBytes(p.buffer_bytes).c_str(),
          p.gbps_sd, p.gbps_max);
    }
  }
  std::printf("\n%s", kTableHeader);
  std::fflush(stdout);
}

// One model at one thread count: its prompt and generation tests, its verify curve, and what it
// held in memory. `probe`: the bandwidth its rows are compared with (null: none).
BenchRun BenchModel(const BenchOptions& o, const std::string& path, int threads,
                    ComputeDevice device, bool markdown, const BandwidthProbe* probe) {
  BenchRun run;
  run.threads = threads;
  run.n_ctx = ContextNeeded(o);
  run.peak_reset = ResetPeakResident();
  ModelOptions mo;
  mo.n_threads = threads;
  mo.n_ctx = run.n_ctx;
  mo.device = device;
  mo.cache_type = ParseKvCacheType(o.cache_type);
  auto model = Model::Load(path, mo);
  run.after_load = ReadResidentMemory();
  run.model = DescribeModel(*model, path);
  BenchTimer timer(*model, o.seed);
  for (int32_t p : o.n_prompt) {
    if (p <= 0) continue;
    run.tests.push_back(TimeTest(timer, run.model, p, 0, o.repetitions));
    if (markdown) PrintRow(run, run.tests.back(), probe);
  }
  for (int32_t n : o.n_gen) {
    if (n <= 0) continue;
    run.tests.push_back(TimeTest(timer, run.model, 0, n, o.repetitions));
    if (markdown) PrintRow(run, run.tests.back(), probe);
  }
  if (!o.curve.empty()) run.curve = TimeCurve(timer, o);
  run.after_runs = ReadResidentMemory();
  return run;
}

void RunBench(BenchOptions o) {
  InstallStderrLog(o.verbose);
  if (!o.spec.specs.empty()) return RunSpecBenchCommand(o);
  Validate(o);
  const bool markdown = o.output == "md";
  const std::string kernels = ActiveKernels().name;
  const std::string cpu = CpuFeatureString(HostCpuFeatures());
  const ComputeDevice device = ParseComputeDevice(o.device);
  const bool on_gpu =
      device == ComputeDevice::kCuda || (device == ComputeDevice::kAuto && cuda::DeviceCount() > 0);
  const std::map<int, BandwidthProbe> probes = ProbeBandwidth(o, on_gpu);
  auto probe_for = [&](int t) -> const BandwidthProbe* {
    auto it = probes.find(t);
    return it == probes.end() ? nullptr : &it->second;
  };
  if (markdown) PrintMachine(kernels, cpu, on_gpu, probes);
  std::vector<BenchRun> runs;
  for (const std::string& path : o.models) {
    for (int threads : o.threads)
      runs.push_back(BenchModel(o, path, threads, device, markdown, probe_for(threads)));
  }
  if (!o.profile_out.empty())
    WriteProfile(o.profile_out, runs.front(), o, probe_for(runs.front().threads));
  if (markdown) {
    std::printf("\n");
    for (const BenchRun& r : runs) PrintMemory(r);
    for (const BenchRun& r : runs)
      if (!r.curve.empty()) PrintCurve(r, o);
    return;
  }
  Json probes_json = Json::array();
  for (const auto& [t, p] : probes) probes_json.push_back(ProbeJson(&p));
  Json runs_json = Json::array();
  for (const BenchRun& r : runs) runs_json.push_back(RunJson(r, o, probe_for(r.threads)));
  const Json doc = {{"grove_version", GROVE_VERSION},
                    {"kernels", kernels},
                    {"cpu_features", cpu},
                    {"bandwidth_probes", probes_json},
                    {"runs", runs_json}};
  std::printf("%s\n", doc.dump(2).c_str());
}

}  // namespace

void AddBenchCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "bench",
      "Measure prompt processing (ppN) and generation (tgN) speed, achieved weight bandwidth "
      "against the "
      "machine's measured read bandwidth, resident memory, and the verification cost curve t(n)");
  auto o = std::make_shared<BenchOptions>();
  AddModelsOption(*cmd, o->models);
  cmd->add_option("-p,--n-prompt", o->n_prompt, "Prompt lengths to time, comma-separated (0 skips)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("-n,--n-gen", o->n_gen, "Generation lengths to time, comma-separated (0 skips)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("-r,--repetitions", o->repetitions,
                  "Timed repetitions of each test (after one warm-up)")
      ->capture_default_str();
  AddThreadCountsOption(*cmd, o->threads);
  cmd->add_option("-o,--output", o->output, "Output format: md (tables) or json")
      ->check(CLI::IsMember({"md", "json"}))
      ->capture_default_str();
  cmd->add_option(
         "--verify-curve", o->curve,
         "Token counts n at which to time one verification forward t(n), e.g. 1,2,4,8,16,32,64 "
         "(n=1 is always added: ratios are t(n)/t(1))")
      ->delimiter(',');
  cmd->add_option("--curve-prefix", o->curve_prefix,
                  "Committed tokens in the cache before each verify forward")
      ->capture_default_str();
  cmd->add_option("--profile-out", o->profile_out,
                  "Write the verify curve and bandwidth as a hardware profile (JSON, "
                  "docs/profile-format.md)")
      ->needs("--verify-curve");
  cmd->add_option("--probe-mib", o->probe_mib,
                  "Buffer of the read-bandwidth probe in MiB (0 skips the probe)")
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of the random token ids")->capture_default_str();
  cmd->add_flag("-v,--verbose", o->verbose, "Print debug diagnostics");
  AddDeviceOption(*cmd, o->device);
  AddDraftDeviceOption(*cmd, o->draft_device);
  AddCacheTypeOption(*cmd, o->cache_type);
  cmd->add_option(
      "--spec", o->spec.specs,
      "Benchmark speculative decoding with this tree spec (repeatable) against plain decoding");
  AddDraftsOption(*cmd, o->spec.drafts);
  cmd->add_option("--prompts", o->spec.prompts, "With --spec: prompt file (blank-line separated)");
  AddAcceptOption(*cmd, o->spec.accept);
  cmd->add_option("--profile", o->spec.profile,
                  "With --spec: verify profile JSON for sequoia:auto");
  AddSamplingOptions(*cmd, o->spec.sampling);  // with --spec
  cmd->add_option("--spec-tokens", o->spec.n_predict, "With --spec: tokens generated per prompt");
  cmd->callback([o] { RunBench(*o); });
}

}  // namespace grove::cli
