// grove chat -m MODEL [--draft DRAFT] [--system TEXT]: a conversation in the terminal, each turn
// rendered with the model's own chat template (chat/model_chat_format.h) and answered
// speculatively, with one line per answer: τ, tokens per second and the speedup over plain
// decoding, paired: plain decoding is timed right after the answer (kPlainProbeTokens tokens
// after it, prefill excluded on both sides), so both run at about the same context length; then
// the prompt's tokens, how many of them the cache already held, and the time to the first token.
// /clear forgets the conversation, /exit (or end of input) ends it; Ctrl-C stops the answer being
// written, not the program.
//
// Each turn renders the whole conversation again (the template may rewrite earlier turns, e.g.
// Qwen3 drops old reasoning) but prefills only what the caches do not hold of it already: the
// longest common token prefix of the new prompt and what the target's cache (and the drafter's)
// hold is kept (SessionOptions::reuse_cache), so a template that rewrites an earlier turn reuses
// less, never wrong text. --no-cache-prompt prefills the whole conversation every turn.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/timer.h"
#include "bundled_models.h"
#include "chat/model_chat_format.h"
#include "chat/stop_matcher.h"
#include "commands.h"
#include "engine_options.h"
#include "io/gguf.h"
#include "model/model.h"
#include "model/model_parameters.h"
#include "option_checks.h"
#include "sampling_options.h"
#include "speculate/command_speculation.h"
#include "speculate/draft_source.h"
#include "speculate/plain_decoding.h"
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
  bool no_cache_prompt = false;
  bool verbose = false;
};

// Tokens of plain decoding timed after each speculative answer, on the same prompt.
constexpr int32_t kPlainProbeTokens = 16;

// Plain decoding's speed after the answer (prefill excluded), for the speedup an answer reports:
// it continues after the prompt and the answer, which the cache holds (with reuse), so the cache
// still holds the answer for the next turn; after the prompt alone where the context has no room.
double PlainTokensPerSecond(Model& model, const std::vector<int32_t>& prompt,
                            const std::vector<int32_t>& answer, const SamplerParams& sampling,
                            bool reuse_cache) {
  std::vector<int32_t> context = prompt;
  if (static_cast<int64_t>(prompt.size() + answer.size()) + kPlainProbeTokens < model.n_ctx()) {
    context.insert(context.end(), answer.begin(), answer.end());
  }
  PlainTiming timing;
  const SessionOptions so{
      .n_predict = kPlainProbeTokens, .stop_at_eog = false, .reuse_cache = reuse_cache};
  const std::vector<int32_t> out = GeneratePlain(model, context, sampling, so, {}, &timing);
  return out.size() / std::max(timing.generation_seconds, 1e-9);
}

// The model, its chat format and the drafter's session (none without a draft).
struct ChatEngine {
  std::unique_ptr<Model> model;
  std::unique_ptr<const chat::ModelChatFormat> format;
  OpenedDrafter drafter;
  std::unique_ptr<SpeculativeSession> session;
};

ChatEngine OpenChat(const ChatOptions& o, const SessionOptions& so) {
  ChatEngine e;
  e.model = Model::Load(
      o.model,
      {.n_threads = o.threads, .n_ctx = o.n_ctx, .cache_type = ParseKvCacheType(o.cache_type)});
  const Tokenizer* tok = e.model->tokenizer();
  if (!tok) Fail("'", o.model, "' has no tokenizer; cannot chat");
  e.format = std::make_unique<const chat::ModelChatFormat>(
      e.model->parameters()->gguf().GetString("tokenizer.chat_template", ""), *tok);
  if (!e.format->template_error().empty()) {
    std::fprintf(stderr, "[grove] the model's chat template cannot run (%s); using %s\n",
                 e.format->template_error().c_str(), e.format->Describe().c_str());
  }
  if (!o.draft.empty() && o.draft != "none") e.drafter = OpenDrafter(o.draft, *e.model);
  e.model->WarmUp();
  if (e.drafter.model) e.drafter.model->WarmUp();
  if (e.drafter.drafter) {
    const SpeculationPolicy policy = ResolveCommandSpeculation(
        {.request = {.plan = o.spec},
         .default_accept_file = BundledAcceptanceFor(o.model, o.draft, o.sampling.greedy())},
        e.model->max_batch(), e.drafter.drafter->traits(), o.sampling);
    e.session = std::make_unique<SpeculativeSession>(*e.model, *e.drafter.drafter, policy, so);
  }
  return e;
}

