#include "base/thread_pool.h"

#include <algorithm>
#include <system_error>

#include "base/error.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace grove {
namespace {

// Waiting has three stages. Pure spinning (~2-5 us) catches the common case of the next parallel
// loop of a forward pass arriving at once. Then the waiter yields between checks: when the machine
// has more runnable threads than cores (a build, a second model), a spinning thread would otherwise
// hold the core that the thread it waits for needs, for a whole scheduler time slice (~ms). After
// ~1 ms of yielding a worker parks on the condition variable, so an idle model costs no CPU between
// requests.
constexpr int kSpinIterations = 100;
constexpr int kYieldIterations = 2000;
// ParallelFor's pieces per thread: enough that the others can take over a descheduled thread's
// share, few enough that claiming them (one atomic exchange each) stays negligible.
constexpr int kPiecesPerThread = 4;

// Frees a pool's state when the job that took it ends, by return or by exception.
struct FreeOnExit {
  std::atomic<int>& state;
  ~FreeOnExit() { state.store(0 /* ThreadPool::kFree */, std::memory_order_release); }
};

inline void CpuRelax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

// Read once: std::thread::hardware_concurrency reads /sys at every call, and a process start asks
// for it a dozen times (each command's thread options).
int HardwareThreads() {
  static const int n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return n;
}

}  // namespace

int PoolThreadCount(int n_threads) { return n_threads <= 0 ? HardwareThreads() : n_threads; }

int MaxThreads() { return 4 * HardwareThreads(); }

void CheckThreadCount(int n_threads, std::string_view what) {
  if (n_threads < 0 || n_threads > MaxThreads()) {
    Fail(what, " ", n_threads, " is outside 0..", MaxThreads(),
         " (0: all hardware threads; at most 4 x the ", HardwareThreads(), " hardware threads)");
  }
}

ThreadPool::ThreadPool(int n_threads) {
  CheckThreadCount(std::max(n_threads, 0), "thread pool: thread count");
  n_threads_ = PoolThreadCount(n_threads);
  workers_.reserve(n_threads_ - 1);
  try {
    for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
  } catch (const std::system_error& e) {
    // A std::thread destroyed while joinable ends the process: stop and join the started ones.
    const std::size_t started = workers_.size();
    StopWorkers();
    Fail("thread pool: the system refused thread ", started + 2, " of ", n_threads_, " (", e.what(),
         "); use fewer threads (-t)");
  }
}

void ThreadPool::StopWorkers() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
  workers_.clear();
}

ThreadPool::ThreadPool(std::shared_ptr<ThreadPool> lender)
    : n_threads_(lender->size()), lender_(std::move(lender)) {}

ThreadPool::~ThreadPool() { StopWorkers(); }

void ThreadPool::WorkerLoop(int index) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t gen = generation_.load(std::memory_order_acquire);
    // Until its first job a worker waits parked, not spinning: a pool is made while its model
    // loads, and a spinning worker took a core from whatever loaded beside it (a draft model).
    const int spins = seen == 0 ? 0 : kSpinIterations + kYieldIterations;
    for (int spin = 0; gen == seen && spin < spins; ++spin) {
      if (spin < kSpinIterations) {
        CpuRelax();
      } else {
        std::this_thread::yield();
      }
      gen = generation_.load(std::memory_order_acquire);
    }
    if (gen == seen) {
      std::unique_lock<std::mutex> lock(mutex_);
      parked_.fetch_add(1, std::memory_order_relaxed);
      wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      parked_.fetch_sub(1, std::memory_order_relaxed);
      gen = generation_.load(std::memory_order_acquire);
    }
    seen = gen;
    if (stop_.load(std::memory_order_acquire)) return;
    if (gen & 1) {
      ClaimPieces(static_cast<uint32_t>(gen >> 1), index);
      continue;
    }
    (*job_)(index, n_threads_);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::Run(FunctionRef<void(int, int)> fn) {
  if (lender_) {
    ++dispatch_count_;
    if (!borrowing_.load(std::memory_order_relaxed) || !lender_->RunLent(fn)) fn(0, 1);
    return;
  }
  Acquire();
  ++dispatch_count_;
  Dispatch(fn);
}

void ThreadPool::Acquire() {
  // A second caller (another thread, or a job that dispatches from inside itself) would overwrite
  // the job under way; fail loudly instead. A borrower's job is waited out.
  for (int spin = 0;; ++spin) {
    int state = kFree;
    if (state_.compare_exchange_weak(state, kOwned, std::memory_order_acquire)) break;
    GROVE_CHECK(state != kOwned,
                "thread pool: Run while another job is under way (one caller at a time)");
    if (spin < kSpinIterations) {
      CpuRelax();
    } else {
      std::this_thread::yield();
    }
  }
}

