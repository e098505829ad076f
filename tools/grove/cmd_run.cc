// grove run -m MODEL -p PROMPT [--draft DRAFT --spec SPEC --verify RULE]: stream generated text,
// then stats. With a drafter it decodes speculatively; --compare also runs plain decoding of the
// target and reports the speedup (and, at temperature 0, checks the outputs are identical).
#include <atomic>
#include <csignal>
#include <cstdio>
#include <future>
#include <memory>
#include <string>

#include "base/error.h"
#include "base/text_file.h"
#include "base/thread_pool.h"
#include "base/timer.h"
#include "bundled_models.h"
#include "commands.h"
#include "device_option.h"
#include "draft_option.h"
#include "model/model.h"
#include "one_shot_exit.h"
#include "option_checks.h"
#include "sampling_options.h"
#include "speculate/draft_source.h"
#include "speculate/drafter_mixture.h"
#include "speculate/plain_decoding.h"
#include "speculate/plan_files.h"
#include "speculate/session.h"
#include "speculation_report.h"
#include "tokenize/tokenizer.h"

namespace grove::cli {
namespace {

std::atomic<bool> g_interrupted{false};

struct RunOptions {
  std::string model;
  std::string prompt;
  std::string prompt_file;
  int32_t n_predict = 128;
  SamplerParams sampling;
  int64_t seed = -1;
  int threads = 0;
  std::string device = "auto";
  std::string draft_device = "auto";
  std::string cache_type = "f32";
  int32_t n_ctx = 0;
  bool no_bos = false;
  bool ignore_eos = false;
  bool no_display_prompt = false;
  bool verbose = false;
  // Speculative decoding.
  std::string draft;
  std::string pair;  // bundled pair when no -m (empty: the default)
  std::string spec = "auto";
  std::string verify;
  std::string draw;
  std::string accept_file;
  std::string profile_file;
  bool compare = false;
  bool spec_given = false;  // --spec, --verify, --draw, --accept, --profile or --compare was given
};

// No -m: the bundled target, speculating with the bundled draft mixed with suffix drafting unless
// the user chose a draft.
void ResolveModels(RunOptions& o) {
  if (DefaultToBundledPair(o.model, o.draft, o.pair, BundledDraft::kMixture)) {
    std::fprintf(stderr,
                 "[grove] bundled models: target %s, draft %s (-m and --draft choose others)\n",
                 o.model.c_str(), o.draft.c_str());
  }
  if (o.draft.empty() && o.spec_given)
    Fail("--spec, --verify, --draw, --accept, --profile and --compare need a draft (--draft)");
  // One token (or none) is a plain forward of the prompt whatever drafts it: loading and feeding
  // a drafter would only make the run slower (issue 30). --compare still compares.
  if (!o.draft.empty() && o.n_predict <= 1 && !o.compare) {
    std::fprintf(stderr, "[grove] -n %d: nothing to speculate, decoding plainly\n", o.n_predict);
    o.draft.clear();
  }
}

std::string ReadPrompt(const RunOptions& o) {
  if (o.prompt_file.empty()) return o.prompt;
  return ReadTextFile(o.prompt_file, "prompt file");
}

void RunGenerate(RunOptions o) {
  InstallStderrLog(o.verbose);
  ResolveModels(o);
  const std::string prompt_text = ReadPrompt(o);
  o.sampling.seed = SeedOrRandom(o.seed);
  o.sampling.Validate();
  if (o.n_predict < 0) Fail("-n ", o.n_predict, " must be >= 0");
  if (o.threads < 0) Fail("-t ", o.threads, " must be >= 0");

  ModelOptions mo{.n_threads = o.threads,
                  .n_ctx = o.n_ctx,
                  .device = ParseComputeDevice(o.device),
                  .cache_type = ParseKvCacheType(o.cache_type)};
  Timer target_timer;
  // With two threads or more, a draft model's file loads on a thread of its own while the
  // target's does (the draft's load was 2 ms of a 55 ms run of 128 tokens, issue 30); with one,
  // after it, so that -t 1 keeps to one core.
  std::future<std::shared_ptr<const ModelParameters>> draft_parameters;
  if (const std::string path = o.draft.empty() ? "" : DraftSource::ModelPath(o.draft);
      !path.empty() && PoolThreadCount(o.threads) >= 2) {
    draft_parameters = std::async(std::launch::async, [path] {
      ThreadPool loader(1);
      return ModelParameters::Load(path, ModelOptions{}.group_weights, loader);
    });
  }
  auto model = Model::Load(o.model, mo);
  const Tokenizer* tok = model->tokenizer();
  if (!tok)
    Fail("'", o.model, "' has no tokenizer (no 'tokenizer.ggml.model'); cannot run a text prompt");
  const double target_load_s = target_timer.Seconds();

  // The drafter, if any: a second model (sharing the target's thread pool), or prompt lookup.
  // draft_load_s: what it added to the target's load.
  Timer draft_timer;
  OpenedDrafter drafter;
  if (!o.draft.empty()) {
    drafter = OpenDrafter(o.draft, *model, ParseComputeDevice(o.draft_device),
                          draft_parameters.valid() ? draft_parameters.get() : nullptr);
  }
  const double draft_load_s = draft_timer.Seconds();
  // No warm-up forward: a run's first forward faults in what it uses anyway, and a warm-up of
  // every run cost a 16-token run a tenth of its time (issue 30). --compare warms both models
  // up, so that neither decoding pays the first touches in the decode-only figures.
  if (o.compare) {
    model->WarmUp();
    if (drafter.model) drafter.model->WarmUp();
  }
  const double load_s = target_load_s + draft_load_s;

  std::vector<int32_t> prompt = tok->Encode(prompt_text, !o.no_bos && tok->add_bos_by_default());
  // Generation needs a first token: with no prompt text it is BOS, even for a model that does not
  // prepend BOS to text (its add_bos_token is false), since that is where its documents start.
  if (prompt.empty() && !o.no_bos && tok->bos() >= 0) prompt.push_back(tok->bos());
  if (prompt.empty()) {
    Fail("the prompt is empty and ",
         o.no_bos ? "--no-bos leaves no token to start from"
                  : "the model has no BOS token to start from",
         "; give a prompt (-p or -f)");
  }
  if (static_cast<int64_t>(prompt.size()) >= model->n_ctx()) {
    Fail("the prompt is ", prompt.size(), " tokens but the context holds ", model->n_ctx(),
         " (raise it with -c, up to the model's ", model->config().n_ctx_train, ")");
  }

  const SessionOptions so{.n_predict = o.n_predict, .stop_at_eog = !o.ignore_eos};
  std::unique_ptr<SpeculativeSession> session;
  if (drafter.drafter) {
    // The bundled pair comes with its measured acceptance (auto's starting point).
    const std::string accept = o.accept_file.empty()
                                   ? BundledAcceptanceFor(o.model, o.draft, o.sampling.greedy())
                                   : o.accept_file;
    const SpeculationPolicy policy = ResolveSpeculation(
        {.plan = o.spec, .verify = o.verify, .draw = o.draw},
        ReadPlanInputs(accept, o.profile_file, model->max_batch()), *drafter.drafter, o.sampling);
    session = std::make_unique<SpeculativeSession>(*model, *drafter.drafter, policy, so);
  }

  if (!o.no_display_prompt) {
    std::fputs(prompt_text.c_str(), stdout);
    std::fflush(stdout);
  }
  // With an empty prompt the text starts at the first generated token: drop its SentencePiece
  // space.
  TokenStreamDecoder decoder(*tok, /*strip_leading_space=*/prompt_text.empty());
  auto emit = [&](int32_t token) {
    if (!(so.stop_at_eog && tok->IsEndOfGeneration(token))) {
      std::string piece = decoder.Push(token);
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    }
    return !g_interrupted.load();
  };
  std::signal(SIGINT, [](int) { g_interrupted = true; });

  PlainTiming plain_timing;
  const std::vector<int32_t> output = GenerateSpeculativeOrPlain(
      session.get(), *model, prompt, o.sampling, so, emit, &plain_timing);
  std::string tail = decoder.Flush();
  std::fwrite(tail.data(), 1, tail.size(), stdout);
  std::signal(SIGINT, SIG_DFL);
  std::printf("\n");
  std::fflush(stdout);

  const char* stop = g_interrupted ? "interrupted"
                     : (!output.empty() && so.stop_at_eog && tok->IsEndOfGeneration(output.back()))
                         ? "end of text"
                     : static_cast<int32_t>(output.size()) >= o.n_predict ? "length"
                                                                          : "context full";
  if (!session) {
    std::fprintf(
        stderr,
        "\n[grove] load %.3f s | prompt %zu tokens, %.1f t/s | generation %zu tokens, %.1f t/s | "
        "stop: %s "
        "| %s, threads %d, ctx %d, kv %s, seed %llu\n",
        load_s, prompt.size(), prompt.size() / std::max(plain_timing.prefill_seconds, 1e-9),
        output.size(), output.size() / std::max(plain_timing.generation_seconds, 1e-9), stop,
        DeviceName(*model), model->pool().size(), model->n_ctx(),
        KvCacheTypeName(model->cache_type()), static_cast<unsigned long long>(o.sampling.seed));
    ExitLeavingModelsToKernel({model.get()});
  }
  const SpeculationStats& s = session->stats();
  const SpeculationPolicy& policy = session->policy();
  char measuring[64] = "";
  if (s.measure_seconds > 0)
    std::snprintf(measuring, sizeof(measuring), " (%.3f s of it measuring t(n))",
                  s.measure_seconds);
  std::fprintf(stderr,
               "\n[grove] load %.3f s (target %.3f, draft %.3f) | prompt %zu tokens (prefill %.3f "
               "s) | decode %.3f s%s | stop: %s | %s, threads %d, ctx %d, kv %s, seed %llu\n",
               load_s, target_load_s, draft_load_s, prompt.size(), s.prefill_seconds,
               s.total_seconds, measuring, stop, DeviceName(*model), model->pool().size(),
               model->n_ctx(), KvCacheTypeName(model->cache_type()),
               static_cast<unsigned long long>(o.sampling.seed));
  std::fprintf(
      stderr,
      "[grove] speculative: %s, %s drafter, verify %s | %lld tokens in %lld steps (%lld plain), "
      "τ = %.2f tokens/step | %.1f t/s | %.1f nodes/tree\n",
      policy.plan.text.c_str(), std::string(drafter.drafter->name()).c_str(),
      std::string(VerifyRuleName(policy.rule)).c_str(), static_cast<long long>(s.generated),
      static_cast<long long>(s.steps), static_cast<long long>(s.plain_steps), s.tau(),
      s.tokens_per_second(),
      s.steps > s.plain_steps ? static_cast<double>(s.tree_nodes) / (s.steps - s.plain_steps)
                              : 0.0);
  std::fprintf(stderr, "[grove] step %.3f ms: %s\n",
               s.steps ? 1e3 * s.times.total() / s.steps : 0.0, FormatStepSplit(s.times).c_str());
  std::fprintf(stderr, "[grove] acceptance by depth:%s\n", FormatAcceptanceByDepth(s).c_str());
  if (session->planner())
    std::fprintf(stderr, "[grove] %s\n", FormatPlannerChoice(*session).c_str());
  if (const auto* mixture = dynamic_cast<const DrafterMixture*>(drafter.drafter.get()))
    std::fprintf(stderr, "[grove] %s\n", FormatMixture(mixture->member_stats()).c_str());
  if (s.cheap_steps > 0) {
    std::fprintf(stderr,
                 "[grove] controller: %lld steps drafted by the cheap drafters alone, as chains "
                 "of %.1f nodes on average\n",
                 static_cast<long long>(s.cheap_steps),
                 static_cast<double>(s.cheap_nodes) / s.cheap_steps);
  }
  if (s.tail_steps > 0) {
    std::fprintf(stderr,
                 "[grove] controller: %lld planned chains went on with the cheap drafters' "
                 "guesses, %.1f nodes on average, %.0f%% of them accepted\n",
                 static_cast<long long>(s.tail_steps),
                 static_cast<double>(s.tail_nodes) / s.tail_steps,
                 100.0 * static_cast<double>(s.tail_accepted) / std::max<int64_t>(s.tail_nodes, 1));
  }
  if (o.compare && !g_interrupted) {
    const std::vector<int32_t> plain =
        GeneratePlain(*model, prompt, o.sampling, so, {}, &plain_timing);
    const double plain_tps = plain.size() / std::max(plain_timing.generation_seconds, 1e-9);
    // The whole call: what each way costs from nothing to its last token, loading included (the
    // draft's load and every measurement are the speculative call's alone; the warm-ups, run for
    // this comparison only, are left out of both).
    const double plain_call =
        target_load_s + plain_timing.prefill_seconds + plain_timing.generation_seconds;
    const double spec_call = target_load_s + draft_load_s + s.prefill_seconds + s.total_seconds;
    std::fprintf(stderr,
                 "[grove] plain decoding: %zu tokens, %.1f t/s | speedup %.2fx decoding, %.2fx "
                 "whole call (%.3f s vs %.3f s with load and prefill)",
                 plain.size(), plain_tps, s.tokens_per_second() / std::max(plain_tps, 1e-9),
                 plain_call / std::max(spec_call, 1e-9), spec_call, plain_call);
    if (o.sampling.greedy()) {
      std::fprintf(stderr, " | outputs %s",
                   plain == output ? "identical" : "DIFFER (a bug: please report it)");
    }
    std::fprintf(stderr, "\n");
  }
  session.reset();  // keeps what auto measured of the verify curve
  ExitLeavingModelsToKernel({model.get(), drafter.model.get()});
}

}  // namespace

void AddRunCommand(CLI::App& app) {
  auto* cmd =
      app.add_subcommand("run", "Generate text from a prompt, plainly or speculatively (--draft)");
  auto o = std::make_shared<RunOptions>();
  cmd->add_option("-m,--model", o->model,
                  "GGUF model file (the target; default: the bundled pair in models/)");
  auto* p = cmd->add_option("-p,--prompt", o->prompt,
                            "Prompt text (default: empty, start from the BOS token)");
  cmd->add_option("-f,--file", o->prompt_file, "Read the prompt from a file")->excludes(p);
  cmd->add_option("-n,--n-predict", o->n_predict, "Tokens to generate")->capture_default_str();
  AddSamplingOptions(*cmd, o->sampling);
  cmd->add_option("-s,--seed", o->seed, "Random seed (-1: random, printed in the stats)")
      ->capture_default_str();
  cmd->add_option("-t,--threads", o->threads, "Threads (0: all hardware threads)")
      ->capture_default_str()
      ->check(ThreadCount());
  AddDeviceOption(*cmd, o->device);
  AddDraftDeviceOption(*cmd, o->draft_device);
  AddCacheTypeOption(*cmd, o->cache_type);
  cmd->add_option("-c,--ctx-size", o->n_ctx,
                  StrCat("Context size in tokens, at most the model's (0: the model's, at most ",
                         kDefaultContextCap, ")"))
      ->capture_default_str();
  cmd->add_flag("--no-bos", o->no_bos, "Do not prepend the BOS token");
  cmd->add_flag("--ignore-eos", o->ignore_eos, "Keep generating past end-of-text tokens");
  cmd->add_flag("--no-display-prompt", o->no_display_prompt, "Print only the generated text");
  cmd->add_flag("-v,--verbose", o->verbose, "Print debug diagnostics");
  AddPairOption(*cmd, o->pair);
  cmd->add_option("--draft", o->draft,
                  "Speculate with " + kDraftNames +
                      " (default without -m: the bundled draft mixed with suffix drafting)");
  cmd->add_option("--spec", o->spec,
                  "Tree: auto[:N] (choose the tree, or none, from measured costs and acceptance), "
                  "chain:K, kconfig:a,b,..., file:T.json, sequoia:N[,D], sequoia:auto, opt:N,DELTA")
      ->capture_default_str();
  cmd->add_option(
      "--verify", o->verify,
      "Verification rule: greedy, chain, specinfer, sequoia, target-sample (default: greedy at "
      "temperature 0, else sequoia, or target-sample for top-k trees)");
  cmd->add_option("--draw", o->draw,
                  "How children are drawn: deterministic, with-replacement, without-replacement "
                  "(default: what the "
                  "rule needs)");
  cmd->add_option(
      "--accept", o->accept_file,
      "Acceptance vector JSON from `grove calibrate` (for sequoia specs; auto's prior)");
  cmd->add_option("--profile", o->profile_file,
                  "Verify-cost profile JSON from `grove bench --verify-curve --profile-out` (for "
                  "sequoia:auto; auto measures its own when absent)");
  cmd->add_flag("--compare", o->compare, "Also run plain decoding and report the speedup");
  cmd->callback([o, cmd] {
    for (const char* flag :
         {"--spec", "--verify", "--draw", "--accept", "--profile", "--compare"}) {
      if (cmd->count(flag) > 0) o->spec_given = true;
    }
    RunGenerate(*o);
  });
}

}  // namespace grove::cli