// The turn's prompt: the conversation rendered and encoded; nothing (said on stderr) when the
// template refuses it or the context has no room left for an answer. An answer that would pass
// the context's end stops there (sessions and plain decoding both stop at a full context): -n
// caps it, and the context what is left (the default -n 512 is the bundled pair's whole context,
// which once refused every message).
std::optional<std::vector<int32_t>> TurnPrompt(const ChatOptions& o, const ChatEngine& e,
                                               const nlohmann::ordered_json& messages) {
  jinja::ChatTemplateInput input;
  input.messages = messages;
  std::vector<int32_t> prompt;
  try {
    prompt = e.format->Encode(e.format->Render(input));
  } catch (const Error& error) {
    std::fprintf(stderr, "[grove] %s\n", error.what());
    return std::nullopt;
  }
  const int32_t n_ctx = e.model->n_ctx();
  if (static_cast<int64_t>(prompt.size()) + 1 >= n_ctx) {
    // -c can go up to what the model was trained on, not beyond.
    const int32_t n_ctx_train = e.model->config().n_ctx_train;
    std::fprintf(stderr,
                 "[grove] the conversation is %zu tokens and the context holds %d: no room for "
                 "an answer; /clear to start again%s\n",
                 prompt.size(), n_ctx,
                 n_ctx_train > n_ctx
                     ? (" (or raise -c, up to " + std::to_string(n_ctx_train) + ")").c_str()
                     : "");
    return std::nullopt;
  }
  return prompt;
}

struct Answer {
  std::string text;
  std::vector<int32_t> tokens;
  PlainTiming plain_timing;          // without a session
  double first_token_seconds = 0.0;  // from the turn's start (prefill included)
};

// Streams the answer to stdout up to the end of the turn, a stop string or Ctrl-C.
Answer AnswerTurn(const ChatOptions& o, ChatEngine& e, const std::vector<int32_t>& prompt,
                  const SessionOptions& so) {
  const Tokenizer& tok = *e.model->tokenizer();
  TokenStreamDecoder decoder(tok);
  chat::StopMatcher stops(e.format->StopStrings());
  Answer answer;
  Timer turn;
  auto emit = [&](int32_t token) {
    if (answer.first_token_seconds == 0.0) answer.first_token_seconds = turn.Seconds();
    if (!tok.IsEndOfGeneration(token)) {
      const std::string text = stops.Push(decoder.Push(token));
      answer.text += text;
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
    }
    return !g_stop_answer.load() && !stops.stopped();
  };
  g_stop_answer = false;
  std::signal(SIGINT, [](int) { g_stop_answer = true; });
  answer.tokens = GenerateSpeculativeOrPlain(e.session.get(), *e.model, prompt, o.sampling, so,
                                             emit, &answer.plain_timing);
  std::signal(SIGINT, SIG_DFL);
  const std::string tail = stops.Push(decoder.Flush()) + stops.Flush();
  answer.text += tail;
  std::fwrite(tail.data(), 1, tail.size(), stdout);
  std::printf("\n");
  std::fflush(stdout);
  return answer;
}

