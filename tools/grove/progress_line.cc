#include "progress_line.h"

#include <unistd.h>

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

}  // namespace grove::cli
