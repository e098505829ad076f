// grove pipe: pipeline-parallel decoding of the (bundled) pair through the target's layers split
// into stages, in one process: plain pipeline parallelism (PP), static-tree speculation through the
// pipeline (STPP) and PipeDec, each checked token for token against plain decoding, with PipeDec's
// hit rate and timesteps. Their per-token latency comes from the virtual clock
// (pipe/pipeline_clock.h): the stages' compute from the target's measured verify curve split evenly
// over the stages, the draft's measured, links modelled (--link-us, --bandwidth-gbps). --sim-stages
// runs the same logic on more stages than the model has layers; --sweep-width and
// --sweep-children vary the tree on the middle one of those.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/text_list.h"
#include "bundled_models.h"
#include "cmd_pipe.h"
#include "commands.h"
#include "engine_options.h"
#include "model/model.h"
#include "option_checks.h"
#include "pipe/pipe_simulation.h"
#include "pipe/pipedec.h"
#include "pipe/stage_split.h"
#include "sampling_options.h"
#include "speculate/model_drafter.h"
#include "tokenize/tokenizer.h"

namespace grove::cli {

std::vector<int> IntList(const std::string& text, const char* option) {
  std::vector<int> out;
  for (const std::string_view view : SplitList(text)) {
    const std::string item(view);
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 1 || v > 100000) {
      Fail(option, ": '", item, "' is not a count >= 1");
    }
    out.push_back(static_cast<int>(v));
  }
  return out;
}

std::vector<double> NumberList(const std::string& text, const char* option) {
  std::vector<double> out;
  for (const std::string_view view : SplitList(text)) {
    const std::string item(view);
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (item.empty() || *end != '\0' || !(v >= 0) || v > 1e7) {
      Fail(option, ": '", item, "' is not a number of microseconds >= 0");
    }
    out.push_back(v);
  }
  return out;
}

PipeOptions WithPairResolved(const PipeOptions& o) {
  PipeOptions out = o;
  DefaultToBundledPair(out.model, out.draft, out.pair);
  if (out.draft.empty()) Fail("grove pipe needs a draft model (--draft)");
  if (out.n_predict < 2) Fail("-n ", out.n_predict, " must be >= 2");
  return out;
}

