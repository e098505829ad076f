// grove serve: the OpenAI-compatible server (src/serve). Loads the pair once, gives the target one
// KV slot per client served at once (--parallel), and serves until SIGINT or SIGTERM.
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "base/error.h"
#include "bundled_models.h"
#include "commands.h"
#include "io/gguf.h"
#include "model/model.h"
#include "model/model_parameters.h"
#include "serve/completion_service.h"
#include "serve/http_server.h"
#include "speculate/open_drafter.h"

namespace grove::cli {
namespace {

struct ServeOptions {
  std::string model;
  std::string draft;
  std::string spec = "auto";
  std::string accept_file;
  std::string policy = "batched";
  std::string alias;
  std::string host = "127.0.0.1";
  int port = 8080;
  int parallel = 4;
  int queue = 64;
  int threads = 0;
  int n_ctx = 0;
  int node_budget = 128;
  std::string api_key;
  bool verbose = false;
};

void RunServe(ServeOptions o) {
  InstallStderrLog(o.verbose);
  if (o.model.empty()) {
    const auto bundled = FindBundledModels();
    if (!bundled) {
      Fail(
          "no model given (-m) and the bundled models were not found; set GROVE_MODELS or pass "
          "-m MODEL.gguf");
    }
    o.model = bundled->target;
    if (o.draft.empty()) o.draft = bundled->draft;
  }
  if (o.parallel < 1 || o.parallel > 256) Fail("--parallel ", o.parallel, " out of range 1..256");
  if (o.queue < 1 || o.queue > 65536) Fail("--queue ", o.queue, " out of range 1..65536");
  if (o.port < 0 || o.port > 65535) Fail("--port ", o.port, " out of range 0..65535");
  const SchedulePolicy policy = ParseSchedulePolicy(o.policy);

  // Block the stop signals in every thread started from here on; one thread waits for them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  auto target =
      Model::Load(o.model, {.n_threads = o.threads, .n_ctx = o.n_ctx, .n_seq = o.parallel});
  std::shared_ptr<const ModelParameters> draft;
  serve::ServiceOptions service_options{
      .model_id = o.alias.empty() ? std::filesystem::path(o.model).stem().string() : o.alias,
      .policy = policy,
      .spec = o.spec,
      .max_waiting = o.queue,
      .node_budget = o.node_budget,
      .chat_template = serve::DetectChatTemplate(
          target->parameters()->gguf().GetString("tokenizer.chat_template", ""))};
  if (!o.draft.empty() && o.draft != "none") {
    draft = OpenDrafter(o.draft, *target).model->parameters();
    const std::string accept = o.accept_file.empty()
                                   ? BundledAcceptanceFor(o.model, o.draft, /*greedy=*/false)
                                   : o.accept_file;
    service_options.plan_inputs = ReadPlanInputs(accept, "", target->max_batch());
  }
  target->WarmUp();
  serve::CompletionService service(*target, draft, service_options);
  serve::HttpServer server(service, {.host = o.host, .port = o.port, .api_key = o.api_key});
  const int port = server.Bind();
  std::fprintf(stderr,
               "[grove] serving %s as '%s' on http://%s:%d (draft %s, tree %s, policy %s, %d "
               "parallel, chat template %s); Ctrl-C stops\n",
               o.model.c_str(), service_options.model_id.c_str(), o.host.c_str(), port,
               draft ? o.draft.c_str() : "none", draft ? o.spec.c_str() : "off", o.policy.c_str(),
               o.parallel,
               std::string(serve::ChatTemplateName(service_options.chat_template)).c_str());
  std::thread stopper([&] {
    int signal = 0;
    sigwait(&stop_signals, &signal);
    std::fprintf(stderr, "[grove] stopping (signal %d)\n", signal);
    server.Stop();
  });
  server.Listen();
  // Listen returned on its own (not by a signal): wake the stopper so it can be joined.
  pthread_kill(stopper.native_handle(), SIGTERM);
  stopper.join();
}

}  // namespace

void AddServeCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "serve",
      "OpenAI-compatible server (/v1/completions, /v1/chat/completions, /v1/models, /health, "
      "/metrics) that speculates for every request and verifies the clients' trees together");
  auto o = std::make_shared<ServeOptions>();
  cmd->add_option("-m,--model", o->model, "Target GGUF (default: the bundled pair in models/)");
  cmd->add_option("--draft", o->draft,
                  "Draft GGUF, or 'none' to serve without speculation (default: the bundled draft "
                  "with the bundled target)");
  cmd->add_option("--spec", o->spec,
                  "Tree of requests that name none: auto (one Sequoia tree measured at the first "
                  "request), off, chain:K, kconfig:..., sequoia:N[,D], opt:N,DELTA")
      ->capture_default_str();
  cmd->add_option("--accept", o->accept_file,
                  "Acceptance vector JSON for sequoia trees (default: the bundled pair's)");
  cmd->add_option("--policy", o->policy,
                  "Scheduling of the clients' sequences: batched (their trees verified in shared "
                  "forwards), seed, serial-sd, serial-ar")
      ->capture_default_str();
  cmd->add_option("--alias", o->alias, "Model id of /v1/models (default: the file's name)");
  cmd->add_option("--host", o->host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", o->port, "Port (0: any free port)")->capture_default_str();
  cmd->add_option("--parallel", o->parallel, "Sequences generated at once (target KV slots)")
      ->capture_default_str();
  cmd->add_option("--queue", o->queue,
                  "Sequences that may wait for a slot; more get 503 with Retry-After")
      ->capture_default_str();
  cmd->add_option("-t,--threads", o->threads, "Target threads (0: all hardware threads)")
      ->capture_default_str();
  cmd->add_option("-c,--ctx-size", o->n_ctx, "Context size (0: the model's, at most 4096)")
      ->capture_default_str();
  cmd->add_option("--node-budget", o->node_budget,
                  "batched: most tokens (roots and tree nodes) one verify forward packs")
      ->capture_default_str();
  cmd->add_option("--api-key", o->api_key, "Require 'Authorization: Bearer KEY' on /v1/");
  cmd->add_flag("-v,--verbose", o->verbose, "Print debug diagnostics");
  cmd->callback([o] { RunServe(*o); });
}

}  // namespace grove::cli
