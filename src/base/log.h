// Diagnostics from the library go through one process-wide callback (contract 5: the library never
// prints). The CLI installs a callback that writes to stderr; tests may capture messages.
#pragma once

#include <functional>
#include <string_view>

#include "base/error.h"

namespace grove {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

using LogCallback = std::function<void(LogLevel, std::string_view)>;

// Replaces the callback; an empty callback discards messages (the default).
void SetLogCallback(LogCallback callback);
void SetLogLevel(LogLevel min_level);
void LogMessage(LogLevel level, std::string_view message);

// Whether a message of this level would be passed on (the hot path checks before formatting).
bool LogEnabled(LogLevel level);

// Formats only messages that pass the level, so a filtered message costs no allocation.
template <typename... Args>
void Log(LogLevel level, Args&&... args) {
  if (LogEnabled(level)) LogMessage(level, StrCat(std::forward<Args>(args)...));
}

}  // namespace grove
