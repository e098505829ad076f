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
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/timer.h"
#include "bundled_models.h"
#include "cmd_pipe.h"
#include "commands.h"
#include "model/model.h"
#include "option_checks.h"
#include "pipe/pipedec.h"
#include "pipe/pipeline_clock.h"
#include "pipe/stage_split.h"
#include "sampling_options.h"
#include "speculate/auto_planner.h"
#include "speculate/plain_decoding.h"
#include "tokenize/tokenizer.h"

namespace grove::cli {

std::vector<int> IntList(const std::string& text, const char* option) {
  std::vector<int> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
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
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (item.empty() || *end != '\0' || !(v >= 0) || v > 1e7) {
      Fail(option, ": '", item, "' is not a number of microseconds >= 0");
    }
    out.push_back(v);
  }
  return out;
}

std::vector<int32_t> UniformGroups(int32_t n_stages, int32_t group_size) {
  std::vector<int32_t> out;
  if (group_size <= 1) return out;
  for (int32_t left = n_stages; left > 0; left -= group_size) {
    out.push_back(std::min(left, group_size));
  }
  return out;
}

namespace {

struct Runs {
  PipelineResult pp, stpp, pipedec;
};

Runs RunAll(const std::shared_ptr<const ModelParameters>& target,
            const std::shared_ptr<const ModelParameters>& draft, std::span<const int32_t> prompt,
            const PipelineOptions& options, const std::vector<int32_t>& plain) {
  Runs r{RunPlainPipeline(target, prompt, options),
         RunStaticTreePipeline(target, draft, prompt, options),
         RunPipeDec(target, draft, prompt, options)};
  for (const auto& [name, run] :
       {std::pair{"PP", &r.pp}, std::pair{"STPP", &r.stpp}, std::pair{"PipeDec", &r.pipedec}}) {
    if (run->tokens != plain) {
      Fail(name, " on ", options.stages.size(),
           " stages generated other tokens than plain decoding (a bug: please report it)");
    }
  }
  return r;
}

double MsPerToken(const PipelineResult& run, PipelineRunKind kind, const PipelineCosts& costs) {
  const auto tokens = static_cast<double>(run.tokens.size()) - 1;  // the first is the prefill's
  return tokens > 0 ? 1e3 * ClockedSeconds(run, kind, costs) / tokens : 0.0;
}

}  // namespace

PipeOptions WithPairResolved(const PipeOptions& o) {
  PipeOptions out = o;
  DefaultToBundledPair(out.model, out.draft, out.pair);
  if (out.draft.empty()) Fail("grove pipe needs a draft model (--draft)");
  if (out.n_predict < 2) Fail("-n ", out.n_predict, " must be >= 2");
  return out;
}

