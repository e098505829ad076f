#include "schedule/draft_rounds.h"

namespace grove {

DraftRounds::DraftRounds(std::size_t n_lanes)
    : lane_cvs_(n_lanes), gamma_(n_lanes, 0), enqueued_(n_lanes) {}

bool DraftRounds::WaitToDraft(std::size_t l) {
  std::unique_lock lock(mutex_);
  lane_cvs_[l].wait(lock, [&] { return stopping_ || gamma_[l] != 0; });
  if (stopping_) return false;
  gamma_[l] = 0;
  return true;
}

void DraftRounds::Drafted(std::size_t l) {
  {
    std::lock_guard lock(mutex_);
    enqueued_[l] = Clock::now();
    ready_.push_back(l);
    --drafting_;
  }
  verifier_cv_.notify_one();
}

void DraftRounds::Failed(std::exception_ptr error) {
  {
    std::lock_guard lock(mutex_);
    if (!error_) error_ = error;
  }
  verifier_cv_.notify_one();
}

void DraftRounds::AllowDraft(std::size_t l) {
  {
    std::lock_guard lock(mutex_);
    gamma_[l] = 1;
    ++drafting_;
  }
  lane_cvs_[l].notify_one();
}

void DraftRounds::TakeReady(std::vector<std::size_t>& taken, std::optional<Clock::duration> gather,
                            const std::function<bool(std::size_t)>& take_more) {
  std::unique_lock lock(mutex_);
  verifier_cv_.wait(lock, [&] { return error_ || !ready_.empty(); });
  if (gather && !error_ && drafting_ > 0) {
    verifier_cv_.wait_until(lock, Clock::now() + *gather, [&] { return error_ || drafting_ == 0; });
  }
  if (error_) std::rethrow_exception(error_);
  taken.clear();
  do {
    taken.push_back(ready_.front());
    ready_.pop_front();
  } while (!ready_.empty() && take_more(ready_.front()));
}

void DraftRounds::Stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  for (std::condition_variable& cv : lane_cvs_) cv.notify_all();
}

}  // namespace grove
