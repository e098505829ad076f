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
#include "engine_options.h"
#include "model/model.h"
#include "one_shot_exit.h"
#include "option_checks.h"
#include "sampling_options.h"
#include "speculate/command_speculation.h"
#include "speculate/draft_source.h"
#include "speculate/drafter_mixture.h"
#include "speculate/plain_decoding.h"
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

// The target and the drafter, loaded. With two threads or more, a draft model's file loads on a
// thread of its own while the target's does (the draft's load was 2 ms of a 55 ms run of 128
// tokens, issue 30); with one, after it, so that -t 1 keeps to one core.
struct LoadedRun {
  std::unique_ptr<Model> model;
  OpenedDrafter drafter;  // none without --draft
  double target_load_s = 0.0;
  double draft_load_s = 0.0;  // what the drafter added to the target's load
};

LoadedRun LoadRun(const RunOptions& o) {
  const ModelOptions mo{.n_threads = o.threads,
                        .n_ctx = o.n_ctx,
                        .device = ParseComputeDevice(o.device),
                        .cache_type = ParseKvCacheType(o.cache_type)};
  LoadedRun run;
  Timer target_timer;
  std::future<std::shared_ptr<const ModelParameters>> draft_parameters;
  if (const std::string path = o.draft.empty() ? "" : DraftSource::ModelPath(o.draft);
      !path.empty() && PoolThreadCount(o.threads) >= 2) {
    draft_parameters = std::async(std::launch::async, [path] {
      ThreadPool loader(1);
      return ModelParameters::Load(path, ModelOptions{}.group_weights, loader);
    });
  }
  run.model = Model::Load(o.model, mo);
  if (!run.model->tokenizer())
    Fail("'", o.model, "' has no tokenizer (no 'tokenizer.ggml.model'); cannot run a text prompt");
  run.target_load_s = target_timer.Seconds();
  // A second model (sharing the target's thread pool), or prompt lookup.
  Timer draft_timer;
  if (!o.draft.empty()) {
    run.drafter = OpenDrafter(o.draft, *run.model, ParseComputeDevice(o.draft_device),
                              draft_parameters.valid() ? draft_parameters.get() : nullptr);
  }
  run.draft_load_s = draft_timer.Seconds();
  // No warm-up forward: a run's first forward faults in what it uses anyway, and a warm-up of
  // every run cost a 16-token run a tenth of its time (issue 30). --compare warms both models
  // up, so that neither decoding pays the first touches in the decode-only figures.
  if (o.compare) {
    run.model->WarmUp();
    if (run.drafter.model) run.drafter.model->WarmUp();
  }
  return run;
}

std::vector<int32_t> EncodePrompt(const RunOptions& o, const std::string& text,
                                  const Model& model) {
  const Tokenizer& tok = *model.tokenizer();
  std::vector<int32_t> prompt = tok.Encode(text, !o.no_bos && tok.add_bos_by_default());
  // Generation needs a first token: with no prompt text it is BOS, even for a model that does not
  // prepend BOS to text (its add_bos_token is false), since that is where its documents start.
  if (prompt.empty() && !o.no_bos && tok.bos() >= 0) prompt.push_back(tok.bos());
  if (prompt.empty()) {
    Fail("the prompt is empty and ",
         o.no_bos ? "--no-bos leaves no token to start from"
                  : "the model has no BOS token to start from",
         "; give a prompt (-p or -f)");
  }
  if (static_cast<int64_t>(prompt.size()) >= model.n_ctx()) {
    Fail("the prompt is ", prompt.size(), " tokens but the context holds ", model.n_ctx(),
         " (raise it with -c, up to the model's ", model.config().n_ctx_train, ")");
  }
  return prompt;
}

// The bundled pair comes with its measured acceptance (auto's starting point).
std::unique_ptr<SpeculativeSession> MakeSession(const RunOptions& o, LoadedRun& run,
                                                const SessionOptions& so) {
  if (!run.drafter.drafter) return nullptr;
  const SpeculationPolicy policy = ResolveCommandSpeculation(
      {.request = {.plan = o.spec, .verify = o.verify, .draw = o.draw},
       .accept_file = o.accept_file,
       .default_accept_file = BundledAcceptanceFor(o.model, o.draft, o.sampling.greedy()),
       .profile_file = o.profile_file},
      run.model->max_batch(), run.drafter.drafter->traits(), o.sampling);
  return std::make_unique<SpeculativeSession>(*run.model, *run.drafter.drafter, policy, so);
}

