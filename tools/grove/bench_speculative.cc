#include "bench_speculative.h"

#include <cstdio>
#include <filesystem>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "bench_stats.h"
#include "bundled_models.h"
#include "kernels/kernel_set.h"
#include "model/model.h"
#include "progress_line.h"
#include "prompt_file.h"
#include "sampling_options.h"
#include "speculate/command_speculation.h"
#include "speculate/draft_source.h"
#include "speculate/plain_decoding.h"
#include "speculate/session.h"
#include "speculate/step_cost.h"
#include "speculate/verify_cost.h"
#include "speculation_report.h"
#include "tokenize/tokenizer.h"

namespace grove::cli {
namespace {

// Used when no --prompts file is given: short openings in the style of small story models.
const std::vector<std::string> kDefaultPrompts = {
    "Once upon a time", "One day, a little girl named Lily", "The big dog ran to the park and",
    "Tom and his mom went to the store. They wanted to buy"};

struct PlanRow {
  std::size_t drafter = 0;  // index into --draft
  SpeculationPolicy policy;
  std::vector<double> tps;      // per repetition
  std::vector<double> speedup;  // per repetition, against plain decoding of the same repetition
  // per repetition: the same for whole calls, prefill and every measurement included (loading
  // is once per process here: scripts/whole-process-bench.py times whole processes)
  std::vector<double> call_speedup;
  SpeculationStats totals;  // summed over every prompt and repetition
  bool identical = true;

