#include "serve/completion_service.h"

#include <algorithm>
#include <optional>
#include <random>
#include <utility>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/log.h"
#include "serve/api_error.h"
#include "serve/choice_stream.h"
#include "speculate/node_attribution.h"
#include "speculate/speculation.h"
#include "tokenize/tokenizer.h"

namespace grove::serve {
namespace {

// The largest verify batch a request's tree may ask for: what every draft lane holds per batch.
constexpr int32_t kMaxRequestTreeTokens = Scheduler::kMinDraftBatch;

// No tree: every step is a plain one (the session verifies the root alone). At temperature > 0
// the rule is target-sample, which then draws exactly what plain sampling draws.
SpeculationPolicy PlainPolicy(const SamplerParams& sampling) {
  SpeculationPolicy policy;
  policy.plan.kind = TreeKind::kChain;
  policy.plan.text = "off";
  policy.rule = sampling.greedy() ? VerifyRule::kGreedy : VerifyRule::kTargetSample;
  policy.sampling = sampling;
  return policy;
}

// One step for the live view: the tree (each node's token text, parent, depth, draft probability
// and, for a drafter made of several, the ones that proposed it), the accepted path, the emitted
// text, the choice's running tau and acceptance by depth, and why the step's drafters took part.
std::string StepEvent(const Tokenizer& tok, const StepView& step, int32_t choice) {
  const SpeculationStats& running = step.stats;
  std::vector<uint32_t> sources;
  if (step.attribution) step.attribution->NodeSources(step.tree, sources);
  nlohmann::json nodes = nlohmann::json::array();
  for (int32_t i = 0; i < step.tree.size(); ++i) {
    const TreeNode& node = step.tree.node(i);
    nlohmann::json n{{"token", node.token >= 0 ? std::string(tok.TokenPiece(node.token)) : ""},
                     {"parent", node.parent},
                     {"depth", node.depth},
                     {"prob", node.prob}};
    if (step.attribution) n["drafters"] = step.attribution->Names(sources[i]);
    nodes.push_back(std::move(n));
  }
  std::string emitted;
  for (int32_t t : step.tokens) emitted += tok.TokenPiece(t);
  nlohmann::json event{
      {"choice", choice},
      {"step", running.steps},
      {"nodes", std::move(nodes)},
      {"accepted", std::vector<int32_t>(step.accepted.begin(), step.accepted.end())},
      {"emitted", emitted},
      {"tau", running.tau()},
      {"acceptance_by_depth", running.acceptance_by_depth()}};
  if (step.attribution) event["why"] = step.attribution->Why();
  // Byte-fallback pieces may be parts of a character: replaced rather than thrown on.
  return event.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

uint64_t RandomSeed() {
  static std::mutex mutex;
  static std::mt19937_64 engine{std::random_device{}()};
  std::lock_guard lock(mutex);
  return engine() >> 1;  // fits the JSON integers clients send back
}

}  // namespace

Completion::Completion(std::string id, int32_t n_choices, int64_t prompt_tokens, std::string tree)
    : id_(std::move(id)),
      created_(std::chrono::duration_cast<std::chrono::seconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count()),
      n_choices_(n_choices),
      prompt_tokens_(prompt_tokens),
      tree_(std::move(tree)),
      first_tokens_at_(static_cast<std::size_t>(n_choices)) {}

bool Completion::Next(CompletionEvent* out, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (!ready_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return false;
  *out = std::move(events_.front());
  events_.pop_front();
  return true;
}

void Completion::Push(CompletionEvent event) {
  {
    std::lock_guard lock(mutex_);
    events_.push_back(std::move(event));
  }
  ready_.notify_all();
}

std::string Completion::tree() const {
  std::lock_guard lock(mutex_);
  return tree_;
}

void Completion::FirstTokens(int32_t choice) {
  std::lock_guard lock(mutex_);
  first_tokens_at_[choice] = std::chrono::steady_clock::now();
}

void Completion::FinishChoice(int32_t choice, const SequenceResult& result,
                              std::string finish_reason, const std::string& tree) {
  const auto now = std::chrono::steady_clock::now();
  bool last = false;
  {
    std::lock_guard lock(mutex_);
    // The session's clock runs from the prompt's prefill to the end: what it spent before this
    // choice's first tokens is its first step.
    const auto first = first_tokens_at_[choice];
    if (first != std::chrono::steady_clock::time_point{} && first < first_tokens_) {
      const double after_first = std::chrono::duration<double>(now - first).count();
      first_tokens_ = first;
      prompt_seconds_ = result.speculation.prefill_seconds +
                        std::max(0.0, result.speculation.total_seconds - after_first);
    }
    generation_end_ = std::max(generation_end_, now);
    tree_ = tree;
    completion_tokens_ += static_cast<int64_t>(result.tokens.size());
    if (!result.error.empty() && error_.empty()) error_ = result.error;
    speculation_ += result.speculation;
    if (!result.drafter.empty()) drafter_ = result.drafter;
    events_.push_back({.kind = CompletionEvent::Kind::kChoiceDone,
                       .choice = choice,
                       .finish_reason = std::move(finish_reason)});
    last = ++choices_done_ == n_choices_;
    if (last) events_.push_back({.kind = CompletionEvent::Kind::kDone});
  }
  ready_.notify_all();
}

int64_t Completion::completion_tokens() const {
  std::lock_guard lock(mutex_);
  return completion_tokens_;
}

std::string Completion::error() const {
  std::lock_guard lock(mutex_);
  return error_;
}

SpeculationStats Completion::speculation() const {
  std::lock_guard lock(mutex_);
  return speculation_;
}

std::string Completion::drafter() const {
  std::lock_guard lock(mutex_);
  return drafter_;
}

double Completion::prompt_seconds() const {
  std::lock_guard lock(mutex_);
  return prompt_seconds_;
}

double Completion::generation_seconds() const {
  std::lock_guard lock(mutex_);
  if (first_tokens_ == std::chrono::steady_clock::time_point::max()) return 0.0;
  return std::chrono::duration<double>(generation_end_ - first_tokens_).count();
}

CompletionService::CompletionService(Model& target, std::optional<DraftSource> draft,
                                     const ServiceOptions& options)
    : target_(target), draft_(std::move(draft)), options_(options), feed_(options.max_waiting) {
  if (!target_.tokenizer()) Fail("the served model has no tokenizer");
  chat_format_ = std::make_unique<const chat::ModelChatFormat>(options_.chat_template_source,
                                                               *target_.tokenizer());
  options_.plan_inputs.max_tokens =
      std::min({options_.plan_inputs.max_tokens, kMaxRequestTreeTokens, target_.max_batch()});
  // A client's tree spec may not name a file: `file:PATH` would have the server read whatever
  // PATH is and quote it back in the error. The server's own --spec may.
  request_plan_inputs_ = options_.plan_inputs;
  request_plan_inputs_.tree_files = false;
  if (!options_.record_dir.empty()) record_ = std::make_unique<TrafficRecord>(options_.record_dir);
  const SamplerParams greedy{.temperature = 0.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f};
  CompletionRequest defaults;
  defaults.speculation = options_.spec;
  SchedulerOptions scheduler_options{.policy = options_.policy,
                                     .node_budget = options_.node_budget};
  try {
    scheduler_options.speculation = PolicyFor(defaults, greedy);
  } catch (const ApiError& e) {
    Fail("--spec ", options_.spec, ": ", e.what());
  }
  // Without a draft the lanes decode plainly (every request's policy is plain); their drafter is
  // never asked for a tree.
  scheduler_ = std::make_unique<Scheduler>(target_, draft_ ? *draft_ : DraftSource::PromptLookup(),
                                           scheduler_options);
  // An auto tree is measured now, on an ordinary sentence, not under the first requests' load.
  const Tokenizer& tok = *target_.tokenizer();
  scheduler_->ChooseAutoTree(
      tok.Encode("The sun was warm, and the children played by the river until it was time to "
                 "go home.",
                 true));
  serving_ = std::thread([this] {
    try {
      scheduler_->Serve(feed_);
    } catch (const std::exception& e) {
      failed_ = true;
      feed_.Close();
      Log(LogLevel::kError, "serve: the scheduler stopped: ", e.what());
    }
  });
}

CompletionService::~CompletionService() {
  feed_.Close();
  if (serving_.joinable()) serving_.join();
}

std::string CompletionService::SwapDrafter(const std::string& name) {
  std::shared_ptr<SuffixStore> store;
  bool reads_features = false;
  {
    std::lock_guard lock(draft_mutex_);
    if (!draft_) {
      throw ApiError(409,
                     "this server serves without a drafter (--draft none): restart it with one",
                     "invalid_request_error", "draft");
    }
    store = draft_->suffix_store();
    reads_features = draft_->reads_target_features();
  }
  // Loaded on a pool of its own while the target serves on its pool (a draft is small; one core
  // takes least from the forwards in flight).
  ThreadPool loader(1);
  std::optional<DraftSource> source;
  try {
    // Copied, not mapped: a draft file rewritten in place under the server changes nothing it
    // serves (io/mapped_file.h); the README tells users to replace files with mv all the same.
    source = DraftSource::Open(name, *target_.parameters(), loader, store, nullptr,
                               FileBacking::kCopied);
  } catch (const Error& e) {
    throw ApiError(400, StrCat("drafter '", name, "': ", e.what()), "invalid_request_error",
                   "draft");
  }
  // A drafter that reads the target's features changes how sequences start (each prefills its
  // own prompt) and which trees suit it: not something to change under a running server.
  if (source->reads_target_features() != reads_features) {
    throw ApiError(400,
                   StrCat("drafter '", name, "' ", reads_features ? "does not read" : "reads",
                          " the target's features and the serving one ",
                          reads_features ? "does" : "does not", ": such a swap needs a restart"),
                   "invalid_request_error", "draft");
  }
  const std::string swapped = source->traits().name;
  // The old drafter is released after the lock (`outgoing`): closing a model may wait for its
  // packed weights to be written (model/packed_weight_cache.h), and requests look the drafter up
  // under it.
  std::optional<DraftSource> outgoing;
  {
    std::lock_guard lock(draft_mutex_);
    // Requests resolved against the old drafter's traits and admitted after the swap stay
    // lossless: the rules the server verifies with (greedy, target-sample) are lossless for any
    // tree.
    scheduler_->ReplaceDraft(*source);
    outgoing = std::exchange(draft_, std::move(source));
  }
  metrics_.DrafterSwapped();
  Log(LogLevel::kInfo, "serve: drafter swapped to ", name, " (", swapped,
      "); sequences in flight finish with the old one");
  return swapped;
}

std::string CompletionService::drafter_name() const {
  std::lock_guard lock(draft_mutex_);
  return draft_ ? draft_->traits().name : "none";
}

SpeculationPolicy CompletionService::PolicyFor(const CompletionRequest& request,
                                               const SamplerParams& sampling) {
  DrafterTraits traits;
  {
    std::lock_guard lock(draft_mutex_);
    if (!draft_ || request.speculation == "off") return PlainPolicy(sampling);
    traits = draft_->traits();
  }
  try {
    SpeculationPolicy policy = ResolveSpeculation(
        {.plan = request.speculation, .verify = sampling.greedy() ? "" : "target-sample"},
        request.speculation == options_.spec ? options_.plan_inputs : request_plan_inputs_, traits,
        sampling);
    if (policy.plan.max_drafted_nodes() + 1 > kMaxRequestTreeTokens) {
      throw ApiError(400,
                     "tree '" + request.speculation + "' drafts up to " +
                         std::to_string(policy.plan.max_drafted_nodes()) +
                         " nodes per level; at most " + std::to_string(kMaxRequestTreeTokens - 1) +
                         " are served",
                     "invalid_request_error", "grove.speculation");
    }
    return policy;
  } catch (const Error& e) {
    throw ApiError(400, e.what(), "invalid_request_error", "grove.speculation");
  }
}

std::string CompletionService::RenderChatPrompt(const CompletionRequest& request) const {
  jinja::ChatTemplateInput input;
  if (request.chat_messages.is_array()) {
    input.messages = request.chat_messages;
  } else {
    for (const chat::ChatMessage& m : request.messages) {
      input.messages.push_back({{"role", m.role}, {"content", m.content}});
    }
  }
  input.tools = request.tools;
  input.extra = request.chat_template_kwargs;
  try {
    return chat_format_->Render(std::move(input));
  } catch (const chat::ChatMessagesError& e) {
    throw ApiError(400, e.what(), "invalid_request_error", e.param());
  } catch (const Error& e) {
    throw ApiError(400, e.what(), "invalid_request_error", "messages");
  }
}

std::vector<int32_t> CompletionService::Tokenize(const CompletionRequest& request,
                                                 bool* thinking_open) const {
  const Tokenizer& tok = *target_.tokenizer();
  *thinking_open = false;
  if (!request.chat) return tok.Encode(request.prompt, tok.add_bos_by_default());
  const std::string text = RenderChatPrompt(request);
  *thinking_open = chat::PromptOpensThinking(text);
  return chat_format_->Encode(text);
}

std::vector<int32_t> CompletionService::PromptOf(const CompletionRequest& request,
                                                 bool* thinking_open) const {
  std::vector<int32_t> prompt = Tokenize(request, thinking_open);
  const char* field = request.chat ? "messages" : "prompt";
  if (prompt.empty()) {
    const bool has_bos = target_.tokenizer()->bos() >= 0;
    throw ApiError(400,
                   has_bos ? "the prompt is empty, and this model does not start texts with its "
                             "BOS token: give it some text"
                           : "the prompt is empty and the model has no BOS token to start from",
                   "invalid_request_error", field);
  }
  if (static_cast<int32_t>(prompt.size()) >= target_.n_ctx()) {
    throw ApiError(400,
                   "the prompt has " + std::to_string(prompt.size()) +
                       " tokens; this model's context holds " + std::to_string(target_.n_ctx()),
                   "invalid_request_error", field);
  }
  return prompt;
}

SamplerParams CompletionService::SamplingFor(const CompletionRequest& request) const {
  const SamplerParams& defaults = options_.sampling;
  SamplerParams sampling{.temperature = request.temperature.value_or(defaults.temperature),
                         .top_k = request.top_k.value_or(defaults.top_k),
                         .top_p = request.top_p.value_or(defaults.top_p),
                         .min_p = request.min_p.value_or(defaults.min_p),
                         .seed = request.seed ? *request.seed : RandomSeed()};
  try {
    sampling.Validate();
  } catch (const Error& e) {
    throw ApiError(400, e.what());
  }
  return sampling;
}

std::shared_ptr<StepChannel> CompletionService::TakeNextChannel() {
  std::lock_guard lock(running_mutex_);
  return std::exchange(next_channel_, std::make_shared<StepChannel>());
}

std::vector<std::string> CompletionService::StopsFor(const CompletionRequest& request) const {
  std::vector<std::string> stops = request.stop;
  if (request.chat) {
    for (std::string& s : chat_format_->StopStrings()) stops.push_back(std::move(s));
  }
  return stops;
}

void CompletionService::RecordChoice(const std::string& prompt_text, const SequenceResult& result) {
  if (result.cancelled || !result.error.empty()) return;
  const Tokenizer& tok = *target_.tokenizer();
  std::span<const int32_t> output(result.tokens);
  if (!output.empty() && tok.IsEndOfGeneration(output.back()))
    output = output.first(output.size() - 1);
  record_->Add(prompt_text, tok.Decode(output));
}

void CompletionService::Retire(const std::string& id, StepChannel& channel) {
  channel.Close();
  std::lock_guard lock(running_mutex_);
  running_.erase(id);
}

std::shared_ptr<Completion> CompletionService::Start(const CompletionRequest& request) {
  bool thinking_open = false;
  const std::vector<int32_t> prompt = PromptOf(request, &thinking_open);
  auto policy = std::make_shared<const SpeculationPolicy>(PolicyFor(request, SamplingFor(request)));
  // An auto plan is the scheduler's tree, chosen when its first request arrives: named when done.
  const std::string tree = policy->plan.text;
  const std::string id =
      (request.chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id_.fetch_add(1));
  auto completion =
      std::make_shared<Completion>(id, request.n, static_cast<int64_t>(prompt.size()), tree);
  const std::shared_ptr<StepChannel> channel = TakeNextChannel();
  auto choices_left = std::make_shared<int32_t>(request.n);  // touched on the scheduler's thread
  const std::vector<std::string> stops = StopsFor(request);
  const bool split_reasoning =
      request.chat && request.reasoning_format.value_or(options_.reasoning_format) ==
                          chat::ReasoningFormat::kDeepSeek;
  const Tokenizer& tok = *target_.tokenizer();
  // With --record, what each finished choice adds to the record: the prompt's text and its own.
  std::shared_ptr<const std::string> prompt_text;
  if (record_) prompt_text = std::make_shared<const std::string>(tok.Decode(prompt));
  std::vector<SequenceRequest> sequences;
  std::vector<RequestFeed::DoneFn> done;
  for (int32_t i = 0; i < request.n; ++i) {
    auto stream = std::make_shared<ChoiceStream>(
        tok, i, stops, split_reasoning ? std::optional(thinking_open) : std::nullopt);
    SequenceRequest q{.prompt = prompt,
                      .sequence = static_cast<uint64_t>(i),
                      .n_predict = request.max_tokens,
                      .speculation = policy};
    q.on_step = [channel, &tok, i](const StepView& step) {
      if (channel->watched()) channel->Publish(StepEvent(tok, step, i));
    };
    q.on_tokens = [completion, stream](std::span<const int32_t> tokens) {
      return stream->Push(*completion, tokens);
    };
    done.push_back([this, completion, stream, policy, channel, choices_left, i,
                    prompt_text](SequenceResult&& result) {
      if (record_) RecordChoice(*prompt_text, result);
      if (--*choices_left == 0) Retire(completion->id(), *channel);
      const char* reason = stream->Finish(*completion, result);
      metrics_.SequenceFinished(static_cast<int64_t>(result.tokens.size()), result.speculation);
      metrics_.SchedulerProgress(scheduler_->stats());
      const TreePlan& plan =
          policy->plan.is_auto() ? scheduler_->options().speculation.plan : policy->plan;
      completion->FinishChoice(i, result, reason, plan.text);
    });
    sequences.push_back(std::move(q));
  }
  {
    std::lock_guard lock(running_mutex_);
    const std::string text = request.chat ? request.messages.back().content : request.prompt;
    running_[id] = {channel, text.substr(0, 80), tree};
  }
  Submit(std::move(sequences), std::move(done), id, channel);
  metrics_.RequestServed(static_cast<int64_t>(prompt.size()), request.n);
  return completion;
}

void CompletionService::Submit(std::vector<SequenceRequest> sequences,
                               std::vector<RequestFeed::DoneFn> done, const std::string& id,
                               const std::shared_ptr<StepChannel>& channel) {
  const RequestFeed::Submitted submitted = feed_.SubmitAll(std::move(sequences), std::move(done));
  if (submitted != RequestFeed::Submitted::kQueued) {
    channel->Close();
    std::lock_guard lock(running_mutex_);
    running_.erase(id);
  }
  switch (submitted) {
    case RequestFeed::Submitted::kQueued:
      break;
    case RequestFeed::Submitted::kFull:
      metrics_.RequestRefused();
      throw ApiError(503,
                     "the server is busy: " + std::to_string(feed_.waiting()) +
                         " sequences wait for a slot; retry later",
                     "server_error");
    case RequestFeed::Submitted::kClosed:
      throw ApiError(503, "the server is stopping", "server_error");
  }
}

std::string CompletionService::MetricsText() const { return metrics_.Text(feed_.waiting()); }

std::shared_ptr<StepChannel> CompletionService::Steps(const std::string& id) const {
  std::lock_guard lock(running_mutex_);
  if (id == "next") return next_channel_;
  const auto it = running_.find(id);
  return it == running_.end() ? nullptr : it->second.steps;
}

std::vector<CompletionService::RunningCompletion> CompletionService::Running() const {
  std::lock_guard lock(running_mutex_);
  std::vector<RunningCompletion> out;
  for (const auto& [id, r] : running_) out.push_back({id, r.prompt, r.tree});
  return out;
}

}  // namespace grove::serve