// Streams the text to stdout as it is generated, until the end, the length or Ctrl-C.
std::vector<int32_t> GenerateToStdout(const RunOptions& o, const std::string& prompt_text,
                                      const std::vector<int32_t>& prompt, LoadedRun& run,
                                      SpeculativeSession* session, const SessionOptions& so,
                                      PlainTiming& plain_timing) {
  const Tokenizer& tok = *run.model->tokenizer();
  if (!o.no_display_prompt) {
    std::fputs(prompt_text.c_str(), stdout);
    std::fflush(stdout);
  }
  // With an empty prompt the text starts at the first generated token: drop its SentencePiece
  // space.
  TokenStreamDecoder decoder(tok, /*strip_leading_space=*/prompt_text.empty());
  auto emit = [&](int32_t token) {
    if (!(so.stop_at_eog && tok.IsEndOfGeneration(token))) {
      std::string piece = decoder.Push(token);
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    }
    return !g_interrupted.load();
  };
  std::signal(SIGINT, [](int) { g_interrupted = true; });
  const std::vector<int32_t> output =
      GenerateSpeculativeOrPlain(session, *run.model, prompt, o.sampling, so, emit, &plain_timing);
  std::string tail = decoder.Flush();
  std::fwrite(tail.data(), 1, tail.size(), stdout);
  std::signal(SIGINT, SIG_DFL);
  std::printf("\n");
  std::fflush(stdout);
  return output;
}

const char* StopReason(const RunOptions& o, const std::vector<int32_t>& output,
                       const SessionOptions& so, const Tokenizer& tok) {
  if (g_interrupted) return "interrupted";
  if (!output.empty() && so.stop_at_eog && tok.IsEndOfGeneration(output.back()))
    return "end of text";
  return static_cast<int32_t>(output.size()) >= o.n_predict ? "length" : "context full";
}

void PrintPlainStats(const RunOptions& o, const LoadedRun& run, std::size_t prompt_tokens,
                     std::size_t generated, const PlainTiming& timing, const char* stop) {
  Model& model = *run.model;
  std::fprintf(
      stderr,
      "\n[grove] load %.3f s | prompt %zu tokens, %.1f t/s | generation %zu tokens, %.1f t/s | "
      "stop: %s "
      "| %s, threads %d, ctx %d, kv %s, seed %llu\n",
      run.target_load_s + run.draft_load_s, prompt_tokens,
      prompt_tokens / std::max(timing.prefill_seconds, 1e-9), generated,
      generated / std::max(timing.generation_seconds, 1e-9), stop, DeviceName(model),
      model.pool().size(), model.n_ctx(), KvCacheTypeName(model.cache_type()),
      static_cast<unsigned long long>(o.sampling.seed));
}

// What the controller did besides the planned trees: cheap chains, and tails on planned chains.
void PrintControllerStats(const SpeculationStats& s) {
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
}

void PrintSpeculativeStats(const RunOptions& o, const LoadedRun& run, std::size_t prompt_tokens,
                           const SpeculativeSession& session, const char* stop) {
  Model& model = *run.model;
  const SpeculationStats& s = session.stats();
  const SpeculationPolicy& policy = session.policy();
  char measuring[64] = "";
  if (s.measure_seconds > 0)
    std::snprintf(measuring, sizeof(measuring), " (%.3f s of it measuring t(n))",
                  s.measure_seconds);
  std::fprintf(stderr,
               "\n[grove] load %.3f s (target %.3f, draft %.3f) | prompt %zu tokens (prefill %.3f "
               "s) | decode %.3f s%s | stop: %s | %s, threads %d, ctx %d, kv %s, seed %llu\n",
               run.target_load_s + run.draft_load_s, run.target_load_s, run.draft_load_s,
               prompt_tokens, s.prefill_seconds, s.total_seconds, measuring, stop,
               DeviceName(model), model.pool().size(), model.n_ctx(),
               KvCacheTypeName(model.cache_type()),
               static_cast<unsigned long long>(o.sampling.seed));
  const Drafter& drafter = *run.drafter.drafter;
  std::fprintf(
      stderr,
      "[grove] speculative: %s, %s drafter, verify %s | %lld tokens in %lld steps (%lld plain), "
      "τ = %.2f tokens/step | %.1f t/s | %.1f nodes/tree\n",
      policy.plan.text.c_str(), std::string(drafter.name()).c_str(),
      std::string(VerifyRuleName(policy.rule)).c_str(), static_cast<long long>(s.generated),
      static_cast<long long>(s.steps), static_cast<long long>(s.plain_steps), s.tau(),
      s.tokens_per_second(),
      s.steps > s.plain_steps ? static_cast<double>(s.tree_nodes) / (s.steps - s.plain_steps)
                              : 0.0);
  std::fprintf(stderr, "[grove] step %.3f ms: %s\n",
               s.steps ? 1e3 * s.times.total() / s.steps : 0.0, FormatStepSplit(s.times).c_str());
  if (s.verify_expert_layers > 0) {
    std::fprintf(stderr, "[grove] experts: %.1f of %d read per layer by a verify forward\n",
                 s.verify_experts_per_layer(), model.config().n_expert);
  }
  std::fprintf(stderr, "[grove] acceptance by depth:%s\n", FormatAcceptanceByDepth(s).c_str());
  if (session.planner()) std::fprintf(stderr, "[grove] %s\n", FormatPlannerChoice(session).c_str());
  if (const auto* mixture = dynamic_cast<const DrafterMixture*>(&drafter))
    std::fprintf(stderr, "[grove] %s\n", FormatMixture(mixture->member_stats()).c_str());
  PrintControllerStats(s);
}

