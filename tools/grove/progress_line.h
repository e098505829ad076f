// Progress of long work on stderr. On a terminal, one line that rewrites itself ("\r"); anywhere
// else (a log file, a pipe, CI) a full line at each tenth of the work, so that logs get neither
// carriage returns nor a line per step.
#pragma once

#include <cstdint>
#include <string>

namespace grove::cli {

class ProgressLine {
 public:
  ProgressLine();
  // `text` is the whole line (e.g. "calibrating: prompt 3/10"); done counts 1..total.
  void Update(int64_t done, int64_t total, const std::string& text);

 private:
  bool tty_;
};

// "1h05m" or "3m07s"; "?" for a negative or unknown duration.
std::string FormatDuration(double seconds);

}  // namespace grove::cli
