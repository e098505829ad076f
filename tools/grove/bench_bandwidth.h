// The machine's own memory read bandwidth, measured with the thread count a benchmark uses.
//
// Decoding reads every weight once per token, so tokens/s is bounded by bandwidth / weight bytes.
// The bench reports achieved GB/s beside this probe so the gap to the ceiling is a number, not a
// guess.
#pragma once

#include <cstdint>

#include "base/thread_pool.h"

namespace grove::cli {

struct BandwidthProbe {
  int threads = 0;
  uint64_t buffer_bytes = 0;
  int passes = 0;
  double gbps_median = 0;  // 1e9 bytes per second
  double gbps_sd = 0;
  double gbps_max = 0;
};

// Streams a buffer of buffer_bytes (far larger than any L3, so every pass comes from DRAM) `passes`
// times across the pool's threads, each thread reading one contiguous share with the widest vector
// loads the CPU has, after one untimed pass that also faults the pages in on the reading thread.
BandwidthProbe MeasureReadBandwidth(ThreadPool& pool, uint64_t buffer_bytes, int passes);

}  // namespace grove::cli
