// One persistent pool of worker threads, shared by the models of a process (a target and its
// draft) or owned by one model; no thread is created in the token loop. One caller at a time: a
// pool runs one job, and Run checks that no other is under way (two threads forwarding two models
// that share a pool at once would be a bug; give them a pool each). The exception is a borrowing
// pool (a draft lane's), which runs a job on a lender's workers only when the lender is free.
//
// A forward pass dispatches a few parallel loops per layer; with thousands of dispatches per token
// a futex wake-up (~5-50 us) would dominate, so idle workers spin on an atomic generation counter
// for a short while before parking on a condition variable. The calling thread does share 0 of each
// job, so a pool of n threads starts n-1 workers.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

#include "base/function_ref.h"

namespace grove {

// The most threads a pool may have: 4 x the hardware threads. More only adds context switches to
// a compute-bound pool, and an unbounded count (`-t 1000000`) would create threads until the
// process or the machine gives out.
int MaxThreads();

// Checks a requested thread count: 0 (all hardware threads) to MaxThreads(); fails naming `what`.
void CheckThreadCount(int n_threads, std::string_view what);

// The threads a pool asked for n_threads has: n_threads, or the hardware threads for 0 or less.
int PoolThreadCount(int n_threads);

class ThreadPool {
 public:
  // n_threads <= 0 selects the number of hardware threads; more than MaxThreads() is an error, and
  // so is a thread the system refuses to create (grove::Error, with the threads started so far
  // joined).
  explicit ThreadPool(int n_threads);
  // A pool without workers of its own that computes on `lender`'s while borrowing is on and the
  // lender is free between its own jobs, and otherwise on the calling thread alone (fn(0, 1)):
  // for a draft lane beside its target, whose cores sit idle while it waits for the draft. Its
  // size() is the lender's, so ops split as they would there. The lender's caller waits out a
  // borrowed job (one op of a draft forward: microseconds) instead of failing.
  explicit ThreadPool(std::shared_ptr<ThreadPool> lender);
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  ~ThreadPool();

  int size() const { return n_threads_; }
  // For a borrowing pool: whether its jobs may go to the lender (off at first).
  void set_borrowing(bool on) { borrowing_.store(on, std::memory_order_relaxed); }

  // Calls fn(thread_index, n_threads) once on every thread and returns when all have finished.
  void Run(FunctionRef<void(int, int)> fn);

  // Calls fn(begin, end) on contiguous ranges that cover [0, n) once: a few per thread, each
  // computed by whichever thread claims it first, and returns when all are done (a worker that was
  // descheduled meanwhile is not waited for; thread_pool.cc). Which thread computes which index
  // never changes the result, since each index is computed by exactly one call.
  void ParallelFor(int64_t n, FunctionRef<void(int64_t, int64_t)> fn);
  // The same, and fn(begin, end, thread) is told which thread (0 .. size() - 1) computes the
  // range, for scratch memory of that thread's own: a thread computes its ranges one at a time.
  void ParallelForWithThread(int64_t n, FunctionRef<void(int64_t, int64_t, int)> fn);

  // Number of Run/ParallelFor dispatches since construction.
  uint64_t dispatch_count() const { return dispatch_count_; }

 private:
  enum State : int { kFree = 0, kOwned = 1, kLent = 2 };
  void WorkerLoop(int index);
  void StopWorkers();  // wakes, stops and joins every worker
  // Runs fn on every thread; the caller holds state_.
  void Dispatch(FunctionRef<void(int, int)> fn);
  // Takes the pool for one job (state_ kFree to kOwned), waiting out a borrower's; fails on a
  // second caller.
  void Acquire();
  // Publishes the next job: a ParallelFor job's pieces (`pieces`) or a Run job; returns its
  // sequence number. The caller holds state_.
  uint32_t Publish(bool pieces);
  // Claims and computes, as `thread`, the current ParallelFor job's pieces while job `seq` has
  // any left.
  void ClaimPieces(uint32_t seq, int thread);
  // A borrower's job, if the pool is free: true when it ran.
  bool RunLent(FunctionRef<void(int, int)> fn);

  int n_threads_;
  std::vector<std::thread> workers_;
  FunctionRef<void(int, int)>* job_ = nullptr;
  // (jobs published << 1) | 1 for a ParallelFor job: what a worker woken for it should do.
  std::atomic<uint64_t> generation_{0};
  // The current ParallelFor job: (its sequence << 32) | pieces not yet claimed. A worker claims a
  // piece by decrementing it while the sequence is the one it woke for, and only then reads
  // range_fn_ / range_n_ / range_pieces_: a worker late for a finished job claims nothing.
  std::atomic<uint64_t> claim_{0};
  std::atomic<int64_t> finished_{0};  // its pieces computed
  FunctionRef<void(int64_t, int64_t, int)>* range_fn_ = nullptr;
  int64_t range_n_ = 0;
  int64_t range_pieces_ = 0;
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<int> parked_{0};
  std::atomic<int> state_{kFree};       // a job is under way (one caller at a time): State
  std::shared_ptr<ThreadPool> lender_;  // a borrowing pool's
  std::atomic<bool> borrowing_{false};
  uint64_t dispatch_count_ = 0;
};

}  // namespace grove
