#include "bench_bandwidth.h"

#include <cstring>
#include <vector>

#include "base/aligned_buffer.h"
#include "base/timer.h"
#include "bench_stats.h"

namespace grove::cli {
namespace {

// 64 bytes: one cache line, one AVX-512 register, two AVX2 or four SSE2 registers.
using Line = uint64_t __attribute__((vector_size(64)));

// XOR-folds n cache lines. The tools are compiled for baseline x86-64, so target_clones builds this
// loop once per vector width and the loader picks the widest the CPU supports: a probe limited to
// 16-byte loads would understate the ceiling that the AVX-512 matmul kernels can reach. Two
// independent accumulators keep the loads from waiting on each other; XOR cannot be optimised away.
__attribute__((target_clones("avx512f", "avx2", "default"))) uint64_t FoldLines(const Line* lines,
                                                                                int64_t n) {
  Line a0{}, a1{};
  int64_t i = 0;
  for (; i + 2 <= n; i += 2) {
    a0 ^= lines[i];
    a1 ^= lines[i + 1];
  }
  if (i < n) a0 ^= lines[i];
  const Line a = a0 ^ a1;
  uint64_t folded = 0;
  for (int j = 0; j < 8; ++j) folded ^= a[j];
  return folded;
}

}  // namespace

BandwidthProbe MeasureReadBandwidth(ThreadPool& pool, uint64_t buffer_bytes, int passes) {
  const int64_t n_lines = static_cast<int64_t>(buffer_bytes / sizeof(Line));
  AlignedBuffer<Line> buffer(static_cast<std::size_t>(n_lines));
  // Written, not just allocated: untouched pages all map the kernel's one zero page, which would be
  // read from cache. Each thread writes the share it will read, so the pages sit near it (NUMA).
  pool.ParallelFor(n_lines, [&](int64_t begin, int64_t end) {
    std::memset(static_cast<void*>(buffer.data() + begin), 0x5a,
                static_cast<std::size_t>(end - begin) * sizeof(Line));
  });
  // One sink slot per cache line, so threads do not share a line while they store their result.
  std::vector<Line> sink(static_cast<std::size_t>(pool.size()));
  std::vector<double> gbps;
  for (int pass = -1; pass < passes; ++pass) {  // pass -1 warms up and is not counted
    Timer timer;
    pool.Run([&](int thread, int n_threads) {
      const int64_t begin = n_lines * thread / n_threads;
      const int64_t end = n_lines * (thread + 1) / n_threads;
      sink[thread][0] ^= FoldLines(buffer.data() + begin, end - begin);
    });
    const double seconds = timer.Seconds();
    if (pass >= 0) gbps.push_back(static_cast<double>(n_lines) * sizeof(Line) / seconds / 1e9);
  }
  uint64_t folded = 0;
  for (const Line& s : sink) folded ^= s[0];
  asm volatile("" : : "r"(folded));  // the folds are observable, so no pass can be dropped
  const SampleStats stats = Summarize(gbps);
  return {.threads = pool.size(),
          .buffer_bytes = static_cast<uint64_t>(n_lines) * sizeof(Line),
          .passes = passes,
          .gbps_median = stats.median,
          .gbps_sd = stats.sd,
          .gbps_max = stats.max};
}

}  // namespace grove::cli
