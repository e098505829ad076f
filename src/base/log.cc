#include "base/log.h"

#include <atomic>
#include <mutex>

namespace grove {
namespace {

std::mutex g_log_mutex;
LogCallback g_log_callback;
std::atomic<int> g_min_level{static_cast<int>(LogLevel::kInfo)};

}  // namespace

void SetLogCallback(LogCallback callback) {
  std::lock_guard<std::mutex> lock(g_log_mutex);
  g_log_callback = std::move(callback);
}

void SetLogLevel(LogLevel min_level) { g_min_level = static_cast<int>(min_level); }

bool LogEnabled(LogLevel level) {
  return static_cast<int>(level) >= g_min_level.load(std::memory_order_relaxed);
}

void LogMessage(LogLevel level, std::string_view message) {
  if (static_cast<int>(level) < g_min_level.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> lock(g_log_mutex);
  if (g_log_callback) g_log_callback(level, message);
}

}  // namespace grove
