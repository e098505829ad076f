// What `grove serve` runs behind HTTP: one target forward context and the draft's parameters, a
// Scheduler whose Serve loop runs on a thread of its own, and the RequestFeed that requests enter.
// A request's n choices become n sequences (keys 0..n-1 under the request's seed), verified in
// shared target forwards with every other client's (the scheduler's policy, batched by default);
// each one's tokens are decoded as they are accepted, cut at its stop strings, and handed to the
// HTTP handler as events through its Completion.
//
// Sampling: temperature and top_p per request; at temperature > 0 the verification rule is
// target-sample, whose draws are plain sampling's, so a request gives the same text with
// speculation on or off and alone or among others (same seed, same text).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "chat/chat_template.h"
#include "chat/model_chat_format.h"
#include "chat/reasoning_splitter.h"
#include "model/model.h"
#include "sample/sampler.h"
#include "schedule/request_feed.h"
#include "schedule/scheduler.h"
#include "serve/api_request.h"
#include "serve/service_metrics.h"
#include "serve/step_channel.h"
#include "serve/traffic_record.h"
#include "speculate/draft_source.h"
#include "speculate/tree_plan.h"

namespace grove::serve {

// Requests queued beyond the slots unless told (`grove serve --queue`); more are answered 503.
inline constexpr int32_t kDefaultMaxWaiting = 64;

struct ServiceOptions {
  std::string model_id = "grove";          // /v1/models, and the `model` of every response
  std::vector<std::string> model_aliases;  // more names /v1/models lists (--alias)
  SchedulePolicy policy = SchedulePolicy::kBatched;
  std::string spec = "auto";   // the tree of requests that do not name one ("off": none)
  TreePlanInputs plan_inputs;  // acceptance vector (and profile) for sequoia trees
  int32_t max_waiting = kDefaultMaxWaiting;  // sequences queued beyond the slots; more: 503
  int32_t node_budget = kDefaultNodeBudget;  // batched: most tokens per verify forward
  // The model's own Jinja template (`tokenizer.chat_template`): chat prompts are rendered with it
  // as Hugging Face does; empty, or one grove cannot parse, falls back to the hand-written renderer
  // of its family (model_chat_format.h).
  std::string chat_template_source;
  // Chat completions of requests that do not choose (`reasoning_format`): kDeepSeek returns a
  // thinking model's "<think>" part as reasoning_content (reasoning_splitter.h).
  chat::ReasoningFormat reasoning_format = chat::ReasoningFormat::kNone;
  // The sampling of a request that leaves a field out: OpenAI's temperature 1, and the filters of
  // every grove command (top-k 40, top-p 0.95, min-p 0.05), as llama-server applies its own.
  SamplerParams sampling{.temperature = 1.0f};
  // --record: keep every finished choice's prompt and output there (traffic_record.h); empty: no.
  std::string record_dir;
};

struct CompletionEvent {
  enum class Kind { kText, kChoiceDone, kDone };
  Kind kind = Kind::kText;
  int32_t choice = 0;
  std::string text;           // kText: the next piece of the choice's text
  bool reasoning = false;     // kText: the piece is reasoning (reasoning_content), not content
  std::string finish_reason;  // kChoiceDone: "stop" or "length"
};

// One request in flight, shared by the service (which fills it on the scheduler's thread) and the
// HTTP handler (which drains it).
class Completion {
 public:
  Completion(std::string id, int32_t n_choices, int64_t prompt_tokens, std::string tree);

  // The next event, waiting up to `timeout`; false when none came. kDone comes last, once.
  bool Next(CompletionEvent* out, std::chrono::milliseconds timeout);
  // The client went away: every choice stops at its next step and frees its slot.
  void Cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }

  const std::string& id() const { return id_; }
  int64_t created() const { return created_; }
  int32_t n_choices() const { return n_choices_; }
  int64_t prompt_tokens() const { return prompt_tokens_; }
  // The tree its sequences use ("off", a spec, or the scheduler's choice once it made it).
  std::string tree() const;
  // Valid after kDone: tokens generated (all choices), the error that stopped a choice (else
  // empty), and the speculation statistics summed over the choices.
  int64_t completion_tokens() const;
  std::string error() const;
  SpeculationStats speculation() const;
  // The drafter that drafted its choices ("" when none did; the last choice's name when a swap
  // came between them).
  std::string drafter() const;
  // Valid after kDone, as llama-server's timings count them: the prompt's time is the time to the
  // completion's first tokens (the prefill, and the first step that finishes the prompt and gives
  // them), its generation's the wall clock from those tokens to the last choice's end. Neither is
  // a sum over the choices, which run side by side (summed, n = 2 showed twice the time).
  double prompt_seconds() const;
  double generation_seconds() const;

 private:
  friend class CompletionService;
  friend class ChoiceStream;
  void Push(CompletionEvent event);
  // A choice's first step gave its first tokens (ChoiceStream, on the scheduler's thread).
  void FirstTokens(int32_t choice);
  // A choice finished: records its result; the last one pushes kDone.
  void FinishChoice(int32_t choice, const SequenceResult& result, std::string finish_reason,
                    const std::string& tree);

  const std::string id_;
  const int64_t created_;
  const int32_t n_choices_;
  const int64_t prompt_tokens_;
  std::string tree_;
  std::atomic<bool> cancelled_{false};
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<CompletionEvent> events_;
  int32_t choices_done_ = 0;
  int64_t completion_tokens_ = 0;
  std::string error_;
  SpeculationStats speculation_;
  std::string drafter_;
  // When each choice's first tokens came (the clock's epoch until then), and for the timings the
  // earliest of them among the finished choices, that choice's time to it, and the last end.
  std::vector<std::chrono::steady_clock::time_point> first_tokens_at_;
  std::chrono::steady_clock::time_point first_tokens_{std::chrono::steady_clock::time_point::max()};
  double prompt_seconds_ = 0.0;
  std::chrono::steady_clock::time_point generation_end_{};
};

