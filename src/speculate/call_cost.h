// What one call of a drafter costs, as the mixture prices it (cheap or dear, a cheap level's
// seconds): a moving average that a few slow calls do not throw off.
//
// A call's measured time includes whatever else the machine did meanwhile. The first calls of a
// member run cold (its buffers faulted in, its code and tables not yet in cache: a draft model's
// first Expand took 305 us where the next ones took 125-170, a suffix lookup's 14 us against 1-3),
// and a call the scheduler preempts takes a time slice more. Seeded with such a call, or hit by
// one, a plain moving average of weight 0.1 kept a 2 us member priced above a tenth of a 130 us
// one for a dozen calls: no step in that while could draft with it alone or grow a tail. So the
// average starts from the least of the first kWarmUpCalls calls, and later a call counts as at
// most kMaxJump times the average: a real rise in cost still shows within a few calls (the
// average can grow by 0.3 of itself per call), a single preempted call barely does.
#pragma once

#include <algorithm>
#include <cstdint>

namespace grove {

class CallCost {
 public:
  static constexpr int64_t kWarmUpCalls = 4;
  static constexpr double kWeight = 0.1;
  static constexpr double kMaxJump = 4.0;

  void Add(double seconds) {
    ++calls_;
    if (calls_ == 1) {
      seconds_ = seconds;
    } else if (calls_ <= kWarmUpCalls) {
      seconds_ = std::min(seconds_, seconds);
    } else {
      seconds_ += kWeight * (std::min(seconds, kMaxJump * seconds_) - seconds_);
    }
  }
  // 0 before the first call.
  double seconds() const { return seconds_; }
  int64_t calls() const { return calls_; }

 private:
  double seconds_ = 0.0;
  int64_t calls_ = 0;
};

}  // namespace grove