// --compare: plain decoding of the same prompt, and the speedup of the speculative run.
void ComparePlain(const RunOptions& o, const LoadedRun& run, const std::vector<int32_t>& prompt,
                  const std::vector<int32_t>& output, const SpeculationStats& s,
                  const SessionOptions& so) {
  PlainTiming plain_timing;
  const std::vector<int32_t> plain =
      GeneratePlain(*run.model, prompt, o.sampling, so, {}, &plain_timing);
  const double plain_tps = plain.size() / std::max(plain_timing.generation_seconds, 1e-9);
  // The whole call: what each way costs from nothing to its last token, loading included (the
  // draft's load and every measurement are the speculative call's alone; the warm-ups, run for
  // this comparison only, are left out of both).
  const double plain_call =
      run.target_load_s + plain_timing.prefill_seconds + plain_timing.generation_seconds;
  const double spec_call =
      run.target_load_s + run.draft_load_s + s.prefill_seconds + s.total_seconds;
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

void RunGenerate(RunOptions o) {
  InstallStderrLog(o.verbose);
  ResolveModels(o);
  const std::string prompt_text = ReadPrompt(o);
  o.sampling.seed = SeedOrRandom(o.seed);
  o.sampling.Validate();
  if (o.n_predict < 0) Fail("-n ", o.n_predict, " must be >= 0");
  if (o.threads < 0) Fail("-t ", o.threads, " must be >= 0");
  LoadedRun run = LoadRun(o);
  const std::vector<int32_t> prompt = EncodePrompt(o, prompt_text, *run.model);
  const SessionOptions so{.n_predict = o.n_predict, .stop_at_eog = !o.ignore_eos};
  std::unique_ptr<SpeculativeSession> session = MakeSession(o, run, so);
  PlainTiming plain_timing;
  const std::vector<int32_t> output =
      GenerateToStdout(o, prompt_text, prompt, run, session.get(), so, plain_timing);
  const char* stop = StopReason(o, output, so, *run.model->tokenizer());
  if (!session) {
    PrintPlainStats(o, run, prompt.size(), output.size(), plain_timing, stop);
    ExitLeavingModelsToKernel({run.model.get()});
  }
  PrintSpeculativeStats(o, run, prompt.size(), *session, stop);
  if (o.compare && !g_interrupted) ComparePlain(o, run, prompt, output, session->stats(), so);
  session.reset();  // keeps what auto measured of the verify curve
  ExitLeavingModelsToKernel({run.model.get(), run.drafter.model.get()});
}

}  // namespace

void AddRunCommand(CLI::App& app) {
  auto* cmd =
      app.add_subcommand("run", "Generate text from a prompt, plainly or speculatively (--draft)");
  auto o = std::make_shared<RunOptions>();
  AddModelOption(*cmd, o->model, ModelRole::kTarget);
  auto* p = cmd->add_option("-p,--prompt", o->prompt,
                            "Prompt text (default: empty, start from the BOS token)");
  cmd->add_option("-f,--file", o->prompt_file, "Read the prompt from a file")->excludes(p);
  cmd->add_option("-n,--n-predict", o->n_predict, "Tokens to generate")->capture_default_str();
  AddSamplingOptions(*cmd, o->sampling);
  cmd->add_option("-s,--seed", o->seed, "Random seed (-1: random, printed in the stats)")
      ->capture_default_str();
  AddThreadsOption(*cmd, o->threads);
  AddDeviceOption(*cmd, o->device);
  AddDraftDeviceOption(*cmd, o->draft_device);
  AddCacheTypeOption(*cmd, o->cache_type);
  AddContextOption(*cmd, o->n_ctx);
  cmd->add_flag("--no-bos", o->no_bos, "Do not prepend the BOS token");
  cmd->add_flag("--ignore-eos", o->ignore_eos, "Keep generating past end-of-text tokens");
  cmd->add_flag("--no-display-prompt", o->no_display_prompt, "Print only the generated text");
  cmd->add_flag("-v,--verbose", o->verbose, "Print debug diagnostics");
  AddPairOption(*cmd, o->pair);
  AddDraftOption(*cmd, o->draft, DraftRole::kDrafter);
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
  AddAcceptOption(*cmd, o->accept_file);
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
