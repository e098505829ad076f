// What the scheduler's files share (scheduler.cc: requests, slots and sequences;
// scheduler_serial.cc: the serial policies; scheduler_rounds.cc: seed's and batched rounds): a
// sequence in flight, where requests come from, and a step's delivery.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <thread>

#include "base/error.h"
#include "schedule/scheduler.h"

namespace grove {

// One sequence in flight: its drafter (in a draft forward context of its own), its session, and
// where its request stands.
struct Scheduler::Lane {
  std::unique_ptr<Model> draft;  // null for drafters without a model
  std::unique_ptr<Drafter> drafter;
  int64_t draft_generation = -1;  // of the source its drafter was made of (Scheduler)
  std::unique_ptr<SpeculativeSession> session;
  int64_t request = -1;         // -1: free
  bool scheduler_tree = false;  // its session uses the scheduler's (auto) tree
  // Its session's verify curve: the forwards served until it was admitted (ServedCurve).
  std::optional<VerifyCostCurve> verify_cost;
  std::chrono::steady_clock::time_point enqueued;
  std::thread thread;  // seed, batched
};

// Where requests come from: a list given to Run, or a feed that clients fill while Serve runs.
// Ids are the list's indices, or the feed's arrival count.
class Scheduler::Source {
 public:
  static constexpr int64_t kNone = -1;    // none waiting now
  static constexpr int64_t kClosed = -2;  // none will come

  virtual ~Source() = default;
  // The next request to admit; with wait, blocks until one arrives or none will.
  virtual int64_t Next(bool wait) = 0;
  virtual const SequenceRequest& request(int64_t id) = 0;
  virtual SequenceResult& result(int64_t id) = 0;
  // The result is final.
  virtual void Done(int64_t id) = 0;
  // A request that cannot start: false to make it the whole run's failure (Run), true when the
  // source made it the request's result and the others go on (Serve).
  virtual bool TakeFailure(int64_t id, const Error& error) = 0;
  // Most sequences that may be in flight at once.
  virtual std::size_t max_lanes(std::size_t n_slots) const = 0;
};

// Appends a step's accepted tokens to the result and streams them; false: the consumer cancelled.
bool DeliverStep(const SequenceRequest& request, const SpeculativeSession& session,
                 std::span<const int32_t> accepted, SequenceResult& result);

}  // namespace grove
