// Resident memory of this process, read from /proc/self/status (Linux), the one way grove reads it:
// `grove bench` reports it beside the file size (the performance target is "resident ≈ file size +
// KV cache + scratch": what the kernel actually holds), and each rank of `grove pipe` its own.
#pragma once

#include <cstdint>
#include <optional>

namespace grove {

struct ResidentMemory {
  uint64_t rss_bytes = 0;   // VmRSS: resident now (mapped weights that were touched count)
  uint64_t peak_bytes = 0;  // VmHWM: high-water mark since start or the last ResetPeakResident()
};

// nullopt where /proc/self/status is unavailable or lacks the fields.
std::optional<ResidentMemory> ReadResidentMemory();
// VmRSS in MiB; 0 where it cannot be read.
double ResidentMiB();

// Resets VmHWM to the current RSS (writes "5" to /proc/self/clear_refs, Linux >= 4.0), so the peak
// of one model is not the bandwidth probe's buffer or a previous model. False if refused.
bool ResetPeakResident();

}  // namespace grove