bool ThreadPool::RunLent(FunctionRef<void(int, int)> fn) {
  int state = kFree;
  if (!state_.compare_exchange_strong(state, kLent, std::memory_order_acquire)) return false;
  ++dispatch_count_;
  Dispatch(fn);
  return true;
}

void ThreadPool::Dispatch(FunctionRef<void(int, int)> fn) {
  const FreeOnExit done{state_};
  if (n_threads_ == 1) {
    fn(0, 1);
    return;
  }
  job_ = &fn;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  Publish(/*pieces=*/false);
  fn(0, n_threads_);
  for (int spin = 0; pending_.load(std::memory_order_acquire) != 0; ++spin) {
    if (spin < kSpinIterations) {
      CpuRelax();
    } else {
      std::this_thread::yield();
    }
  }
  job_ = nullptr;
}

uint32_t ThreadPool::Publish(bool pieces) {
  uint64_t next = 0;
  {
    // Publishing under the mutex pairs with the parked workers' predicate check, so none misses a
    // wake-up; spinning workers see the new generation without it.
    std::lock_guard<std::mutex> lock(mutex_);
    next = ((generation_.load(std::memory_order_relaxed) >> 1) + 1) << 1 | (pieces ? 1 : 0);
    if (pieces) {
      finished_.store(0, std::memory_order_relaxed);
      claim_.store((next >> 1) << 32 | static_cast<uint64_t>(range_pieces_),
                   std::memory_order_release);
    }
    generation_.store(next, std::memory_order_release);
  }
  if (parked_.load(std::memory_order_relaxed) > 0) wake_.notify_all();
  return static_cast<uint32_t>(next >> 1);
}

void ThreadPool::ClaimPieces(uint32_t seq, int thread) {
  uint64_t word = claim_.load(std::memory_order_acquire);
  for (;;) {
    const uint64_t left = word & 0xffffffffu;
    if (static_cast<uint32_t>(word >> 32) != seq || left == 0) return;
    if (!claim_.compare_exchange_weak(word, word - 1, std::memory_order_acq_rel,
                                      std::memory_order_acquire)) {
      continue;
    }
    // The piece is ours, so its job waits for it: its function and bounds are still there.
    const int64_t piece = range_pieces_ - static_cast<int64_t>(left);
    (*range_fn_)(range_n_ * piece / range_pieces_, range_n_ * (piece + 1) / range_pieces_, thread);
    finished_.fetch_add(1, std::memory_order_acq_rel);
    word = claim_.load(std::memory_order_acquire);
  }
}

void ThreadPool::ParallelFor(int64_t n, FunctionRef<void(int64_t, int64_t)> fn) {
  ParallelForWithThread(n, [&](int64_t begin, int64_t end, int) { fn(begin, end); });
}

void ThreadPool::ParallelForWithThread(int64_t n, FunctionRef<void(int64_t, int64_t, int)> fn) {
  if (n <= 0) return;
  if (lender_ || n_threads_ == 1) {
    // A borrower's jobs go through Run (they may run on the lender's workers or here alone).
    auto body = [&](int thread, int n_threads) {
      int64_t begin = n * thread / n_threads;
      int64_t end = n * (thread + 1) / n_threads;
      if (begin < end) fn(begin, end, thread);
    };
    Run(body);
    return;
  }
  // Pieces claimed by whichever thread is free, and a job that ends when its pieces are done, not
  // when every worker has been through it: with a barrier on every worker, a worker the system
  // had descheduled (more runnable threads than cores) held up every op until it ran again; two
  // threads on two cores beside one busy process ran 4x slower than one thread.
  Acquire();
  const FreeOnExit done{state_};
  ++dispatch_count_;
  range_fn_ = &fn;
  range_n_ = n;
  range_pieces_ = std::min<int64_t>(n, int64_t{kPiecesPerThread} * n_threads_);
  const uint32_t seq = Publish(/*pieces=*/true);
  ClaimPieces(seq, 0);
  for (int spin = 0; finished_.load(std::memory_order_acquire) != range_pieces_; ++spin) {
    if (spin < kSpinIterations) {
      CpuRelax();
    } else {
      std::this_thread::yield();
    }
  }
}

}  // namespace grove
