#include "serve/step_channel.h"

#include <algorithm>

namespace grove::serve {

bool StepChannel::Subscription::Next(std::string* out, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (!ready_.wait_for(lock, timeout, [&] { return closed_ || !events_.empty(); })) return false;
  if (events_.empty()) return false;
  *out = std::move(events_.front());
  events_.pop_front();
  return true;
}

bool StepChannel::Subscription::closed() const {
  std::lock_guard lock(mutex_);
  return closed_ && events_.empty();
}

std::shared_ptr<StepChannel::Subscription> StepChannel::Subscribe() {
  auto subscription = std::make_shared<Subscription>(shared_from_this());
  ++watchers_;
  std::lock_guard lock(mutex_);
  if (closed_) {
    subscription->closed_ = true;
  } else {
    subscribers_.push_back(subscription);
  }
  return subscription;
}

void StepChannel::Publish(const std::string& event) {
  std::lock_guard lock(mutex_);
  std::erase_if(subscribers_, [](const auto& weak) { return weak.expired(); });
  for (const auto& weak : subscribers_) {
    if (auto s = weak.lock()) {
      {
        std::lock_guard inner(s->mutex_);
        if (s->events_.size() >= kMaxQueued) s->events_.pop_front();
        s->events_.push_back(event);
      }
      s->ready_.notify_all();
    }
  }
}

void StepChannel::Close() {
  std::lock_guard lock(mutex_);
  closed_ = true;
  for (const auto& weak : subscribers_) {
    if (auto s = weak.lock()) {
      {
        std::lock_guard inner(s->mutex_);
        s->closed_ = true;
      }
      s->ready_.notify_all();
    }
  }
  subscribers_.clear();
}

}  // namespace grove::serve
