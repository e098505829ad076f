// What `grove serve` and `grove serve-bench` (without --url) share: the options that choose the
// pair and how it serves, and a running server over them (model contexts, CompletionService,
// HttpServer on its own thread).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <CLI/CLI.hpp>

#include "model/model.h"
#include "sample/sampler.h"
#include "serve/completion_service.h"
#include "serve/http_server.h"

namespace grove::cli {

struct ServeModelOptions {
  std::string model;
  std::string draft;
  std::string pair;  // bundled pair when no -m (empty: the default)
  std::string spec = "auto";
  std::string accept_file;
  std::string policy = "batched";
  std::vector<std::string> aliases;
  std::string host = "127.0.0.1";
  int port = 8080;
  int parallel = 4;
  int queue = serve::kDefaultMaxWaiting;
  int threads = 0;
  int n_ctx = 0;
  std::string cache_type = "f32";
  int node_budget = kDefaultNodeBudget;
  std::string api_key;
  std::string admin_key;  // --admin-key: the /admin/ endpoints' (empty: they are off)
  std::string reasoning_format = "none";
  std::string record;        // --record DIR (empty: no recording)
  std::string suffix_store;  // --suffix-store FILE (empty: the store lives as long as the server)
  bool verbose = false;
  // What a request that leaves a sampling field out gets (`grove serve --temp ...`).
  SamplerParams sampling{.temperature = 1.0f};
};

void AddServeModelOptions(CLI::App& cmd, ServeModelOptions& o);

class ServeEngine {
 public:
  // Loads the pair (the bundled one by default) and binds the server; throws grove::Error.
  explicit ServeEngine(ServeModelOptions options);
  ~ServeEngine();

  // Serves on a thread of its own (Stop ends it), or on the caller's (Listen).
  void Start();
  void Listen() { http_->Listen(); }
  void Stop() { http_->Stop(); }

  // Opens --draft again (a draft file trained anew in place) and swaps it in for the sequences
  // admitted from now on (SIGHUP); a failure is a warning, the old drafter serving on.
  void ReloadDrafter();

  int port() const { return port_; }
  const ServeModelOptions& options() const { return options_; }
  // One line: the model, its id, the address, the draft and tree, the policy, the slots.
  std::string Describe() const;

 private:
  // --suffix-store: the outputs served before, loaded at start and saved at exit.
  void LoadSuffixStore();
  void SaveSuffixStore();
  int64_t suffix_outputs_loaded_ = 0;
  ServeModelOptions options_;
  std::unique_ptr<Model> target_;
  std::optional<DraftSource> draft_;
  serve::ServiceOptions service_options_;
  std::unique_ptr<serve::CompletionService> service_;
  std::unique_ptr<serve::HttpServer> http_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace grove::cli
