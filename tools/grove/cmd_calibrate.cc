// grove calibrate: the acceptance vector p_1..p_W of a (target, draft, temperature) on a prompt
// file, measured on-policy as Sequoia does (digest 001, §2.5, estimator E1): decode each prompt
// with a star tree of W children (drawn without replacement, or the top-W at temperature 0) and
// count which child the verifier accepts. Also measures the draft cost per tree level, which
// sequoia:auto needs.
#include <cstdio>
#include <string>

#include "base/error.h"
#include "commands.h"
#include "engine_options.h"
#include "model/model.h"
#include "option_checks.h"
#include "output_path.h"
#include "progress_line.h"
#include "prompt_file.h"
#include "sampling_options.h"
#include "speculate/draft_source.h"
#include "speculate/plan_files.h"
#include "speculate/session.h"
#include "tokenize/tokenizer.h"

namespace grove::cli {
namespace {

struct CalibrateOptions {
  std::string model, draft, prompts, out;
  int32_t width = 16;
  int32_t n_predict = 128;
  int32_t max_prompts = 200;
  SamplerParams sampling{.temperature = 0.0f};
  uint64_t seed = 1;
  int threads = 0;
};

void RunCalibrate(CalibrateOptions o) {
  o.sampling.seed = o.seed;
  o.sampling.Validate();
  if (o.width < 1 || o.width > 256) Fail("--width ", o.width, " must be in 1..256");
  if (o.n_predict < 1) Fail("-n ", o.n_predict, " must be >= 1");
  CheckOutputFile(o.out, "-o", {.inputs = {o.model, o.draft, o.prompts}});
  const std::vector<std::string> prompts = ReadPromptFile(o.prompts);
  ModelOptions mo{.n_threads = o.threads};
  auto target = Model::Load(o.model, mo);
  if (!target->tokenizer()) Fail("'", o.model, "' has no tokenizer");
  if (o.width >= target->config().n_vocab)
    Fail("--width ", o.width, " must be below the vocabulary size");
  OpenedDrafter drafter = OpenDrafter(o.draft, *target);
  // A star tree of W children, verified with the default rule for the sampling (children drawn as
  // that rule needs), as Sequoia's estimator E1 prescribes.
  const SpeculationPolicy policy = ResolveSpeculation(
      {.plan = "kconfig:" + std::to_string(o.width)},
      TreePlanInputs{.max_tokens = target->max_batch()}, *drafter.drafter, o.sampling);

  std::vector<int64_t> counts(o.width + 1, 0);
  double draft_seconds = 0;
  int64_t steps = 0;
  const std::size_t n = std::min<std::size_t>(prompts.size(), o.max_prompts);
  ProgressLine progress;
  for (std::size_t i = 0; i < n; ++i) {
    SpeculativeSession session(*target, *drafter.drafter, policy,
                               {.n_predict = o.n_predict, .sequence = i});
    session.Generate(target->tokenizer()->Encode(prompts[i], true), {});
    const SpeculationStats& s = session.stats();
    for (std::size_t k = 0; k < s.first_rank.size(); ++k) counts[k] += s.first_rank[k];
    draft_seconds += s.times.draft_forward;  // one level per step: the star's
    steps += s.steps - s.plain_steps;
    progress.Update(static_cast<int64_t>(i + 1), static_cast<int64_t>(n),
                    StrCat("calibrating: prompt ", i + 1, "/", n, ", ", steps, " steps"));
  }
  if (steps == 0) Fail("calibrate: no step verified a tree (prompts too long for the context?)");
  AcceptanceFile file{.draft_seconds_per_level = draft_seconds / static_cast<double>(steps)};
  std::string shown;
  for (int32_t k = 1; k <= o.width; ++k) {
    const double pk = static_cast<double>(counts[k]) / static_cast<double>(steps);
    file.acceptance.push_back(pk);
    if (k <= 8) shown += (k > 1 ? ", " : "") + std::to_string(pk).substr(0, 6);
  }
  WriteAcceptanceFile(o.out, file,
                      {.none = static_cast<double>(counts[0]) / static_cast<double>(steps),
                       .width = o.width,
                       .sampling = o.sampling,
                       .steps = steps,
                       .prompts = static_cast<int64_t>(n),
                       .target = o.model,
                       .draft = o.draft,
                       .method = "on-policy star tree (Sequoia E1)"});
  std::printf(
      "acceptance (p_1..p_8): %s ... | none %.3f | %lld steps over %zu prompts | draft %.3f "
      "ms/level\nwrote %s\n",
      shown.c_str(), static_cast<double>(counts[0]) / steps, static_cast<long long>(steps), n,
      1e3 * draft_seconds / steps, o.out.c_str());
}

}  // namespace

void AddCalibrateCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "calibrate", "Measure the acceptance vector of a target/draft pair (for sequoia trees)");
  auto o = std::make_shared<CalibrateOptions>();
  AddModelOption(*cmd, o->model, ModelRole::kRequiredTarget);
  AddDraftOption(*cmd, o->draft, DraftRole::kModel)->required();
  cmd->add_option("--prompts", o->prompts, "Text file of prompts separated by blank lines")
      ->required();
  cmd->add_option("-o,--out", o->out, "Output JSON")->required();
  cmd->add_option("--width", o->width, "Children of the star tree: entries of the vector")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  cmd->add_option("-n,--n-predict", o->n_predict, "Tokens decoded per prompt")
      ->capture_default_str()
      ->check(CLI::Range(1, 1'000'000));
  cmd->add_option("--max-prompts", o->max_prompts, "Use at most this many prompts")
      ->capture_default_str()
      ->check(CLI::Range(1, 1'000'000));
  AddSamplingOptions(*cmd, o->sampling);
  cmd->add_option("-s,--seed", o->seed, "Seed")->capture_default_str();
  AddThreadsOption(*cmd, o->threads);
  cmd->callback([o] { RunCalibrate(*o); });
}

}  // namespace grove::cli
