#include "speculate/call_cost.h"

#include <gtest/gtest.h>

namespace grove {
namespace {

TEST(CallCost, StartsFromTheLeastOfTheFirstCalls) {
  CallCost cost;
  EXPECT_EQ(cost.seconds(), 0.0);
  cost.Add(300e-6);  // cold
  EXPECT_DOUBLE_EQ(cost.seconds(), 300e-6);
  cost.Add(140e-6);
  cost.Add(160e-6);
  cost.Add(130e-6);
  EXPECT_DOUBLE_EQ(cost.seconds(), 130e-6);
  EXPECT_EQ(cost.calls(), CallCost::kWarmUpCalls);
}

TEST(CallCost, OnePreemptedCallMovesItLittle) {
  CallCost cost;
  for (int i = 0; i < 10; ++i) cost.Add(2e-6);
  cost.Add(5e-3);  // a time slice of another process
  // Counted as kMaxJump times the average: up by kWeight * (kMaxJump - 1), not to 0.5 ms.
  EXPECT_NEAR(cost.seconds(), 2e-6 * (1.0 + CallCost::kWeight * (CallCost::kMaxJump - 1.0)), 1e-12);
  // Ten calls on, within 11% (a plain moving average would still be at 19 us).
  for (int i = 0; i < 10; ++i) cost.Add(2e-6);
  EXPECT_LT(cost.seconds(), 2.22e-6);
}

TEST(CallCost, FollowsARealRiseWithinAFewCalls) {
  CallCost cost;
  for (int i = 0; i < 10; ++i) cost.Add(10e-6);
  int calls = 0;
  while (cost.seconds() < 90e-6) {
    cost.Add(100e-6);
    ASSERT_LT(++calls, 40) << cost.seconds();
  }
  EXPECT_LE(calls, 30);
  for (int i = 0; i < 40; ++i) cost.Add(100e-6);
  EXPECT_NEAR(cost.seconds(), 100e-6, 1e-6);
  // And a fall at once to the new level's pace (no clip downwards).
  for (int i = 0; i < 40; ++i) cost.Add(10e-6);
  EXPECT_NEAR(cost.seconds(), 10e-6, 2e-6);
}

}  // namespace
}  // namespace grove