namespace {

// The lists of --link-us, --sim-stages, --sweep-width and --sweep-children, read and checked.
struct SimulationLists {
  std::vector<double> links;
  std::vector<int> sim_stages, widths, children;
};

SimulationLists CheckSimulationOptions(const PipeOptions& o) {
  if (o.width < 1 || o.children < 1) Fail("--width and --children must be >= 1");
  if (!(o.bandwidth_gbps > 0)) Fail("--bandwidth-gbps ", o.bandwidth_gbps, " must be > 0");
  StaticPipelineTree({.static_tree = o.static_tree});  // a bad --static-tree stops here
  return {.links = NumberList(o.link_us, "--link-us"),
          .sim_stages = IntList(o.sim_stages, "--sim-stages"),
          .widths = IntList(o.sweep_width, "--sweep-width"),
          .children = IntList(o.sweep_children, "--sweep-children")};
}

// The real splits to simulate: --split, else one for each of --stages.
std::vector<std::vector<LayerRange>> RealSplits(const PipeOptions& o, int32_t n_layer) {
  std::vector<std::vector<LayerRange>> splits;
  if (!o.split.empty()) {
    splits.push_back(ParseLayerSplit(o.split, n_layer));
  } else {
    for (int s : IntList(o.stages, "--stages")) splits.push_back(SplitLayers(n_layer, s));
  }
  return splits;
}

// "3,3,2": the layers of each stage.
std::string LayerCounts(const std::vector<LayerRange>& split) {
  std::string layers;
  for (const LayerRange& r : split) {
    if (!layers.empty()) layers += ",";
    layers += std::to_string(r.size());
  }
  return layers;
}

void PrintSimulationHeader(const PipeOptions& o, const PipeOptions& opt, int32_t n_layer,
                           std::size_t prompt_tokens, const PipeSimulation& sim) {
  const VerifyCostCurve& target = sim.target_curve();
  std::printf(
      "grove pipe: %s (%d layers) with %s; %zu prompt tokens, %d generated, %s; "
      "tree w %d, c %d; PipeDec groups of %d stages; STPP tree %s; links %s us, %.1f Gbit/s; stage "
      "compute t(m) / stages (t(1) = %.3f ms, t(32) = %.3f ms), draft t(1) = %.3f ms\n\n",
      opt.model.c_str(), n_layer, opt.draft.c_str(), prompt_tokens, o.n_predict,
      DescribeSampling(o.sampling).c_str(), o.width, o.children, o.group_size,
      o.static_tree.c_str(), o.link_us.c_str(), o.bandwidth_gbps, 1e3 * target.Seconds(1),
      1e3 * target.Seconds(std::min(32, target.max_size())), 1e3 * sim.draft_curve().Seconds(1));
  std::printf(
      "| stages | layers | w | link us | PP ms/token | STPP | PipeDec | PipeDec/PP | PipeDec/STPP "
      "| "
      "STPP/PP | hit rate | timesteps/token | outputs |\n"
      "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
}

void PrintSimulationRows(const std::vector<PipeSimulationRow>& rows, const std::string& layers) {
  for (const PipeSimulationRow& r : rows) {
    std::printf(
        "| %d | %s | %d | %.0f | %.3f | %.3f | %.3f | %.2fx | %.2fx | %.2fx | %.3f | %.2f | "
        "identical |\n",
        r.stages, layers.c_str(), r.width, r.link_us, r.pp_ms, r.stpp_ms, r.pipedec_ms,
        r.pp_ms / r.pipedec_ms, r.stpp_ms / r.pipedec_ms, r.pp_ms / r.stpp_ms, r.hit_rate,
        r.timesteps_per_token);
  }
  std::fflush(stdout);
}

// PipeDec's w and c varied on the middle one of the virtual stage counts, at the first link.
void PrintSweep(const PipeOptions& o, const SimulationLists& lists, int32_t n_layer,
                const PipeSimulation& sim) {
  const int s = lists.sim_stages[lists.sim_stages.size() / 2];
  const double link = lists.links.front();
  std::printf(
      "\nPipeDec on %d virtual stages, link %.0f us: the tree's width w and children c\n"
      "| w | c | hit rate | ms/token | timesteps/token |\n|---:|---:|---:|---:|---:|\n",
      s, link);
  const std::vector<LayerRange> stages = SpreadLayers(n_layer, s);
  auto sweep = [&](int w, int c) {
    const std::optional<PipeSweepPoint> point = sim.Sweep(stages, w, c, link);
    if (!point) {
      std::printf("| %d | %d | - | does not fit the context | - |\n", w, c);
      return;
    }
    std::printf("| %d | %d | %.3f | %.3f | %.2f |\n", w, c, point->hit_rate, point->ms_per_token,
                point->timesteps_per_token);
    std::fflush(stdout);
  };
  for (int w : lists.widths) sweep(w, o.children);
  for (int c : lists.children) {
    if (c != o.children) sweep(sim.FittedWidth(s, o.width), c);
  }
}

}  // namespace

int RunPipeSimulation(const PipeOptions& o) {
  const PipeOptions opt = WithPairResolved(o);
  const SimulationLists lists = CheckSimulationOptions(o);
  auto target = Model::Load(opt.model, {.n_threads = o.threads});
  auto draft = Model::Load(opt.draft, {.n_threads = o.threads});
  CheckSameVocabularySize(draft->config(), target->config());
  const int32_t n_layer = target->config().n_layer;
  const std::vector<std::vector<LayerRange>> splits = RealSplits(o, n_layer);
  const Tokenizer& tok = *target->tokenizer();
  std::vector<int32_t> prompt = tok.Encode(o.prompt, tok.add_bos_by_default());
  o.sampling.Validate();
  // A split PipeDec cannot run is refused here, before anything is measured.
  for (const auto& split : splits) {
    PipeDecFittedWidth(*target->parameters(), static_cast<int32_t>(prompt.size()), o.n_predict,
                       static_cast<int32_t>(split.size()), o.group_size, o.width);
  }
  const std::size_t prompt_tokens = prompt.size();
  const PipeSimulation sim(*target, *draft, std::move(prompt),
                           {.pipeline = {.sampling = o.sampling,
                                         .n_predict = o.n_predict,
                                         .n_threads = o.threads,
                                         .width = o.width,
                                         .children = o.children,
                                         .static_tree = o.static_tree},
                            .group_size = o.group_size,
                            .link_bytes_per_second = o.bandwidth_gbps * 1e9 / 8});
  PrintSimulationHeader(o, opt, n_layer, prompt_tokens, sim);
  for (const auto& split : splits)
    PrintSimulationRows(sim.Run(split, lists.links), LayerCounts(split));
  for (int s : lists.sim_stages)
    PrintSimulationRows(sim.Run(SpreadLayers(n_layer, s), lists.links), "virtual");
  if (!lists.sim_stages.empty() && (lists.widths.size() > 1 || lists.children.size() > 1))
    PrintSweep(o, lists, n_layer, sim);
  return 0;
}

namespace {

// The simulator's options: stage counts and splits, the links and the trees of each run.
void AddPipeShapeOptions(CLI::App* cmd, PipeOptions& o) {
  cmd->add_option("--stages", o.stages,
                  "Stage counts to run, comma-separated (each <= layers); a real run takes one "
                  "(mpi: the ranks but one, by default)")
      ->capture_default_str();
  cmd->add_option("--split", o.split, "One explicit split instead: layers per stage, e.g. 3,3,2");
  cmd->add_option("--sim-stages", o.sim_stages,
                  "Virtual stage counts (may exceed the layers), comma-separated; '' for none")
      ->capture_default_str();
  cmd->add_option("--group-size", o.group_size,
                  "PipeDec: stages per group, run one after another in a timestep (the paper's "
                  "7 groups of 2); the tree is as deep as there are groups")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--link-us", o.link_us, "Link latency per message, microseconds (a list)")
      ->capture_default_str();
  cmd->add_option("--bandwidth-gbps", o.bandwidth_gbps, "Link bandwidth, Gbit/s")
      ->capture_default_str();
  cmd->add_option("--width", o.width, "PipeDec: most nodes in a tree layer (w)")
      ->capture_default_str()
      ->check(CLI::Range(1, 512));
  cmd->add_option("--children", o.children, "PipeDec: most children of a node (c)")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  cmd->add_option("--static-tree", o.static_tree, "STPP's tree (kconfig:..., chain:K, ...)")
      ->capture_default_str();
  cmd->add_option("--sweep-width", o.sweep_width, "w values on the middle virtual stage count")
      ->capture_default_str();
  cmd->add_option("--sweep-children", o.sweep_children,
                  "c values on the middle virtual stage count")
      ->capture_default_str();
}

// The real runs' options (--transport threads or mpi).
void AddPipeRealRunOptions(CLI::App* cmd, PipeOptions& o) {
  cmd->add_option("--runs", o.runs, "Real runs: which of pp, stpp, pipedec, comma-separated")
      ->capture_default_str();
  cmd->add_option("--reps", o.reps, "Real runs: repetitions of each (the median is reported)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--timeout", o.timeout_seconds,
                  "Real runs: seconds a rank waits for another before it reports it dead")
      ->capture_default_str()
      ->check(FiniteRange(0.1, 86400.0));
  cmd->add_flag("--print-tokens", o.print_tokens, "Real runs: print the generated token ids");
}

}  // namespace

void AddPipeCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("pipe", kPipeSummary);
  auto o = std::make_shared<PipeOptions>();
  AddModelOption(*cmd, o->model, ModelRole::kTarget);
  AddDraftOption(*cmd, o->draft, DraftRole::kBundledModel);
  AddPairOption(*cmd, o->pair);
  cmd->add_option("-p,--prompt", o->prompt, "Prompt text")->capture_default_str();
  cmd->add_option("-n,--n-predict", o->n_predict, "Tokens to generate")
      ->capture_default_str()
      ->check(CLI::Range(2, 4096));
  AddSamplingOptions(*cmd, o->sampling);
  cmd->add_option("--seed", o->sampling.seed, "Sampling seed")->capture_default_str();
  cmd->add_option("--transport", o->transport,
                  "simulate: the virtual clock; threads: a real run, every rank a thread; mpi: a "
                  "real run, this process one rank of mpirun's job")
      ->capture_default_str()
      ->check(CLI::IsMember({"simulate", "threads", "mpi"}));
  cmd->add_flag_callback(
      "--simulate", [o] { o->transport = "simulate"; }, "Same as --transport simulate");
  AddPipeShapeOptions(cmd, *o);
  AddPipeRealRunOptions(cmd, *o);
  AddThreadsOption(*cmd, o->threads, "of each forward context (each rank's)");
  cmd->add_flag("-v,--verbose", o->verbose, "Print debug diagnostics");
  cmd->callback([o] {
    InstallStderrLog(o->verbose);
    const int status = o->transport == "simulate" ? RunPipeSimulation(*o) : RunPipeRanks(*o);
    if (status != 0) throw CLI::RuntimeError(status);
  });
}

}  // namespace grove::cli
