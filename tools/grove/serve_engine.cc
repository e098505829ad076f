#include "serve_engine.h"

#include <cstdio>
#include <filesystem>

#include "base/error.h"
#include "base/log.h"
#include "bundled_models.h"
#include "engine_options.h"
#include "io/gguf.h"
#include "model/model_parameters.h"
#include "option_checks.h"
#include "output_path.h"
#include "schedule/schedule_policy.h"
#include "speculate/command_speculation.h"
#include "speculate/draft_source.h"
#include "speculate/suffix_store.h"
#include "speculate/tree_plan.h"
#include "tokenize/tokenizer.h"

namespace grove::cli {

void AddServeModelOptions(CLI::App& cmd, ServeModelOptions& o) {
  AddModelOption(cmd, o.model, ModelRole::kTarget);
  AddPairOption(cmd, o.pair);
  AddDraftOption(cmd, o.draft, DraftRole::kDrafterOrNone);
  cmd.add_option("--spec", o.spec,
                 "Tree of requests that name none: auto (one Sequoia tree measured at the first "
                 "request), off, chain:K, kconfig:..., sequoia:N[,D], opt:N,DELTA")
      ->capture_default_str();
  AddAcceptOption(cmd, o.accept_file);
  cmd.add_option("--policy", o.policy,
                 "Scheduling of the clients' sequences: batched (their trees verified in shared "
                 "forwards), seed, serial-sd, serial-ar")
      ->capture_default_str();
  cmd.add_option("--alias", o.aliases,
                 "Model id of /v1/models and of responses (default: the file's name); repeat it "
                 "for more names to list. Requests may name any model: the one served answers");
  cmd.add_option("--parallel", o.parallel, "Sequences generated at once (target KV slots)")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  cmd.add_option("--queue", o.queue,
                 "Sequences that may wait for a slot; more get 503 with Retry-After")
      ->capture_default_str()
      ->check(CLI::Range(1, 65536));
  AddThreadsOption(cmd, o.threads, "of the target");
  AddContextOption(cmd, o.n_ctx);
  AddCacheTypeOption(cmd, o.cache_type);
  cmd.add_option("--node-budget", o.node_budget,
                 "batched: most tokens (roots and tree nodes) one verify forward packs")
      ->capture_default_str()
      ->check(CLI::Range(1, 8192));
  cmd.add_option("--api-key", o.api_key,
                 "Require 'Authorization: Bearer KEY' on every endpoint but /health and the tree "
                 "view's page");
  cmd.add_option("--admin-key", o.admin_key,
                 "Turn on the admin endpoints (POST /admin/drafter {\"draft\": NAME} swaps the "
                 "drafter while serving), answered only with 'Authorization: Bearer KEY'; also "
                 "from the environment")
      ->envname("GROVE_ADMIN_KEY");
  cmd.add_option("--reasoning-format", o.reasoning_format,
                 "Chat: none (thinking stays in content) or deepseek (a thinking model's "
                 "<think> part comes back as reasoning_content); a request's reasoning_format "
                 "overrides it")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "deepseek", "auto"}));
  cmd.add_option("--record", o.record,
                 "Keep every answered prompt and output in DIR as a corpus (train.txt, "
                 "valid.txt) that `grove train-drafter --corpus DIR` fine-tunes a draft on; "
                 "appends to what DIR holds");
  cmd.add_option("--suffix-store", o.suffix_store,
                 "With suffix drafting: load the outputs served before from FILE at start (a "
                 "damaged or foreign file is ignored with a warning) and save them there at exit");
  cmd.add_flag("-v,--verbose", o.verbose, "Print debug diagnostics");
}

namespace {

// Checked before the model loads: the record's files (appended to, never replaced) and the suffix
// store (written at exit) may be none of the files the server reads: given the draft's path, the
// store once replaced the draft with its 24 bytes.
void CheckServeOutputs(const ServeModelOptions& opt) {
  OutputRules rules{.inputs = DrafterFiles(opt.draft)};
  rules.inputs.push_back(opt.model);
  rules.inputs.push_back(opt.accept_file);
  if (!opt.record.empty()) CheckOutputDirectory(opt.record, "--record", CorpusFiles(), rules);
  if (!opt.suffix_store.empty()) {
    CheckOutputFile(opt.suffix_store, "--suffix-store", rules);
    // A file there that is not a store of its own would be refused only at exit, and every
    // output served lost with it.
    SuffixStore::CheckReplaceable(opt.suffix_store);
  }
}

}  // namespace

