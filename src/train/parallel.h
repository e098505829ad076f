// How the trainer spreads work over its threads.
//
// The trainer owns its threads: one grove ThreadPool runs every parallel part of a step (matrix
// products, attention heads, norms, losses, the optimizer), and OpenBLAS runs single-threaded
// inside it. Leaving the products to OpenBLAS's own threads made everything between two products
// serial while those threads spun on sched_yield; on 2 cores that was a third of a step.
//
// Every split below is a fixed function of the thread count, and every reduction adds its
// per-range partial results in range order, so a run is deterministic for a given -t.
#pragma once

#include <cstdint>

#include "base/function_ref.h"
#include "base/thread_pool.h"

namespace grove {

// Calls fn(part, begin, end) for the contiguous ranges that split [0, n) over the pool's threads
// (part is the range's index, 0 .. parts-1, usable to pick per-thread scratch). With no pool, one
// call covers the whole range.
inline void ForEachRange(ThreadPool* pool, int64_t n, FunctionRef<void(int, int64_t, int64_t)> fn) {
  if (n <= 0) return;
  if (pool == nullptr || pool->size() == 1) {
    fn(0, 0, n);
    return;
  }
  pool->Run([&](int thread, int n_threads) {
    const int64_t begin = n * thread / n_threads;
    const int64_t end = n * (thread + 1) / n_threads;
    if (begin < end) fn(thread, begin, end);
  });
}

inline int PoolParts(const ThreadPool* pool) { return pool == nullptr ? 1 : pool->size(); }

}  // namespace grove
