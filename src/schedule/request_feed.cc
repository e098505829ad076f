#include "schedule/request_feed.h"

#include <utility>

#include "base/error.h"

namespace grove {

RequestFeed::RequestFeed(int32_t max_waiting) : max_waiting_(max_waiting) {
  if (max_waiting < 1) Fail("request feed: max_waiting ", max_waiting, " must be at least 1");
}

RequestFeed::Submitted RequestFeed::Submit(SequenceRequest request, DoneFn on_done) {
  std::vector<SequenceRequest> requests;
  requests.push_back(std::move(request));
  std::vector<DoneFn> done;
  done.push_back(std::move(on_done));
  return SubmitAll(std::move(requests), std::move(done));
}

RequestFeed::Submitted RequestFeed::SubmitAll(std::vector<SequenceRequest> requests,
                                              std::vector<DoneFn> on_done) {
  GROVE_CHECK(requests.size() == on_done.size(), "request feed: ", requests.size(),
              " requests but ", on_done.size(), " callbacks");
  for (const SequenceRequest& request : requests) {
    if (request.prompt.empty()) Fail("request has an empty prompt: give at least one token");
    if (request.n_predict < 0) Fail("request asks for ", request.n_predict, " tokens: 0 or more");
    if (request.shares_prompt_with != -1) Fail("requests of a feed cannot share prompts");
  }
  {
    std::lock_guard lock(mutex_);
    if (closed_) return Submitted::kClosed;
    if (waiting_.size() + requests.size() > static_cast<std::size_t>(max_waiting_)) {
      return Submitted::kFull;
    }
    for (std::size_t i = 0; i < requests.size(); ++i) {
      waiting_.push_back({std::move(requests[i]), std::move(on_done[i])});
    }
  }
  arrived_.notify_one();
  return Submitted::kQueued;
}

void RequestFeed::Close() {
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
  }
  arrived_.notify_all();
}

int32_t RequestFeed::waiting() const {
  std::lock_guard lock(mutex_);
  return static_cast<int32_t>(waiting_.size());
}

bool RequestFeed::Take(Entry* out, bool wait, bool* closed) {
  std::unique_lock lock(mutex_);
  if (wait) arrived_.wait(lock, [&] { return closed_ || !waiting_.empty(); });
  *closed = closed_ && waiting_.empty();
  if (waiting_.empty()) return false;
  *out = std::move(waiting_.front());
  waiting_.pop_front();
  return true;
}

void RequestFeed::PutBack(Entry entry) {
  std::lock_guard lock(mutex_);
  waiting_.push_front(std::move(entry));
}

}  // namespace grove
