// grove chat -m MODEL [--draft DRAFT] [--system TEXT]: a conversation in the terminal, each turn
// rendered with the model's own chat template (chat/model_chat_format.h) and answered
// speculatively, with one line per answer: τ, tokens per second and the speedup over plain
// decoding, paired: plain decoding is timed on the same turn's prompt (kPlainProbeTokens tokens
// after it, prefill excluded on both sides), so both run at the same context length. /clear forgets
// the conversation, /exit (or end of input) ends it; Ctrl-C stops the answer being written, not the
// program.
//
// Each turn renders and prefills the whole conversation again (the template may rewrite earlier
// turns, e.g. Qwen3 drops old reasoning), so a long conversation pays its prompt every turn.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "base/error.h"
#include "base/timer.h"
#include "bundled_models.h"
#include "chat/model_chat_format.h"
#include "chat/stop_matcher.h"
#include "commands.h"
#include "device_option.h"
#include "draft_option.h"
#include "io/gguf.h"
#include "model/model.h"
#include "model/model_parameters.h"
#include "option_checks.h"
#include "sampling_options.h"
#include "speculate/draft_source.h"
#include "speculate/plain_decoding.h"
#include "speculate/plan_files.h"
#include "speculate/session.h"
#include "tokenize/tokenizer.h"

