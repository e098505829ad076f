// When an op splits its work over the thread pool, and when it runs on the calling thread.
//
// A dispatch wakes the pool's workers and waits until its pieces are done; on this 2-core machine
// that costs 0.2-0.4 us with hot workers and more when they must be woken (on this VM, when its two
// vCPUs are slow to answer each other, which comes and goes). Splitting an op pays
// only when its own time is several times that. The ops estimate their work in multiply-adds (the
// unit that sets their time for matmuls and attention alike) and call these instead of the pool: a
// draft model's narrowest ops then run on one thread, and a 1.1B target splits every matmul.
// Which thread computes an index never changes its result (contract 2), so the choice is free.
#pragma once

#include <cstdint>

#include "base/function_ref.h"
#include "base/thread_pool.h"

namespace grove {

// About 2-4 us of one core's group-kernel matmul (65-130 G multiply-adds/s at one row), several
// times a dispatch. Timed at stop 53 on the bundled pair at 2 threads, binaries alternating: the
// base target's t(1) 0.89-0.96 ms at 2^19 (its 640 x 640 output projection on one thread),
// 0.84-0.90 at 2^18, 0.79-0.83 at 2^15; plain 128-token runs 5-12% faster at 2^18 and below. At
// 2^15 the draft's 192-wide ops split as well: its tg128 went 32k -> 40k t/s while the VM's two
// vCPUs answered each other quickly and fell to 20k, below one thread's, an hour later when they
// did not, its speculative runs 4% faster, then 5-9% slower. 2^18 keeps what held in both states.
// In all, not per thread: a dispatch costs about the same whatever the op, so the op's own time
// decides; a 1.1B model's matmuls (4M and more) split at any thread count either way.
inline constexpr int64_t kMinParallelMacs = int64_t{1} << 18;

// Ops that pass over rows element by element (norms, rotations, activations, quantizing a
// matmul's activations) state their work as this many multiply-adds per element, so that one
// threshold decides for every op: such a pass streams each element through a few vector
// instructions and a load and a store, where the group kernel spends one fused instruction on
// several multiply-adds. At 8, an elementwise op splits from 2^15 elements, which is where norms
// and activation quantizing split when each had a threshold of its own.
inline constexpr int64_t kMacsPerElement = 8;

inline constexpr int64_t ElementwiseMacs(int64_t elements) { return elements * kMacsPerElement; }

inline bool WorthSplitting(const ThreadPool& pool, int64_t macs) {
  return pool.size() > 1 && macs >= kMinParallelMacs;
}

// pool.ParallelForWithThread(n, fn) when the work is worth splitting, else fn(0, n, 0) here.
inline void ParallelForWorkWithThread(ThreadPool& pool, int64_t n, int64_t macs,
                                      FunctionRef<void(int64_t, int64_t, int)> fn) {
  if (n <= 0) return;
  if (WorthSplitting(pool, macs)) {
    pool.ParallelForWithThread(n, fn);
  } else {
    fn(0, n, 0);
  }
}

// The same for work that needs no scratch of its thread's own: fn(begin, end).
inline void ParallelForWork(ThreadPool& pool, int64_t n, int64_t macs,
                            FunctionRef<void(int64_t, int64_t)> fn) {
  ParallelForWorkWithThread(pool, n, macs,
                            [&](int64_t begin, int64_t end, int) { fn(begin, end); });
}

}  // namespace grove
