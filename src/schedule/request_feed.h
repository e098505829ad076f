// Requests that arrive while a scheduler runs: a server's clients submit from their own threads,
// and Scheduler::Serve admits them as KV slots free, in arrival order. Thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <vector>

#include "schedule/scheduler.h"

namespace grove {

class RequestFeed {
 public:
  // A finished request's result (tokens, cancelled, error), handed over on the scheduler's thread.
  using DoneFn = std::function<void(SequenceResult&&)>;

  // max_waiting: most requests queued and not yet admitted; Submit refuses more (a server answers
  // 503). At least 1.
  explicit RequestFeed(int32_t max_waiting);

  enum class Submitted { kQueued, kFull, kClosed };
  // Queues a request; on_done gets its result when it finishes, is cancelled (its on_tokens
  // returned false) or fails (result.error: a prompt the context cannot hold). Throws grove::Error
  // on a malformed request (an empty prompt, n_predict < 0, shares_prompt_with set: requests of a
  // feed are independent).
  Submitted Submit(SequenceRequest request, DoneFn on_done);
  // Several requests, all queued or none (a request's n choices).
  Submitted SubmitAll(std::vector<SequenceRequest> requests, std::vector<DoneFn> on_done);
  // No more requests: Serve returns once the queued and running ones are done.
  void Close();
  int32_t waiting() const;
  int32_t max_waiting() const { return max_waiting_; }

 private:
  friend class Scheduler;
  struct Entry {
    SequenceRequest request;
    DoneFn on_done;
  };
  // The scheduler's side: the oldest waiting entry, moved into *out; with wait, blocks until one
  // arrives or the feed closes. False when none is waiting (*closed: and none will come).
  bool Take(Entry* out, bool wait, bool* closed);
  // Puts a taken entry back at the head of the queue (it is admitted first).
  void PutBack(Entry entry);

  const int32_t max_waiting_;
  mutable std::mutex mutex_;
  std::condition_variable arrived_;
  std::deque<Entry> waiting_;
  bool closed_ = false;
};

}  // namespace grove
