#include "progress_line.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>

namespace grove::cli {

ProgressLine::ProgressLine() : tty_(::isatty(STDERR_FILENO) == 1) {}

void ProgressLine::Update(int64_t done, int64_t total, const std::string& text) {
  if (tty_) {
    std::fprintf(stderr, "\r\033[K%s%s", text.c_str(), done >= total ? "\n" : "");
  } else if (done >= total || done * 10 / total != (done - 1) * 10 / total) {
    std::fprintf(stderr, "%s\n", text.c_str());
  }
  std::fflush(stderr);
}

std::string FormatDuration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const auto total = static_cast<int64_t>(s + 0.5);
  char buf[32];
  if (total >= 3600) {
    std::snprintf(buf, sizeof(buf), "%lldh%02lldm", static_cast<long long>(total / 3600),
                  static_cast<long long>(total / 60 % 60));
  } else {
    std::snprintf(buf, sizeof(buf), "%lldm%02llds", static_cast<long long>(total / 60),
                  static_cast<long long>(total % 60));
  }
  return buf;
}

}  // namespace grove::cli
