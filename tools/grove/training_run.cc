#include "training_run.h"

#include <atomic>
#include <csignal>
#include <cstdio>

#include "base/error.h"

namespace grove::cli {
namespace {

std::atomic<bool> g_stop{false};

extern "C" void OnTrainingInterrupt(int) {
  g_stop = true;
  std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends the process at once
}

}  // namespace

std::filesystem::path CheckExportPath(const std::string& export_path, const OutputRules& rules) {
  const std::filesystem::path export_dir = std::filesystem::path(export_path).parent_path();
  if (export_path.empty()) return export_dir;
  if (!export_dir.empty() && !std::filesystem::exists(export_dir)) {
    CheckOutputDirectory(export_dir.string(), "--export");
  } else {
    CheckOutputFile(export_path, "--export", rules);
  }
  return export_dir;
}

void CreateExportDirectory(const std::filesystem::path& export_dir) {
  if (!export_dir.empty()) std::filesystem::create_directories(export_dir);
}

TrainResult RunStoppable(const std::function<TrainResult(const std::atomic<bool>* stop)>& train) {
  g_stop = false;
  std::signal(SIGINT, OnTrainingInterrupt);
  TrainResult r;
  try {
    r = train(&g_stop);
  } catch (...) {
    std::signal(SIGINT, SIG_DFL);
    throw;
  }
  std::signal(SIGINT, SIG_DFL);
  return r;
}

bool StopRequested() { return g_stop; }

void FailIfInterrupted(const TrainResult& r, const char* command) {
  if (!r.interrupted) return;
  std::fprintf(stderr, "run the same command again to resume\n");
  throw Error(StrCat(command, ": interrupted"));
}

}  // namespace grove::cli