int RunPipeSimulation(const PipeOptions& o) {
  const PipeOptions opt = WithPairResolved(o);
  if (o.width < 1 || o.children < 1) Fail("--width and --children must be >= 1");
  if (!(o.bandwidth_gbps > 0)) Fail("--bandwidth-gbps ", o.bandwidth_gbps, " must be > 0");
  StaticPipelineTree({.static_tree = o.static_tree});  // a bad --static-tree stops here
  const std::vector<double> links = NumberList(o.link_us, "--link-us");
  const std::vector<int> sim_stages = IntList(o.sim_stages, "--sim-stages");
  const std::vector<int> widths = IntList(o.sweep_width, "--sweep-width");
  const std::vector<int> children = IntList(o.sweep_children, "--sweep-children");

  auto target = Model::Load(opt.model, {.n_threads = o.threads});
  auto draft = Model::Load(opt.draft, {.n_threads = o.threads});
  if (draft->config().n_vocab != target->config().n_vocab) {
    Fail("the draft has ", draft->config().n_vocab, " tokens but the target has ",
         target->config().n_vocab);
  }
  const int32_t n_layer = target->config().n_layer;
  std::vector<std::vector<LayerRange>> splits;
  if (!o.split.empty()) {
    splits.push_back(ParseLayerSplit(o.split, n_layer));
  } else {
    for (int s : IntList(o.stages, "--stages")) splits.push_back(SplitLayers(n_layer, s));
  }
  const Tokenizer& tok = *target->tokenizer();
  const std::vector<int32_t> prompt = tok.Encode(o.prompt, tok.add_bos_by_default());
  const SamplerParams& sampling = o.sampling;
  sampling.Validate();
  // The widest tree the model's context holds beside the prompt and the generation; a split
  // PipeDec cannot run is refused here, before anything is measured.
  auto fitted_width = [&](int32_t n_stages, int32_t wanted) {
    const std::vector<int32_t> groups = UniformGroups(n_stages, o.group_size);
    const auto depth = groups.empty() ? n_stages : static_cast<int32_t>(groups.size());
    const int32_t most = PipeDecMaxWidth(*target->parameters(), static_cast<int32_t>(prompt.size()),
                                         o.n_predict, depth);
    if (most < 1) {
      Fail("PipeDec on ", n_stages, " stages: no tree fits the context beside ", prompt.size(),
           " prompt tokens and ", o.n_predict, " generated ones (use a smaller -n)");
    }
    return std::min(wanted, most);
  };
  for (const auto& split : splits) fitted_width(static_cast<int32_t>(split.size()), o.width);
  const std::vector<int32_t> plain =
      GeneratePlain(*target, prompt, sampling, {.n_predict = o.n_predict}, {});
  // The verify curves the clock uses, after the prompt.
  const auto position = static_cast<int32_t>(prompt.size());
  Batch batch;
  target->cache(0).Clear();
  target->ForwardChain(prompt, 0, 0, batch, false);
  const VerifyCostCurve target_curve =
      MeasureVerifyCost(*target, 0, plain.front(), position, 128, 0.5);
  draft->ForwardChain(prompt, 0, 0, batch, false);
  const VerifyCostCurve draft_curve =
      MeasureVerifyCost(*draft, 0, plain.front(), position, 128, 0.2);
  const double bytes_per_token = 4.0 * target->config().n_embd;
  const double bandwidth = o.bandwidth_gbps * 1e9 / 8;

  PipelineOptions base{.sampling = sampling,
                       .n_predict = o.n_predict,
                       .n_threads = o.threads,
                       .width = o.width,
                       .children = o.children,
                       .static_tree = o.static_tree};
  std::printf(
      "grove pipe: %s (%d layers) with %s; %zu prompt tokens, %d generated, %s; "
      "tree w %d, c %d; PipeDec groups of %d stages; STPP tree %s; links %s us, %.1f Gbit/s; stage "
      "compute t(m) / stages (t(1) = %.3f ms, t(32) = %.3f ms), draft t(1) = %.3f ms\n\n",
      opt.model.c_str(), n_layer, opt.draft.c_str(), prompt.size(), o.n_predict,
      DescribeSampling(o.sampling).c_str(), o.width, o.children, o.group_size,
      o.static_tree.c_str(), o.link_us.c_str(), o.bandwidth_gbps, 1e3 * target_curve.Seconds(1),
      1e3 * target_curve.Seconds(std::min(32, target_curve.max_size())),
      1e3 * draft_curve.Seconds(1));
  std::printf(
      "| stages | layers | w | link us | PP ms/token | STPP | PipeDec | PipeDec/PP | PipeDec/STPP "
      "| "
      "STPP/PP | hit rate | timesteps/token | outputs |\n"
      "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
  auto report = [&](const std::vector<LayerRange>& stages, const char* layers) {
    PipelineOptions options = base;
    options.stages = stages;
    const auto n = static_cast<int32_t>(stages.size());
    options.groups = UniformGroups(n, o.group_size);
    options.width = fitted_width(n, o.width);
    const Runs r = RunAll(target->parameters(), draft->parameters(), prompt, options, plain);
    for (double link : links) {
      const PipelineCosts costs =
          EvenStageCosts(target_curve, draft_curve, n, link * 1e-6, bandwidth, bytes_per_token);
      const double pp = MsPerToken(r.pp, PipelineRunKind::kPlain, costs);
      const double stpp = MsPerToken(r.stpp, PipelineRunKind::kStaticTree, costs);
      const double pipedec = MsPerToken(r.pipedec, PipelineRunKind::kPipeDec, costs);
      std::printf(
          "| %d | %s | %d | %.0f | %.3f | %.3f | %.3f | %.2fx | %.2fx | %.2fx | %.3f | %.2f | "
          "identical |\n",
          n, layers, options.width, link, pp, stpp, pipedec, pp / pipedec, stpp / pipedec,
          pp / stpp, r.pipedec.hit_rate(),
          static_cast<double>(r.pipedec.timesteps) / (r.pipedec.tokens.size() - 1));
    }
    std::fflush(stdout);
  };
  for (const auto& split : splits) {
    std::string layers;
    for (const LayerRange& r : split) {
      if (!layers.empty()) layers += ",";
      layers += std::to_string(r.size());
    }
    report(split, layers.c_str());
  }
  for (int s : sim_stages) report(SpreadLayers(n_layer, s), "virtual");

  if (!sim_stages.empty() && (widths.size() > 1 || children.size() > 1)) {
    const int s = sim_stages[sim_stages.size() / 2];
    const PipelineCosts costs = EvenStageCosts(target_curve, draft_curve, s, links.front() * 1e-6,
                                               bandwidth, bytes_per_token);
    std::printf(
        "\nPipeDec on %d virtual stages, link %.0f us: the tree's width w and children c\n"
        "| w | c | hit rate | ms/token | timesteps/token |\n|---:|---:|---:|---:|---:|\n",
        s, links.front());
    auto sweep = [&](int w, int c) {
      if (fitted_width(s, w) < w) {
        std::printf("| %d | %d | - | does not fit the context | - |\n", w, c);
        return;
      }
      PipelineOptions options = base;
      options.stages = SpreadLayers(n_layer, s);
      options.groups = UniformGroups(s, o.group_size);
      options.width = w;
      options.children = c;
      const PipelineResult r =
          RunPipeDec(target->parameters(), draft->parameters(), prompt, options);
      if (r.tokens != plain) Fail("PipeDec with w ", w, ", c ", c, " generated other tokens");
      std::printf("| %d | %d | %.3f | %.3f | %.2f |\n", w, c, r.hit_rate(),
                  MsPerToken(r, PipelineRunKind::kPipeDec, costs),
                  static_cast<double>(r.timesteps) / (r.tokens.size() - 1));
      std::fflush(stdout);
    };
    for (int w : widths) sweep(w, o.children);
    for (int c : children) {
      if (c != o.children) sweep(fitted_width(s, o.width), c);
    }
  }
  return 0;
}

void AddPipeCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("pipe", kPipeSummary);
  auto o = std::make_shared<PipeOptions>();
  cmd->add_option("-m,--model", o->model, "Target GGUF (default: the bundled pair in models/)");
  cmd->add_option("--draft", o->draft, "Draft GGUF (default: the bundled draft)");
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
  cmd->add_option("--stages", o->stages,
                  "Stage counts to run, comma-separated (each <= layers); a real run takes one "
                  "(mpi: the ranks but one, by default)")
      ->capture_default_str();
  cmd->add_option("--split", o->split, "One explicit split instead: layers per stage, e.g. 3,3,2");
  cmd->add_option("--sim-stages", o->sim_stages,
                  "Virtual stage counts (may exceed the layers), comma-separated; '' for none")
      ->capture_default_str();
  cmd->add_option("--group-size", o->group_size,
                  "PipeDec: stages per group, run one after another in a timestep (the paper's "
                  "7 groups of 2); the tree is as deep as there are groups")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--link-us", o->link_us, "Link latency per message, microseconds (a list)")
      ->capture_default_str();
  cmd->add_option("--bandwidth-gbps", o->bandwidth_gbps, "Link bandwidth, Gbit/s")
      ->capture_default_str();
  cmd->add_option("--width", o->width, "PipeDec: most nodes in a tree layer (w)")
      ->capture_default_str()
      ->check(CLI::Range(1, 512));
  cmd->add_option("--children", o->children, "PipeDec: most children of a node (c)")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  cmd->add_option("--static-tree", o->static_tree, "STPP's tree (kconfig:..., chain:K, ...)")
      ->capture_default_str();
  cmd->add_option("--sweep-width", o->sweep_width, "w values on the middle virtual stage count")
      ->capture_default_str();
  cmd->add_option("--sweep-children", o->sweep_children,
                  "c values on the middle virtual stage count")
      ->capture_default_str();
  cmd->add_option("--runs", o->runs, "Real runs: which of pp, stpp, pipedec, comma-separated")
      ->capture_default_str();
  cmd->add_option("--reps", o->reps, "Real runs: repetitions of each (the median is reported)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--timeout", o->timeout_seconds,
                  "Real runs: seconds a rank waits for another before it reports it dead")
      ->capture_default_str()
      ->check(FiniteRange(0.1, 86400.0));
  cmd->add_flag("--print-tokens", o->print_tokens, "Real runs: print the generated token ids");
  cmd->add_option("-t,--threads", o->threads, "Threads of each forward context (each rank's)")
      ->capture_default_str()
      ->check(ThreadCount());
  cmd->add_flag("-v,--verbose", o->verbose, "Print debug diagnostics");
  cmd->callback([o] {
    InstallStderrLog(o->verbose);
    const int status = o->transport == "simulate" ? RunPipeSimulation(*o) : RunPipeRanks(*o);
    if (status != 0) throw CLI::RuntimeError(status);
  });
}

}  // namespace grove::cli
