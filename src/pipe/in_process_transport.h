// The pipeline's ranks as threads of one process (pipe_transport.h): each rank a mailbox, a
// message moved into the receiver's mailbox. What the tests and the virtual-clock simulator run
// on; a rank whose thread throws makes every other rank's receive fail at once, and a rank that
// waits longer than the timeout fails on its own.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "pipe/pipe_transport.h"

namespace grove {

class InProcessNetwork {
 public:
  InProcessNetwork(int32_t n_ranks, std::chrono::milliseconds timeout);
  ~InProcessNetwork();
  InProcessNetwork(const InProcessNetwork&) = delete;
  InProcessNetwork& operator=(const InProcessNetwork&) = delete;

  int32_t size() const { return static_cast<int32_t>(ranks_.size()); }
  PipeTransport& transport(int32_t rank);
  // Rank `rank` failed (`why`): every receive under way or to come throws PipeTransportError
  // naming it. The first failure is the one kept.
  void Fail(int32_t rank, const std::string& why);

 private:
  class Rank;
  friend class Rank;
  std::mutex mutex_;  // the mailboxes and the failure
  // One per rank, so that a message wakes its receiver only (a wake-up of every waiting rank per
  // message costs a context switch each on a small host).
  std::vector<std::condition_variable> arrived_;
  std::chrono::milliseconds timeout_;  // of every rank (set_timeout sets it for all)
  std::string failure_;                // empty while every rank is well
  std::vector<std::unique_ptr<Rank>> ranks_;
  // (receiver, sender, tag) -> messages in the order sent
  std::map<std::tuple<int32_t, int32_t, int32_t>, std::deque<PipeMessage>> mail_;
};

// Runs body(transport of rank r) for every rank of a network of n_ranks, each on its own thread,
// and returns their results in rank order. When one throws, the others' receives fail at once; the
// first error thrown (the cause, not the receives it broke) is rethrown after every thread ended.
template <typename Result>
std::vector<Result> RunRanksInProcess(int32_t n_ranks, std::chrono::milliseconds timeout,
                                      const std::function<Result(PipeTransport&)>& body);

// Implementation detail of RunRanksInProcess: runs body(r) on n threads, failing `network` when
// one throws; rethrows the first error.
void RunThreadsFailingTogether(InProcessNetwork& network,
                               const std::function<void(int32_t rank)>& body);

template <typename Result>
std::vector<Result> RunRanksInProcess(int32_t n_ranks, std::chrono::milliseconds timeout,
                                      const std::function<Result(PipeTransport&)>& body) {
  InProcessNetwork network(n_ranks, timeout);
  std::vector<Result> results(static_cast<std::size_t>(n_ranks));
  RunThreadsFailingTogether(network, [&](int32_t r) {
    results[static_cast<std::size_t>(r)] = body(network.transport(r));
  });
  return results;
}

}  // namespace grove
