// The live tree view's feed: each speculative step of one completion as a JSON event, fanned out
// to everyone watching it (GET /v1/steps?id=...). Steps are formatted only while someone watches,
// so an unwatched request pays one atomic load per step. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace grove::serve {

class StepChannel : public std::enable_shared_from_this<StepChannel> {
 public:
  // One watcher's queue of events; drained by its HTTP handler.
  class Subscription {
   public:
    explicit Subscription(std::shared_ptr<StepChannel> channel) : channel_(std::move(channel)) {}
    ~Subscription() { --channel_->watchers_; }
    // The next event, waiting up to `timeout`; false when none came (then closed() says whether
    // one ever will).
    bool Next(std::string* out, std::chrono::milliseconds timeout);
    bool closed() const;

   private:
    friend class StepChannel;
    std::shared_ptr<StepChannel> channel_;  // outlived by nothing that counts on it
    mutable std::mutex mutex_;
    std::condition_variable ready_;
    std::deque<std::string> events_;
    bool closed_ = false;
  };

  bool watched() const { return watchers_.load(std::memory_order_relaxed) > 0; }
  // The channel must be owned by a shared_ptr (the subscription keeps it alive).
  std::shared_ptr<Subscription> Subscribe();
  void Publish(const std::string& event);
  // The completion is done: every watcher's stream ends after what it already has.
  void Close();

 private:
  // A watcher keeps at most this many events unread; a slower one loses the oldest.
  static constexpr std::size_t kMaxQueued = 256;

  std::atomic<int> watchers_{0};
  std::mutex mutex_;
  std::vector<std::weak_ptr<Subscription>> subscribers_;
  bool closed_ = false;
};

}  // namespace grove::serve
