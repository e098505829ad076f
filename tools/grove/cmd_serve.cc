// grove serve: the OpenAI-compatible server (src/serve). Loads the pair once, gives the target one
// KV slot per sequence served at once (--parallel), and serves until SIGINT or SIGTERM; SIGHUP
// reloads the drafter from --draft (a draft trained anew in place) without stopping.
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <memory>
#include <thread>

#include "commands.h"
#include "sampling_options.h"
#include "serve_engine.h"

namespace grove::cli {
namespace {

void RunServe(const ServeModelOptions& o) {
  InstallStderrLog(o.verbose);
  // Block the stop signals in every thread started from here on; one thread waits for them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  ServeEngine engine(o);
  std::fprintf(stderr, "[grove] serving %s; Ctrl-C stops, SIGHUP reloads the drafter\n",
               engine.Describe().c_str());
  std::thread stopper([&] {
    int signal = 0;
    while (sigwait(&stop_signals, &signal) == 0 && signal == SIGHUP) engine.ReloadDrafter();
    std::fprintf(stderr, "[grove] stopping (signal %d)\n", signal);
    engine.Stop();
  });
  engine.Listen();
  // Listen returned on its own (not by a signal): wake the stopper so it can be joined.
  pthread_kill(stopper.native_handle(), SIGTERM);
  stopper.join();
}

}  // namespace

void AddServeCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("serve", kServeSummary);
  auto o = std::make_shared<ServeModelOptions>();
  AddServeModelOptions(*cmd, *o);
  // The defaults of requests that leave a field out: OpenAI's temperature 1, the common filters.
  AddSamplingOptions(*cmd, o->sampling);
  cmd->add_option("--host", o->host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", o->port, "Port (0: any free port)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  cmd->callback([o] { RunServe(*o); });
}

}  // namespace grove::cli
