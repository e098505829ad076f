#include <gtest/gtest.h>

#include <atomic>
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

}  // namespace
}  // namespace grove