  void Add(const SpeculationStats& s) { totals += s; }
  // The step cost model's speed (step_cost.h) for τ, the draft forward time per step and the mean
  // verified tokens: what the step would reach if it cost nothing beyond its two forwards.
  double Predicted(const VerifyCostCurve& curve) const {
    if (totals.steps == 0) return 0;
    const double mean_rows = 1.0 + static_cast<double>(totals.tree_nodes) / totals.steps;
    return StepTokensPerSecond(totals.tau(), totals.times.draft_forward / totals.steps, curve,
                               static_cast<int32_t>(mean_rows + 0.5));
  }
};

std::string JoinDrafts(const std::vector<std::string>& drafts) {
  std::string out;
  for (const std::string& d : drafts) out += (out.empty() ? "" : ", ") + d;
  return out;
}

nlohmann::ordered_json SplitJson(const StepTimes& t, int64_t steps) {
  const double per = steps ? 1e3 / steps : 0;
  nlohmann::ordered_json split = {{"step_ms", t.total() * per}};
  for (const StepPart& p : kStepParts) split[std::string(p.key) + "_ms"] = t.*p.seconds * per;
  return split;
}

// A row for every drafter and spec, resolved as one command's speculation.
std::vector<PlanRow> PlanRows(const SpecBenchOptions& o, const std::string& model_path,
                              const Model& target, const std::vector<OpenedDrafter>& drafters,
                              const SamplerParams& sampling) {
  std::vector<PlanRow> rows;
  for (std::size_t d = 0; d < drafters.size(); ++d) {
    // The bundled pair comes with its measured acceptance (auto's starting point), as for `run`;
    // one set of inputs for every spec of the drafter.
    const TreePlanInputs inputs = CommandPlanInputs(
        {.accept_file = o.accept,
         .default_accept_file = BundledAcceptanceFor(model_path, o.drafts[d], sampling.greedy()),
         .profile_file = o.profile},
        target.max_batch());
    for (const std::string& spec : o.specs) {
      rows.push_back(
          {.drafter = d,
           .policy = ResolveSpeculation({.plan = spec}, inputs, *drafters[d].drafter, sampling)});
    }
  }
  return rows;
}

// The target's verify curve in this run, for the predicted column: measured after the first
// prompt and half the generation (the mean context of a generation), as decoding sees it.
VerifyCostCurve CurveAtMeanContext(Model& target, const std::vector<int32_t>& prompt,
                                   int32_t n_predict) {
  std::vector<int32_t> context = prompt;
  context.resize(context.size() + n_predict / 2, context.back());
  Batch batch;
  target.cache(0).Clear();
  target.ForwardChain(std::span<const int32_t>(context).first(context.size() - 1), 0, 0, batch,
                      false);
  return MeasureVerifyCost(target, 0, context.back(), static_cast<int32_t>(context.size()) - 1, 64,
                           0.3);
}

// One repetition of plain decoding over the prompts: its outputs, and its speeds in `rep`.
struct PlainRepetition {
  std::vector<std::vector<int32_t>> outputs;
  double seconds = 0;       // generation only
  double call_seconds = 0;  // prefill and generation
  int64_t tokens = 0;
};

PlainRepetition RunPlainRepetition(Model& target, const std::vector<std::vector<int32_t>>& encoded,
                                   const SamplerParams& sampling, SessionOptions so) {
  PlainRepetition rep;
  for (std::size_t p = 0; p < encoded.size(); ++p) {
    so.sequence = p;
    PlainTiming timing;
    rep.outputs.push_back(GeneratePlain(target, encoded[p], sampling, so, {}, &timing));
    rep.seconds += timing.generation_seconds;
    rep.call_seconds += timing.prefill_seconds + timing.generation_seconds;
    rep.tokens += static_cast<int64_t>(rep.outputs.back().size());
  }
  return rep;
}

// One repetition of a row over the prompts, compared with plain decoding's repetition.
void RunRowRepetition(Model& target, const std::vector<OpenedDrafter>& drafters,
                      const std::vector<std::vector<int32_t>>& encoded, SessionOptions so,
                      bool greedy, const PlainRepetition& plain, PlanRow& row) {
  double spec_seconds = 0;
  double spec_call_seconds = 0;
  int64_t spec_tokens = 0;
  // Every row of every repetition starts with what a fresh server has: a suffix drafter's
  // store holds the outputs of this row's prompts, not of the rows and repetitions before.
  if (const auto& store = drafters[row.drafter].suffix_store) store->Clear();
  for (std::size_t p = 0; p < encoded.size(); ++p) {
    so.sequence = p;
    SpeculativeSession session(target, *drafters[row.drafter].drafter, row.policy, so);
    const std::vector<int32_t> generated = session.Generate(encoded[p], {});
    spec_seconds += session.stats().total_seconds;
    spec_call_seconds += session.stats().prefill_seconds + session.stats().total_seconds;
    spec_tokens += static_cast<int64_t>(generated.size());
    row.Add(session.stats());
    if (greedy && generated != plain.outputs[p]) row.identical = false;
  }
  row.tps.push_back(spec_tokens / spec_seconds);
  row.speedup.push_back(row.tps.back() / (plain.tokens / plain.seconds));
  row.call_speedup.push_back(plain.call_seconds / spec_call_seconds);
}

void PrintPlainHeader(Model& target, const SampleStats& plain, const VerifyCostCurve& curve) {
  std::printf("\n%d threads | plain %.1f ± %.1f t/s | verify t(1) %.3f ms", target.pool().size(),
              plain.median, plain.sd, 1e3 * curve.Seconds(1));
  for (int32_t n : {2, 5, 8, 16}) {
    if (n <= curve.max_size())
      std::printf(", t(%d)/t(1) %.2f", n, curve.Seconds(n) / curve.Seconds(1));
  }
  std::printf(
      "\n(speedup: of decoding; per call: of prefill and decoding, every measurement included)"
      "\n\n| draft | spec | verify | τ | t/s | speedup | per call | predicted t/s | step ms | ");
  for (const StepPart& p : kStepParts) std::printf("%s | ", p.label);
  std::printf("greedy output |\n|---|---|---|---:|---:|---:|---:|---:|---:|");
  for (std::size_t i = 0; i < std::size(kStepParts); ++i) std::printf("---:|");
  std::printf("---|\n| - | plain | - | 1.00 | %.1f ± %.1f | 1.00 | 1.00 | - | %.3f | ",
              plain.median, plain.sd, 1e3 / plain.median);
  for (std::size_t i = 0; i < std::size(kStepParts); ++i) std::printf("| ");
  std::printf("- |\n");
}

nlohmann::ordered_json RowJson(const SpecBenchOptions& o,
                               const std::vector<OpenedDrafter>& drafters, const PlanRow& row,
                               double predicted, bool greedy) {
  const SpeculationStats& t = row.totals;
  return {{"draft", o.drafts[row.drafter]},
          {"drafter", drafters[row.drafter].drafter->name()},
          {"spec", row.policy.plan.text},
          {"verify", std::string(VerifyRuleName(row.policy.rule))},
          {"tau", t.tau()},
          {"acceptance_by_depth", t.acceptance_by_depth()},
          {"plain_steps", t.plain_steps},
          {"tps_median", Summarize(row.tps).median},
          {"tps_sd", Summarize(row.tps).sd},
          {"tps_samples", row.tps},
          {"speedup_median", Summarize(row.speedup).median},
          {"speedup_samples", row.speedup},
          {"call_speedup_median", Summarize(row.call_speedup).median},
          {"call_speedup_samples", row.call_speedup},
          {"predicted_tps", predicted},
          {"split", SplitJson(t.times, t.steps)},
          {"verify_experts_per_layer", t.verify_experts_per_layer()},
          {"greedy_identical", greedy ? nlohmann::ordered_json(row.identical) : nullptr}};
}

void PrintRow(const SpecBenchOptions& o, const PlanRow& row, double predicted, bool greedy) {
  const SampleStats s = Summarize(row.tps);
  const SpeculationStats& t = row.totals;
  const StepTimes& x = t.times;
  const double total = std::max(x.total(), 1e-12);
  std::printf("| %s | %s | %s | %.2f | %.1f ± %.1f | %.2f | %.2f | %.1f | %.3f | ",
              std::filesystem::path(o.drafts[row.drafter]).filename().string().c_str(),
              row.policy.plan.text.c_str(), std::string(VerifyRuleName(row.policy.rule)).c_str(),
              t.tau(), s.median, s.sd, Summarize(row.speedup).median,
              Summarize(row.call_speedup).median, predicted,
              t.steps ? 1e3 * x.total() / t.steps : 0.0);
  for (const StepPart& p : kStepParts) std::printf("%.0f%% | ", 100.0 * x.*p.seconds / total);
  std::printf("%s |\n", greedy ? (row.identical ? "identical" : "DIFFERS") : "n/a");
}

// One thread count: returns false if a greedy output differed.
bool BenchThreads(const SpecBenchOptions& o, const std::string& model_path, int threads,
                  int repetitions, bool json, uint64_t seed,
                  const std::vector<std::string>& prompts, nlohmann::ordered_json& out) {
  auto target = Model::Load(
      model_path,
      ModelOptions{.n_threads = threads, .device = o.device, .cache_type = o.cache_type});
  if (!target->tokenizer()) Fail("'", model_path, "' has no tokenizer");
  std::vector<OpenedDrafter> drafters;
  for (const std::string& d : o.drafts) drafters.push_back(OpenDrafter(d, *target, o.draft_device));
  SamplerParams sampling = o.sampling;
  sampling.seed = seed;
  sampling.Validate();
  std::vector<PlanRow> rows = PlanRows(o, model_path, *target, drafters, sampling);
  std::vector<std::vector<int32_t>> encoded;
  encoded.reserve(prompts.size());
  for (const std::string& p : prompts) encoded.push_back(target->tokenizer()->Encode(p, true));
  const bool greedy = sampling.greedy();
  const VerifyCostCurve curve = CurveAtMeanContext(*target, encoded[0], o.n_predict);

  std::vector<double> plain_tps;
  const SessionOptions so{.n_predict = o.n_predict, .stop_at_eog = false};
  GeneratePlain(*target, encoded[0], sampling, so, {});  // warm-up: page in, settle the pool
  ProgressLine progress;
  for (int r = 0; r < repetitions; ++r) {
    const PlainRepetition plain = RunPlainRepetition(*target, encoded, sampling, so);
    plain_tps.push_back(plain.tokens / plain.seconds);
    for (PlanRow& row : rows) RunRowRepetition(*target, drafters, encoded, so, greedy, plain, row);
    if (!json) {
      progress.Update(r + 1, repetitions,
                      StrCat("bench --spec: ", target->pool().size(), " threads, repetition ",
                             r + 1, "/", repetitions));
    }
  }
  const SampleStats plain = Summarize(plain_tps);
  nlohmann::ordered_json j = {
      {"threads", target->pool().size()},
      {"plain", {{"tps_median", plain.median}, {"tps_sd", plain.sd}, {"tps_samples", plain_tps}}},
      {"verify_curve_ms", nlohmann::ordered_json::object()}};
  for (int32_t n : {1, 2, 4, 8, 16}) {
    if (n <= curve.max_size()) j["verify_curve_ms"][std::to_string(n)] = 1e3 * curve.Seconds(n);
  }
  if (!json) PrintPlainHeader(*target, plain, curve);
  bool all_identical = true;
  for (const PlanRow& row : rows) {
    all_identical = all_identical && row.identical;
    if (json) {
      j["plans"].push_back(RowJson(o, drafters, row, row.Predicted(curve), greedy));
    } else {
      PrintRow(o, row, row.Predicted(curve), greedy);
    }
  }
  out.push_back(j);
  return all_identical;
}

}  // namespace

bool RunSpecBench(const SpecBenchOptions& o, const std::string& model_path,
                  const std::vector<int>& threads, int repetitions, bool json, uint64_t seed) {
  if (o.drafts.empty()) Fail("bench --spec needs --draft (a GGUF draft model, or 'ngram')");
  if (o.n_predict < 1) Fail("--spec-tokens ", o.n_predict, " must be >= 1");
  const std::vector<std::string> prompts =
      o.prompts.empty() ? kDefaultPrompts : ReadPromptFile(o.prompts);
  if (!json) {
    std::printf(
        "target %s | drafts %s | kernels %s | %s | %zu prompts x %d tokens, %d "
        "repetitions\n",
        model_path.c_str(), JoinDrafts(o.drafts).c_str(), ActiveKernels().name,
        DescribeSampling(o.sampling).c_str(), prompts.size(), o.n_predict, repetitions);
  }
  nlohmann::ordered_json runs = nlohmann::ordered_json::array();
  bool identical = true;
  for (int t : threads.empty() ? std::vector<int>{0} : threads) {
    identical = BenchThreads(o, model_path, t, repetitions, json, seed, prompts, runs) && identical;
  }
  if (json) {
    nlohmann::ordered_json j = {{"model", model_path},
                                {"drafts", o.drafts},
                                {"kernels", ActiveKernels().name},
                                {"temperature", o.sampling.temperature},
                                {"top_k", o.sampling.top_k},
                                {"top_p", o.sampling.top_p},
                                {"min_p", o.sampling.min_p},
                                {"n_predict", o.n_predict},
                                {"prompts", prompts.size()},
                                {"repetitions", repetitions},
                                {"runs", runs}};
    std::printf("%s\n", j.dump(2).c_str());
  }
  return identical;
}

}  // namespace grove::cli