namespace grove::cli {
namespace {

std::atomic<bool> g_stop_answer{false};

struct ChatOptions {
  std::string model;
  std::string draft;
  std::string pair;
  std::string system;
  std::string spec = "auto";
  int32_t n_predict = 512;
  SamplerParams sampling;
  int64_t seed = -1;
  int threads = 0;
  int32_t n_ctx = 0;
  std::string cache_type = "f32";
  bool verbose = false;
};

// Tokens of plain decoding timed after each speculative answer, on the same prompt.
constexpr int32_t kPlainProbeTokens = 16;

// Plain decoding's speed after `prompt` (prefill excluded), for the speedup an answer reports.
double PlainTokensPerSecond(Model& model, const std::vector<int32_t>& prompt,
                            const SamplerParams& sampling) {
  PlainTiming timing;
  const SessionOptions so{.n_predict = kPlainProbeTokens, .stop_at_eog = false};
  const std::vector<int32_t> out = GeneratePlain(model, prompt, sampling, so, {}, &timing);
  return out.size() / std::max(timing.generation_seconds, 1e-9);
}

void RunChat(ChatOptions o) {
  InstallStderrLog(o.verbose);
  if (DefaultToBundledPair(o.model, o.draft, o.pair, BundledDraft::kMixture)) {
    std::fprintf(stderr, "[grove] bundled models: target %s, draft %s\n", o.model.c_str(),
                 o.draft.c_str());
  }
  o.sampling.seed = SeedOrRandom(o.seed);
  o.sampling.Validate();
  if (o.n_predict <= 0) Fail("-n ", o.n_predict, " must be > 0");

  auto model = Model::Load(
      o.model,
      {.n_threads = o.threads, .n_ctx = o.n_ctx, .cache_type = ParseKvCacheType(o.cache_type)});
  const Tokenizer* tok = model->tokenizer();
  if (!tok) Fail("'", o.model, "' has no tokenizer; cannot chat");
  const chat::ModelChatFormat format(
      model->parameters()->gguf().GetString("tokenizer.chat_template", ""), *tok);
  if (!format.template_error().empty()) {
    std::fprintf(stderr, "[grove] the model's chat template cannot run (%s); using %s\n",
                 format.template_error().c_str(), format.Describe().c_str());
  }

  OpenedDrafter drafter;
  if (!o.draft.empty() && o.draft != "none") drafter = OpenDrafter(o.draft, *model);
  model->WarmUp();
  if (drafter.model) drafter.model->WarmUp();
  const SessionOptions so{.n_predict = o.n_predict, .stop_at_eog = true};
  std::unique_ptr<SpeculativeSession> session;
  if (drafter.drafter) {
    const SpeculationPolicy policy = ResolveSpeculation(
        {.plan = o.spec},
        ReadPlanInputs(BundledAcceptanceFor(o.model, o.draft, o.sampling.greedy()), "",
                       model->max_batch()),
        *drafter.drafter, o.sampling);
    session = std::make_unique<SpeculativeSession>(*model, *drafter.drafter, policy, so);
  }

  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  auto reset = [&] {
    messages = nlohmann::ordered_json::array();
    if (!o.system.empty()) messages.push_back({{"role", "system"}, {"content", o.system}});
  };
  reset();
  std::fprintf(stderr,
               "[grove] chat with %s (%s), %s. /clear forgets, /exit ends, Ctrl-C stops an "
               "answer.\n",
               o.model.c_str(), format.Describe().c_str(),
               session ? ("speculating with " + o.draft).c_str() : "no draft");

  std::string line;
  while (true) {
    std::printf("> ");
    std::fflush(stdout);
    if (!std::getline(std::cin, line) || line == "/exit") break;
    if (line == "/clear") {
      reset();
      std::printf("[conversation cleared]\n");
      continue;
    }
    if (line.empty()) continue;
    messages.push_back({{"role", "user"}, {"content", line}});
    jinja::ChatTemplateInput input;
    input.messages = messages;
    std::vector<int32_t> prompt;
    try {
      prompt = format.Encode(format.Render(input));
    } catch (const Error& e) {
      std::fprintf(stderr, "[grove] %s\n", e.what());
      messages.erase(messages.end() - 1);
      continue;
    }
    if (static_cast<int64_t>(prompt.size()) + o.n_predict >= model->n_ctx()) {
      std::fprintf(stderr,
                   "[grove] the conversation is %zu tokens and the context holds %d: /clear to "
                   "start again (or raise -c)\n",
                   prompt.size(), model->n_ctx());
      messages.erase(messages.end() - 1);
      continue;
    }

    TokenStreamDecoder decoder(*tok);
    chat::StopMatcher stops(format.StopStrings());
    std::string answer;
    auto emit = [&](int32_t token) {
      if (!tok->IsEndOfGeneration(token)) {
        const std::string text = stops.Push(decoder.Push(token));
        answer += text;
        std::fwrite(text.data(), 1, text.size(), stdout);
        std::fflush(stdout);
      }
      return !g_stop_answer.load() && !stops.stopped();
    };
    g_stop_answer = false;
    std::signal(SIGINT, [](int) { g_stop_answer = true; });
    Timer timer;
    PlainTiming plain_timing;
    const std::vector<int32_t> output = GenerateSpeculativeOrPlain(
        session.get(), *model, prompt, o.sampling, so, emit, &plain_timing);
    std::signal(SIGINT, SIG_DFL);
    const std::string tail = stops.Push(decoder.Flush()) + stops.Flush();
    answer += tail;
    std::fwrite(tail.data(), 1, tail.size(), stdout);
    std::printf("\n");
    std::fflush(stdout);
    messages.push_back({{"role", "assistant"}, {"content", answer}});

    const char* stopped = g_stop_answer ? " (stopped)" : "";
    if (!session) {
      std::fprintf(stderr, "[grove] %zu tokens%s | %.1f t/s\n", output.size(), stopped,
                   output.size() / std::max(plain_timing.generation_seconds, 1e-9));
      continue;
    }
    const double tps = session->stats().tokens_per_second();
    const double plain_tps = PlainTokensPerSecond(*model, prompt, o.sampling);
    std::fprintf(stderr,
                 "[grove] %zu tokens%s | τ %.2f | %.1f t/s | %.2fx plain (%.1f t/s, %d tokens "
                 "after the same prompt)\n",
                 output.size(), stopped, session->stats().tau(), tps,
                 tps / std::max(plain_tps, 1e-9), plain_tps, kPlainProbeTokens);
  }
  std::printf("\n");
}

}  // namespace

void AddChatCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "chat", "Talk with a model in the terminal, through its own chat template, speculatively");
  auto o = std::make_shared<ChatOptions>();
  cmd->add_option("-m,--model", o->model,
                  "GGUF model file (the target; default: the bundled pair in models/)");
  cmd->add_option("--draft", o->draft,
                  "Speculate with " + kDraftNames +
                      ", or 'none' (default without -m: the bundled draft mixed with suffix "
                      "drafting)");
  AddPairOption(*cmd, o->pair);
  cmd->add_option("--system", o->system, "System prompt");
  cmd->add_option("--spec", o->spec, "Tree, as for grove run (default: auto)")
      ->capture_default_str();
  cmd->add_option("-n,--n-predict", o->n_predict, "Most tokens per answer")->capture_default_str();
  AddSamplingOptions(*cmd, o->sampling);
  cmd->add_option("-s,--seed", o->seed, "Random seed (-1: random)")->capture_default_str();
  cmd->add_option("-t,--threads", o->threads, "Threads (0: all hardware threads)")
      ->capture_default_str()
      ->check(ThreadCount());
  cmd->add_option(
         "-c,--ctx-size", o->n_ctx,
         StrCat("Context size in tokens (0: the model's, at most ", kDefaultContextCap, ")"))
      ->capture_default_str();
  AddCacheTypeOption(*cmd, o->cache_type);
  cmd->add_flag("-v,--verbose", o->verbose, "Print debug diagnostics");
  cmd->callback([o] { RunChat(*o); });
}

}  // namespace grove::cli
