#include "base/resident_memory.h"

#include <cstdio>
#include <cstring>

namespace grove {

std::optional<ResidentMemory> ReadResidentMemory() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return std::nullopt;
  ResidentMemory m;
  bool have_rss = false, have_peak = false;
  char line[256];
  unsigned long long kib = 0;
  while (std::fgets(line, sizeof line, f)) {
    if (std::sscanf(line, "VmRSS: %llu kB", &kib) == 1) {
      m.rss_bytes = kib * 1024, have_rss = true;
    } else if (std::sscanf(line, "VmHWM: %llu kB", &kib) == 1) {
      m.peak_bytes = kib * 1024, have_peak = true;
    }
  }
  std::fclose(f);
  if (!have_rss || !have_peak) return std::nullopt;
  return m;
}

double ResidentMiB() {
  const std::optional<ResidentMemory> m = ReadResidentMemory();
  return m ? static_cast<double>(m->rss_bytes) / 1048576.0 : 0.0;
}

bool ResetPeakResident() {
  std::FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (!f) return false;
  const bool ok = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

}  // namespace grove