class CompletionService {
 public:
  // target: a forward context with one KV slot per sequence in flight (--parallel); draft: where
  // the lanes' drafters come from, or none to serve without speculation. Starts the scheduler's
  // thread. Throws grove::Error on a default spec that cannot be resolved.
  CompletionService(Model& target, std::optional<DraftSource> draft, const ServiceOptions& options);
  ~CompletionService();  // stops taking requests, finishes the running ones, joins

  // Tokenizes the prompt (chat: renders the messages), resolves the request's speculation and
  // queues its choices. Throws ApiError: 400 for a prompt the context cannot hold with max_tokens
  // or a bad speculation spec, 503 when the queue is full or the service stopped.
  std::shared_ptr<Completion> Start(const CompletionRequest& request);

  const ServiceOptions& options() const { return options_; }

  // Opens the drafter `name` (DraftSource::Open: a draft GGUF, "ngram", "suffix" or a mixture)
  // while the service serves, and makes it the drafter of every sequence admitted from now on
  // (Scheduler::ReplaceDraft): sequences in flight finish with the drafter they started with, and
  // none is dropped. A suffix drafter keeps the store of the one it replaces. Returns the new
  // drafter's name. Throws ApiError: 409 when the service serves without a drafter; 400 for a name
  // that cannot be opened or does not suit the target (another vocabulary; a drafter that reads
  // the target's features in place of one that does not, or back), the old drafter still serving.
  std::string SwapDrafter(const std::string& name);
  // The drafter of the sequences admitted now ("none" without one).
  std::string drafter_name() const;

  // The prompt text for chat messages (POST /apply-template, and what chat completions encode):
  // the model's Jinja template when it has one, else the hand-written renderer. Throws ApiError
  // 400 for messages the template refuses (its raise_exception message), an unknown role or
  // invalid UTF-8.
  std::string RenderChatPrompt(const CompletionRequest& request) const;
  // How chat prompts are rendered: the model's own template, or why not.
  const chat::ModelChatFormat& chat_format() const { return *chat_format_; }
  const Model& target() const { return target_; }
  bool healthy() const { return !failed_; }
  ServiceMetrics& metrics() { return metrics_; }
  // Prometheus text exposition of the service's counters (service_metrics.h).
  std::string MetricsText() const;

  // The live view: the step feed of a running completion (null once it is done or unknown; "next":
  // the feed of the next completion to start, so a watcher misses none of its steps), and the
  // running ones (id, prompt's start, tree).
  std::shared_ptr<StepChannel> Steps(const std::string& id) const;
  struct RunningCompletion {
    std::string id;
    std::string prompt;  // its first characters
    std::string tree;
  };
  std::vector<RunningCompletion> Running() const;

 private:
  SpeculationPolicy PolicyFor(const CompletionRequest& request, const SamplerParams& sampling);
  // The prompt's tokens; `thinking_open` says whether a chat prompt leaves "<think>" open.
  std::vector<int32_t> Tokenize(const CompletionRequest& request, bool* thinking_open) const;
  // The same, refused (ApiError 400) when empty or longer than the context.
  std::vector<int32_t> PromptOf(const CompletionRequest& request, bool* thinking_open) const;
  // The request's sampling over the server's defaults; ApiError 400 when invalid.
  SamplerParams SamplingFor(const CompletionRequest& request) const;
  // The live view of the completion that starts now; the next one's is made ready.
  std::shared_ptr<StepChannel> TakeNextChannel();
  // What each choice's text is cut at: the request's stop strings and, in a chat, the turn's end.
  std::vector<std::string> StopsFor(const CompletionRequest& request) const;
  // --record: a finished choice's text (its end-of-generation token left out) after its prompt's.
  void RecordChoice(const std::string& prompt_text, const SequenceResult& result);
  // A completion's last choice is done: its live view closes, it is no longer running.
  void Retire(const std::string& id, StepChannel& channel);
  // Queues a completion's sequences; ApiError 503 (and its live view closed) when the queue is
  // full or the server stops.
  void Submit(std::vector<SequenceRequest> sequences, std::vector<RequestFeed::DoneFn> done,
              const std::string& id, const std::shared_ptr<StepChannel>& channel);

  Model& target_;
  mutable std::mutex draft_mutex_;  // draft_ is swapped while requests start
  std::optional<DraftSource> draft_;
  std::unique_ptr<TrafficRecord> record_;  // --record
  ServiceOptions options_;
  TreePlanInputs request_plan_inputs_;  // options_.plan_inputs with no tree files (a client's)
  std::unique_ptr<const chat::ModelChatFormat> chat_format_;
  std::unique_ptr<Scheduler> scheduler_;
  RequestFeed feed_;
  ServiceMetrics metrics_;
  std::atomic<bool> failed_{false};
  std::atomic<uint64_t> next_id_{1};
  mutable std::mutex running_mutex_;
  struct Watched {
    std::shared_ptr<StepChannel> steps;
    std::string prompt;
    std::string tree;
  };
  std::map<std::string, Watched> running_;
  std::shared_ptr<StepChannel> next_channel_ = std::make_shared<StepChannel>();
  std::thread serving_;
};

}  // namespace grove::serve
