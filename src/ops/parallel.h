// When an op splits its work over the thread pool, and when it runs on the calling thread.
//
// A dispatch wakes the pool's workers and ends in a barrier; on this 2-core machine that costs
// 1-3 us with hot workers and much more when a worker was descheduled. Splitting an op pays only
// when its own time is several times that. The ops estimate their work in multiply-adds (the unit
// that sets their time for matmuls and attention alike) and call these instead of the pool: a
// draft model of width 128 then runs every op on one thread, and a 1.1B target splits every matmul.
// Which thread computes an index never changes its result (contract 2), so the choice is free.
#pragma once

#include <cstdint>

#include "base/function_ref.h"
#include "base/thread_pool.h"

namespace grove {

// About 4-8 us of one core's group-kernel matmul (65-130 G multiply-adds/s at one row, more at
// several): enough that the barrier is a small share of the split op. On the bundled pair at 2
// threads, thresholds from 2^17 to 2^21 and none at all were timed interleaved in one process:
// 2^19 was among the fastest for both decode and a 3-token verify; 2^18 and below lost 5-15% on
// the verify (its small matmuls split), none at all lost on decode.
inline constexpr int64_t kMinParallelMacs = int64_t{1} << 19;

inline bool WorthSplitting(const ThreadPool& pool, int64_t macs) {
  return pool.size() > 1 && macs >= kMinParallelMacs;
}

// pool.ParallelFor(n, fn) when the work is worth splitting, else fn(0, n) here.
inline void ParallelForWork(ThreadPool& pool, int64_t n, int64_t macs,
                            FunctionRef<void(int64_t, int64_t)> fn) {
  if (n <= 0) return;
  if (WorthSplitting(pool, macs)) {
    pool.ParallelFor(n, fn);
  } else {
    fn(0, n);
  }
}

// pool.Run(fn) when the work is worth splitting, else fn(0, 1) here.
inline void RunWork(ThreadPool& pool, int64_t macs, FunctionRef<void(int, int)> fn) {
  if (WorthSplitting(pool, macs)) {
    pool.Run(fn);
  } else {
    fn(0, 1);
  }
}

}  // namespace grove
