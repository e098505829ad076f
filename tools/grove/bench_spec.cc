#include "bench_spec.h"

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "bench_stats.h"
#include "kernels/kernel_set.h"
#include "model/model.h"
#include "model/tokenizer.h"
#include "prompt_file.h"
#include "speculate/model_drafter.h"
#include "speculate/ngram_drafter.h"
#include "speculate/spec_decoder.h"

namespace grove::cli {
namespace {

// Used when no --prompts file is given: short openings in the style of small story models.
const std::vector<std::string> kDefaultPrompts = {
    "Once upon a time", "One day, a little girl named Lily", "The big dog ran to the park and",
    "Tom and his mom went to the store. They wanted to buy"};

struct SpecRow {
  std::string spec;
  std::string rule;
  std::vector<double> tps;  // per repetition
  double tau = 0;           // over every step of every repetition
  int64_t steps = 0, tokens = 0;
  bool identical = true;
};

}  // namespace

bool RunSpecBench(const SpecBenchOptions& o, const std::string& model_path, int threads, int repetitions,
                  bool json, uint64_t seed) {
  if (o.draft.empty()) Fail("bench --spec needs --draft (a GGUF draft model, or 'ngram')");
  if (o.n_predict < 1) Fail("-n ", o.n_predict, " must be >= 1 for bench --spec");
  const std::vector<std::string> prompts = o.prompts.empty() ? kDefaultPrompts : ReadPromptFile(o.prompts);
  ModelOptions mo{.n_threads = threads};
  auto target = Model::Load(model_path, mo);
  if (!target->tokenizer()) Fail("'", model_path, "' has no tokenizer");
  std::unique_ptr<Model> draft_model;
  SamplerParams sampling{.temperature = o.temperature, .seed = seed};
  if (o.temperature > 0) sampling = SamplerParams{.temperature = o.temperature, .top_k = 0, .top_p = 1, .min_p = 0, .seed = seed};
  sampling.Validate();
  std::unique_ptr<Drafter> drafter;
  if (o.draft == "ngram") {
    drafter = std::make_unique<NgramDrafter>(target->config().n_vocab);
  } else {
    mo.n_ctx = target->n_ctx();
    draft_model = Model::Load(o.draft, mo);
    drafter = std::make_unique<ModelDrafter>(*draft_model, *target, sampling);
  }
  TreePlanInputs inputs{.max_tokens = target->max_batch()};
  if (!o.accept.empty()) {
    AcceptanceFile a = ReadAcceptanceFile(o.accept);
    inputs.acceptance = a.acceptance;
    inputs.draft_seconds_per_level = a.draft_seconds_per_level;
  }
  if (!o.profile.empty()) inputs.verify_cost = ReadVerifyProfile(o.profile);
  const bool greedy = sampling.greedy();
  std::vector<std::unique_ptr<TreeBuilder>> builders;
  std::vector<SpecRow> rows(o.specs.size());
  std::vector<VerifyRule> rules;
  for (std::size_t i = 0; i < o.specs.size(); ++i) {
    TreePlan spec = ParseTreePlan(o.specs[i], inputs);
    const bool deterministic = drafter->deterministic() || !spec.is_static();
    const VerifyRule rule = DefaultVerifyRule(greedy, deterministic);
    const ChildDraw draw = RequiredChildDraw(rule);
    rows[i].spec = spec.text;
    rows[i].rule = std::string(VerifyRuleName(rule));
    rules.push_back(rule);
    builders.push_back(std::make_unique<TreeBuilder>(std::move(spec), draw, target->config().n_vocab, seed));
  }
  std::vector<std::vector<int32_t>> encoded;
  for (const std::string& p : prompts) encoded.push_back(target->tokenizer()->Encode(p, true));

  SpecOptions so{.sampling = sampling, .n_predict = o.n_predict, .stop_at_eog = false};
  std::vector<double> plain_tps;
  // Warm-up: page in both models and settle the thread pool; not counted.
  GeneratePlain(*target, encoded[0], so, {});
  for (int r = 0; r < repetitions; ++r) {
    std::vector<std::vector<int32_t>> plain_out;
    double seconds = 0;
    int64_t tokens = 0;
    for (std::size_t p = 0; p < encoded.size(); ++p) {
      so.sequence = p;
      PlainTiming timing;
      plain_out.push_back(GeneratePlain(*target, encoded[p], so, {}, &timing));
      seconds += timing.generation_seconds;
      tokens += static_cast<int64_t>(plain_out.back().size());
    }
    plain_tps.push_back(tokens / seconds);
    for (std::size_t i = 0; i < builders.size(); ++i) {
      so.rule = rules[i];
      double spec_seconds = 0;
      int64_t spec_tokens = 0;
      for (std::size_t p = 0; p < encoded.size(); ++p) {
        so.sequence = p;
        SpecDecoder decoder(*target, *drafter, *builders[i], so);
        std::vector<int32_t> out = decoder.Generate(encoded[p], {});
        spec_seconds += decoder.stats().total_seconds;
        spec_tokens += static_cast<int64_t>(out.size());
        rows[i].steps += decoder.stats().steps;
        rows[i].tokens += decoder.stats().generated;
        if (greedy && out != plain_out[p]) rows[i].identical = false;
      }
      rows[i].tps.push_back(spec_tokens / spec_seconds);
    }
    std::fprintf(stderr, "\rbench --spec: repetition %d/%d", r + 1, repetitions);
  }
  std::fprintf(stderr, "\n");
  const SampleStats plain = Summarize(plain_tps);
  bool all_identical = true;
  for (SpecRow& row : rows) {
    row.tau = row.steps ? static_cast<double>(row.tokens) / row.steps : 0;
    all_identical = all_identical && row.identical;
  }
  if (json) {
    nlohmann::ordered_json j = {{"model", model_path}, {"draft", o.draft}, {"threads", target->pool().size()},
                                {"kernels", ActiveKernels().name}, {"temperature", o.temperature},
                                {"n_predict", o.n_predict}, {"prompts", prompts.size()}, {"repetitions", repetitions},
                                {"plain", {{"tps_mean", plain.mean}, {"tps_sd", plain.sd}, {"tps_samples", plain_tps}}}};
    for (const SpecRow& row : rows) {
      const SampleStats s = Summarize(row.tps);
      j["specs"].push_back({{"spec", row.spec}, {"verify", row.rule}, {"tau", row.tau}, {"tps_mean", s.mean},
                            {"tps_sd", s.sd}, {"tps_samples", row.tps}, {"speedup", s.mean / plain.mean},
                            {"greedy_identical", greedy ? nlohmann::ordered_json(row.identical) : nullptr}});
    }
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("target %s | draft %s | %d threads | temperature %g | %zu prompts x %d tokens, %d repetitions\n\n",
                model_path.c_str(), o.draft.c_str(), target->pool().size(), o.temperature, prompts.size(),
                o.n_predict, repetitions);
    std::printf("| spec | verify | τ | t/s | speedup | greedy output |\n|---|---|---|---|---|---|\n");
    std::printf("| plain | - | 1.00 | %.2f ± %.2f | 1.00 | - |\n", plain.mean, plain.sd);
    for (const SpecRow& row : rows) {
      const SampleStats s = Summarize(row.tps);
      std::printf("| %s | %s | %.2f | %.2f ± %.2f | %.2f | %s |\n", row.spec.c_str(), row.rule.c_str(), row.tau,
                  s.mean, s.sd, s.mean / plain.mean, greedy ? (row.identical ? "identical" : "DIFFERS") : "n/a");
    }
  }
  return all_identical;
}

}  // namespace grove::cli
