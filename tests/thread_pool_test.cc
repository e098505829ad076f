#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "base/thread_pool.h"

namespace grove {
namespace {

TEST(ThreadPool, ParallelForCoversEveryIndexOnce) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 2, 7, 1000}) {
      std::vector<std::atomic<int>> hits(n);
      pool.ParallelFor(n, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) hits[i]++;
      });
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(hits[i].load(), 1) << "threads " << threads << " n " << n;
    }
  }
}

// Every range is computed by a thread that says which it is, one range at a time: what a range's
// scratch memory of that thread's own relies on. Borrowers and one-thread pools included.
TEST(ThreadPool, ParallelForWithThreadNamesAThreadBusyWithNothingElse) {
  auto lender = std::make_shared<ThreadPool>(3);
  ThreadPool borrower(lender);
  borrower.set_borrowing(true);
  ThreadPool one(1);
  for (ThreadPool* pool : {lender.get(), &borrower, &one}) {
    std::vector<std::atomic<bool>> busy(static_cast<std::size_t>(pool->size()));
    std::vector<std::atomic<int>> hits(5000);
    std::atomic<int> overlaps{0}, out_of_range{0};
    for (int rep = 0; rep < 20; ++rep) {
      pool->ParallelForWithThread(static_cast<int64_t>(hits.size()),
                                  [&](int64_t begin, int64_t end, int thread) {
                                    if (thread < 0 || thread >= pool->size()) {
                                      ++out_of_range;
                                      return;
                                    }
                                    if (busy[thread].exchange(true)) ++overlaps;
                                    for (int64_t i = begin; i < end; ++i) hits[i]++;
                                    busy[thread].store(false);
                                  });
    }
    EXPECT_EQ(out_of_range.load(), 0) << pool->size();
    EXPECT_EQ(overlaps.load(), 0) << pool->size();
    for (const std::atomic<int>& h : hits) ASSERT_EQ(h.load(), 20) << pool->size();
  }
}

// A thread held up inside its first range (descheduled, in life) leaves the rest of the loop to
// the others: with one range per thread, the caller would wait for the held-up thread's half.
TEST(ThreadPool, AHeldUpThreadLeavesTheRestOfTheLoopToTheOthers) {
  ThreadPool pool(2);
  constexpr int64_t kN = 1000;
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<int64_t> by_caller{0};
  std::atomic<bool> held{false};
  pool.ParallelFor(kN, [&](int64_t begin, int64_t end) {
    if (std::this_thread::get_id() == caller) {
      by_caller += end - begin;
    } else if (!held.exchange(true)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  EXPECT_GE(by_caller.load(), kN * 3 / 4);
}

// Loops that end when their pieces are done, whoever did them, run back to back with jobs every
// thread takes part in: no index is computed twice or missed, and no late worker computes a piece
// of a loop that has ended (each loop's counts are checked after it returns and again at the end).
TEST(ThreadPool, LoopsAndJobsBackToBackCoverEveryIndexOnce) {
  for (int threads : {2, 3, 4}) {
    ThreadPool pool(threads);
    constexpr int kLoops = 2000;
    std::vector<std::vector<std::atomic<int>>> hits(kLoops);
    for (int loop = 0; loop < kLoops; ++loop) {
      const int64_t n = 1 + loop % 37;
      hits[loop] = std::vector<std::atomic<int>>(n);
      pool.ParallelFor(n, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) hits[loop][i]++;
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[loop][i].load(), 1) << loop << " " << i;
      if (loop % 7 == 0) {
        std::atomic<int> ran{0};
        pool.Run([&](int, int) { ++ran; });
        ASSERT_EQ(ran.load(), threads);
      }
    }
    for (int loop = 0; loop < kLoops; ++loop) {
      for (const std::atomic<int>& h : hits[loop]) ASSERT_EQ(h.load(), 1) << "threads " << threads;
    }
  }
}

TEST(ThreadPool, RunGivesEachThreadItsIndex) {
  ThreadPool pool(3);
  EXPECT_EQ(pool.size(), 3);
  std::vector<std::atomic<int>> seen(3);
  for (int round = 0; round < 1000; ++round) {
    pool.Run([&](int thread, int n) {
      ASSERT_EQ(n, 3);
      seen[thread]++;
    });
  }
  for (auto& s : seen) EXPECT_EQ(s.load(), 1000);
  EXPECT_EQ(pool.dispatch_count(), 1000u);
}

TEST(ThreadPool, WakesParkedWorkers) {
  ThreadPool pool(2);
  std::atomic<int> total{0};
  for (int round = 0; round < 3; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));  // long enough for workers to park
    pool.Run([&](int, int) { total++; });
  }
  EXPECT_EQ(total.load(), 6);
}

// A borrowing pool computes on its lender's workers while borrowing is on and the lender is free,
// on the calling thread alone otherwise; the lender's own caller waits out a borrowed job.
TEST(ThreadPool, ABorrowerComputesOnTheLendersWorkersWhenItIsFree) {
  auto lender = std::make_shared<ThreadPool>(3);
  ThreadPool borrower(lender);
  EXPECT_EQ(borrower.size(), 3);
  auto threads_of = [&] {
    std::atomic<int> calls{0}, widest{0};
    borrower.Run([&](int, int n) {
      calls++;
      widest = n;
    });
    return std::pair(calls.load(), widest.load());
  };
  EXPECT_EQ(threads_of(), std::pair(1, 1));  // off at first: fn(0, 1) here
  borrower.set_borrowing(true);
  EXPECT_EQ(threads_of(), std::pair(3, 3));
  EXPECT_EQ(lender->dispatch_count(), 1u);
  EXPECT_EQ(borrower.dispatch_count(), 2u);
  // While the lender runs a job of its own, a borrowed one runs on the borrower's thread alone.
  std::atomic<bool> in_job{false}, release{false};
  std::thread owner([&] {
    lender->Run([&](int thread, int) {
      if (thread != 0) return;
      in_job = true;
      while (!release) std::this_thread::yield();
    });
  });
  while (!in_job) std::this_thread::yield();
  EXPECT_EQ(threads_of(), std::pair(1, 1));
  release = true;
  owner.join();
  // A lender's caller that finds a borrowed job under way waits for it instead of failing.
  std::atomic<bool> borrowed{false}, done{false};
  std::thread guest([&] {
    borrower.Run([&](int thread, int) {
      if (thread != 0) return;
      borrowed = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      done = true;
    });
  });
  while (!borrowed) std::this_thread::yield();
  bool saw_done = false;
  lender->Run([&](int thread, int) {
    if (thread == 0) saw_done = done.load();
  });
  guest.join();
  EXPECT_TRUE(saw_done);
}

}  // namespace
}  // namespace grove
