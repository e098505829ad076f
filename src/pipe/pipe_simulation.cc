#include "pipe/pipe_simulation.h"

#include <algorithm>
#include <utility>

#include "base/error.h"
#include "pipe/pipeline_clock.h"
#include "speculate/plain_decoding.h"
#include "speculate/verify_cost.h"

namespace grove {
namespace {

// The model's verify curve with the prompt in its cache, as decoding after it sees it.
VerifyCostCurve CurveAfterPrompt(Model& model, std::span<const int32_t> prompt, int32_t token,
                                 double budget_seconds) {
  Batch batch;
  model.cache(0).Clear();
  model.ForwardChain(prompt, 0, 0, batch, false);
  return MeasureVerifyCost(model, 0, token, static_cast<int32_t>(prompt.size()), 128,
                           budget_seconds);
}

double MsPerToken(const PipelineResult& run, PipelineRunKind kind, const PipelineCosts& costs) {
  const auto tokens = static_cast<double>(run.tokens.size()) - 1;  // the first is the prefill's
  return tokens > 0 ? 1e3 * ClockedSeconds(run, kind, costs) / tokens : 0.0;
}

double TimestepsPerToken(const PipelineResult& run) {
  return static_cast<double>(run.timesteps) / (run.tokens.size() - 1);
}

}  // namespace

std::vector<int32_t> UniformGroups(int32_t n_stages, int32_t group_size) {
  std::vector<int32_t> out;
  if (group_size <= 1) return out;
  for (int32_t left = n_stages; left > 0; left -= group_size) {
    out.push_back(std::min(left, group_size));
  }
  return out;
}

int32_t PipeDecFittedWidth(const ModelParameters& target, int32_t prompt_tokens, int32_t n_predict,
                           int32_t n_stages, int32_t group_size, int32_t wanted) {
  const std::vector<int32_t> groups = UniformGroups(n_stages, group_size);
  const auto depth = groups.empty() ? n_stages : static_cast<int32_t>(groups.size());
  const int32_t most = PipeDecMaxWidth(target, prompt_tokens, n_predict, depth);
  if (most < 1) {
    Fail("PipeDec on ", n_stages, " stages: no tree fits the context beside ", prompt_tokens,
         " prompt tokens and ", n_predict, " generated ones (use a smaller -n)");
  }
  return std::min(wanted, most);
}

PipeSimulation::PipeSimulation(Model& target, Model& draft, std::vector<int32_t> prompt,
                               const PipeSimulationOptions& options)
    : target_(target),
      draft_(draft),
      prompt_(std::move(prompt)),
      options_(options),
      plain_(GeneratePlain(target, prompt_, options.pipeline.sampling,
                           {.n_predict = options.pipeline.n_predict}, {})),
      target_curve_(CurveAfterPrompt(target, prompt_, plain_.front(), 0.5)),
      draft_curve_(CurveAfterPrompt(draft, prompt_, plain_.front(), 0.2)) {}

int32_t PipeSimulation::FittedWidth(int32_t n_stages, int32_t wanted) const {
  return PipeDecFittedWidth(*target_.parameters(), static_cast<int32_t>(prompt_.size()),
                            options_.pipeline.n_predict, n_stages, options_.group_size, wanted);
}

PipelineOptions PipeSimulation::OptionsFor(const std::vector<LayerRange>& stages) const {
  PipelineOptions options = options_.pipeline;
  options.stages = stages;
  options.groups = UniformGroups(static_cast<int32_t>(stages.size()), options_.group_size);
  return options;
}

PipelineCosts PipeSimulation::CostsFor(int32_t n_stages, double link_us) const {
  const double bytes_per_token = 4.0 * target_.config().n_embd;  // an f32 hidden row
  return EvenStageCosts(target_curve_, draft_curve_, n_stages, link_us * 1e-6,
                        options_.link_bytes_per_second, bytes_per_token);
}

std::vector<PipeSimulationRow> PipeSimulation::Run(const std::vector<LayerRange>& stages,
                                                   std::span<const double> links_us) const {
  PipelineOptions options = OptionsFor(stages);
  const auto n = static_cast<int32_t>(stages.size());
  options.width = FittedWidth(n, options.width);
  const auto target = target_.parameters();
  const auto draft = draft_.parameters();
  const PipelineResult pp = RunPlainPipeline(target, prompt_, options);
  const PipelineResult stpp = RunStaticTreePipeline(target, draft, prompt_, options);
  const PipelineResult pipedec = RunPipeDec(target, draft, prompt_, options);
  for (const auto& [name, run] :
       {std::pair{"PP", &pp}, std::pair{"STPP", &stpp}, std::pair{"PipeDec", &pipedec}}) {
    if (run->tokens != plain_) {
      Fail(name, " on ", n,
           " stages generated other tokens than plain decoding (a bug: please report it)");
    }
  }
  std::vector<PipeSimulationRow> rows;
  for (double link : links_us) {
    const PipelineCosts costs = CostsFor(n, link);
    rows.push_back({.stages = n,
                    .width = options.width,
                    .link_us = link,
                    .pp_ms = MsPerToken(pp, PipelineRunKind::kPlain, costs),
                    .stpp_ms = MsPerToken(stpp, PipelineRunKind::kStaticTree, costs),
                    .pipedec_ms = MsPerToken(pipedec, PipelineRunKind::kPipeDec, costs),
                    .hit_rate = pipedec.hit_rate(),
                    .timesteps_per_token = TimestepsPerToken(pipedec)});
  }
  return rows;
}

std::optional<PipeSweepPoint> PipeSimulation::Sweep(const std::vector<LayerRange>& stages,
                                                    int32_t width, int32_t children,
                                                    double link_us) const {
  const auto n = static_cast<int32_t>(stages.size());
  if (FittedWidth(n, width) < width) return std::nullopt;
  PipelineOptions options = OptionsFor(stages);
  options.width = width;
  options.children = children;
  const PipelineResult r = RunPipeDec(target_.parameters(), draft_.parameters(), prompt_, options);
  if (r.tokens != plain_)
    Fail("PipeDec with w ", width, ", c ", children, " generated other tokens");
  return PipeSweepPoint{
      .hit_rate = r.hit_rate(),
      .ms_per_token = MsPerToken(r, PipelineRunKind::kPipeDec, CostsFor(n, link_us)),
      .timesteps_per_token = TimestepsPerToken(r)};
}

}  // namespace grove