ServeEngine::ServeEngine(ServeModelOptions o) : options_(std::move(o)) {
  ServeModelOptions& opt = options_;
  // With the bundled pair and no --draft, the server drafts with the bundled draft and suffix
  // drafting mixed: at least as fast as either alone on every class of the mixed workload, and
  // faster on requests it has answered before (models/README.md).
  DefaultToBundledPair(opt.model, opt.draft, opt.pair, BundledDraft::kMixture);
  opt.sampling.Validate();  // the requests' defaults: a bad --top-p is refused at start
  if (opt.parallel < 1 || opt.parallel > 256)
    Fail("--parallel ", opt.parallel, " out of range 1..256");
  if (opt.queue < 1 || opt.queue > 65536) Fail("--queue ", opt.queue, " out of range 1..65536");
  if (opt.port < 0 || opt.port > 65535) Fail("--port ", opt.port, " out of range 0..65535");
  const SchedulePolicy policy = ParseSchedulePolicy(opt.policy);
  CheckServeOutputs(opt);
  chat::ReasoningFormat reasoning_format;
  if (!chat::ParseReasoningFormat(opt.reasoning_format, &reasoning_format)) {
    Fail("--reasoning-format '", opt.reasoning_format, "': expected none, deepseek or auto");
  }
  target_ = Model::Load(opt.model, {.n_threads = opt.threads,
                                    .n_ctx = opt.n_ctx,
                                    .n_seq = opt.parallel,
                                    .cache_type = ParseKvCacheType(opt.cache_type)});
  service_options_ = serve::ServiceOptions{
      .model_id =
          opt.aliases.empty() ? std::filesystem::path(opt.model).stem().string() : opt.aliases[0],
      .model_aliases = opt.aliases.size() > 1
                           ? std::vector<std::string>(opt.aliases.begin() + 1, opt.aliases.end())
                           : std::vector<std::string>{},
      .policy = policy,
      .spec = opt.spec,
      .max_waiting = opt.queue,
      .node_budget = opt.node_budget,
      .chat_template_source =
          target_->parameters()->gguf().GetString("tokenizer.chat_template", ""),
      .reasoning_format = reasoning_format,
      .sampling = opt.sampling,
      .record_dir = opt.record};
  if (!opt.draft.empty() && opt.draft != "none") {
    draft_ = DraftSource::Open(opt.draft, *target_->parameters(), *target_->shared_pool(), nullptr,
                               nullptr, FileBacking::kCopied);
    // Requests default to temperature 1 (--temp): the sampled acceptance vector fits them better.
    service_options_.plan_inputs = CommandPlanInputs(
        {.accept_file = opt.accept_file,
         .default_accept_file = BundledAcceptanceFor(opt.model, opt.draft, /*greedy=*/false)},
        target_->max_batch());
  }
  LoadSuffixStore();
  target_->WarmUp();
  service_ = std::make_unique<serve::CompletionService>(*target_, draft_, service_options_);
  http_ = std::make_unique<serve::HttpServer>(
      *service_,
      serve::HttpServerOptions{
          .host = opt.host, .port = opt.port, .api_key = opt.api_key, .admin_key = opt.admin_key});
  port_ = http_->Bind();
}

ServeEngine::~ServeEngine() {
  if (thread_.joinable()) {
    http_->Stop();
    thread_.join();
  }
  SaveSuffixStore();
}

void ServeEngine::LoadSuffixStore() {
  const std::string& path = options_.suffix_store;
  if (path.empty()) return;
  if (!draft_ || !draft_->suffix_store())
    Fail("--suffix-store needs suffix drafting (--draft suffix, or DRAFT.gguf+suffix)");
  if (!std::filesystem::exists(path)) return;
  try {
    const int64_t n = draft_->suffix_store()->Load(path, target_->tokenizer()->Fingerprint(),
                                                   target_->config().n_vocab);
    suffix_outputs_loaded_ = n;
  } catch (const Error& e) {
    Log(LogLevel::kWarn, e.what());
  }
}

void ServeEngine::SaveSuffixStore() {
  // Outputs of sequences still running at exit are not kept (the store is read under its lock).
  if (options_.suffix_store.empty() || !draft_ || !draft_->suffix_store()) return;
  try {
    draft_->suffix_store()->Save(options_.suffix_store, target_->tokenizer()->Fingerprint());
  } catch (const Error& e) {
    Log(LogLevel::kWarn, "serve: the suffix store was not saved: ", e.what());
  }
}

void ServeEngine::ReloadDrafter() {
  if (!draft_) {
    Log(LogLevel::kWarn, "serve: no drafter to reload (--draft none)");
    return;
  }
  try {
    const std::string name = service_->SwapDrafter(options_.draft);
    std::fprintf(stderr, "[grove] drafter reloaded from %s (%s)\n", options_.draft.c_str(),
                 name.c_str());
  } catch (const std::exception& e) {
    Log(LogLevel::kWarn, "serve: the drafter was not reloaded, the old one serves on: ", e.what());
  }
}

void ServeEngine::Start() {
  thread_ = std::thread([this] { http_->Listen(); });
}

std::string ServeEngine::Describe() const {
  const ServeModelOptions& o = options_;
  char text[1024];
  std::snprintf(text, sizeof(text),
                "%s as '%s' on http://%s:%d (draft %s, tree %s, policy %s, %d parallel, chat "
                "template %s)",
                o.model.c_str(), service_options_.model_id.c_str(), o.host.c_str(), port_,
                draft_ ? o.draft.c_str() : "none", draft_ ? o.spec.c_str() : "off",
                o.policy.c_str(), o.parallel, service_->chat_format().Describe().c_str());
  std::string line = text;
  if (suffix_outputs_loaded_ > 0) {
    line += "; suffix store: " + std::to_string(suffix_outputs_loaded_) + " outputs from " +
            o.suffix_store;
  }
  if (!service_->chat_format().template_error().empty()) {
    line += "; the model's template was not usable: " + service_->chat_format().template_error();
  }
  return line;
}

}  // namespace grove::cli