void PrintTurnStats(const ChatOptions& o, ChatEngine& e, const std::vector<int32_t>& prompt,
                    const Answer& answer) {
  const char* stopped = g_stop_answer ? " (stopped)" : "";
  if (!e.session) {
    std::fprintf(stderr,
                 "[grove] %zu tokens%s | %.1f t/s | prompt %zu tokens, %d cached | first token "
                 "%.0f ms\n",
                 answer.tokens.size(), stopped,
                 answer.tokens.size() / std::max(answer.plain_timing.generation_seconds, 1e-9),
                 prompt.size(), answer.plain_timing.cached_prompt_tokens,
                 1e3 * answer.first_token_seconds);
    return;
  }
  const SpeculationStats& stats = e.session->stats();
  const double tps = stats.tokens_per_second();
  const double plain_tps =
      PlainTokensPerSecond(*e.model, prompt, answer.tokens, o.sampling, !o.no_cache_prompt);
  std::fprintf(stderr,
               "[grove] %zu tokens%s | τ %.2f | %.1f t/s | %.2fx plain (%.1f t/s, %d tokens "
               "after the answer) | prompt %zu tokens, %lld cached | first token %.0f ms\n",
               answer.tokens.size(), stopped, stats.tau(), tps, tps / std::max(plain_tps, 1e-9),
               plain_tps, kPlainProbeTokens, prompt.size(),
               static_cast<long long>(stats.cached_prompt_tokens),
               1e3 * answer.first_token_seconds);
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
  const SessionOptions so{
      .n_predict = o.n_predict, .stop_at_eog = true, .reuse_cache = !o.no_cache_prompt};
  ChatEngine e = OpenChat(o, so);
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  auto reset = [&] {
    messages = nlohmann::ordered_json::array();
    if (!o.system.empty()) messages.push_back({{"role", "system"}, {"content", o.system}});
  };
  reset();
  std::fprintf(stderr,
               "[grove] chat with %s (%s), %s. /clear forgets, /exit ends, Ctrl-C stops an "
               "answer.\n",
               o.model.c_str(), e.format->Describe().c_str(),
               e.session ? ("speculating with " + o.draft).c_str() : "no draft");
  for (std::string line;;) {
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
    const std::optional<std::vector<int32_t>> prompt = TurnPrompt(o, e, messages);
    if (!prompt) {
      messages.erase(messages.end() - 1);
      continue;
    }
    const Answer answer = AnswerTurn(o, e, *prompt, so);
    // The answer's leading whitespace is dropped from the message: the template writes its own
    // separator before the content (the plain format's "Assistant: ", ChatML's newline), so
    // keeping the space the model began with would render it twice, and the next turn's prompt
    // would part from what the caches hold right there (the prompt would still be right, only
    // reused less).
    const std::size_t start = answer.text.find_first_not_of(" \t\n");
    messages.push_back(
        {{"role", "assistant"},
         {"content", start == std::string::npos ? std::string() : answer.text.substr(start)}});
    PrintTurnStats(o, e, *prompt, answer);
  }
  std::printf("\n");
}

}  // namespace

void AddChatCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "chat", "Talk with a model in the terminal, through its own chat template, speculatively");
  auto o = std::make_shared<ChatOptions>();
  AddModelOption(*cmd, o->model, ModelRole::kTarget);
  AddDraftOption(*cmd, o->draft, DraftRole::kDrafterOrNone);
  AddPairOption(*cmd, o->pair);
  cmd->add_option("--system", o->system, "System prompt");
  cmd->add_option("--spec", o->spec, "Tree, as for grove run (default: auto)")
      ->capture_default_str();
  cmd->add_option("-n,--n-predict", o->n_predict,
                  "Most tokens per answer (fewer where the context ends first)")
      ->capture_default_str();
  AddSamplingOptions(*cmd, o->sampling);
  cmd->add_option("-s,--seed", o->seed, "Random seed (-1: random)")->capture_default_str();
  AddThreadsOption(*cmd, o->threads);
  AddContextOption(*cmd, o->n_ctx);
  AddCacheTypeOption(*cmd, o->cache_type);
  cmd->add_flag("--no-cache-prompt", o->no_cache_prompt,
                "Prefill the whole conversation every turn (default: only what the caches do not "
                "hold of it already)");
  cmd->add_flag("-v,--verbose", o->verbose, "Print debug diagnostics");
  cmd->callback([o] { RunChat(*o); });
}

}  // namespace grove::cli
