// The handoffs of SEED's rounds (Algorithm 2) and their batched variant, between the thread that
// verifies and one drafting thread per lane. gamma[l] (the paper's draft label map) lets lane l
// draft once; a finished draft enters a first-come-first-served queue and its lane waits until
// the verifier allows it again. Served in the order drafts finished, no sequence waits behind
// drafts that finished after its own (last-in-first-out left tokens unchanged but made one
// sequence wait 4-5x as long per draft as another).
//
// Every handoff goes through one mutex, so a lane's session is touched by one thread at a time.
// Each lane sleeps on a condition variable of its own: permission to draft wakes that lane's
// thread alone (a shared one woke every lane's thread per permission: 256 wake-ups a round at 16
// lanes).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

namespace grove {

class DraftRounds {
 public:
  using Clock = std::chrono::steady_clock;

  explicit DraftRounds(std::size_t n_lanes);

  // Lane side: waits for permission to draft; false when stopping.
  bool WaitToDraft(std::size_t l);
  // Lane l's draft is finished: it joins the queue's tail (and enqueued(l) is now).
  void Drafted(std::size_t l);
  // A lane's drafting threw: the verifier rethrows it (the first one) from TakeReady.
  void Failed(std::exception_ptr error);

  // Verifier side: lets lane l draft (once).
  void AllowDraft(std::size_t l);
  // Waits for at least one finished draft; with `gather`, then also for the drafts under way, for
  // at most that long (a straggler joins the next round). Takes the queue's head into `taken`, and
  // the drafts behind it, in order, while `take_more` accepts them. Rethrows a lane's exception.
  void TakeReady(std::vector<std::size_t>& taken, std::optional<Clock::duration> gather,
                 const std::function<bool(std::size_t)>& take_more);
  // When lane l's last draft joined the queue (read after TakeReady took it).
  Clock::time_point enqueued(std::size_t l) const { return enqueued_[l]; }
  // Every lane's WaitToDraft returns false from now on.
  void Stop();

 private:
  std::mutex mutex_;
  std::vector<std::condition_variable> lane_cvs_;
  std::condition_variable verifier_cv_;
  std::vector<uint8_t> gamma_;
  std::vector<Clock::time_point> enqueued_;
  std::deque<std::size_t> ready_;
  int64_t drafting_ = 0;  // lanes allowed to draft whose draft has not arrived
  bool stopping_ = false;
  std::exception_ptr error_;
};

}  // namespace grove
