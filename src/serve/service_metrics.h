// The server's counters, for GET /metrics in Prometheus' text format: requests (served, refused
// with 503, failed), prompt and generated tokens, the generation rate over the last ten seconds,
// tau and acceptance by depth over finished speculative sequences, the queue, the sequences in
// flight, the share of time the target was busy, its forwards and the sequence steps they verified,
// and where the verifying thread's time went (waiting for drafts, forwards, the rest). Updated from
// the HTTP threads and the scheduler's thread; every method is thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "schedule/scheduler.h"
#include "speculate/session.h"

namespace grove::serve {

class ServiceMetrics {
 public:
  ServiceMetrics();

  void RequestServed(int64_t prompt_tokens, int32_t sequences);
  void RequestRefused();  // 503: the queue was full
  void RequestFailed();   // 4xx/5xx other than 503
  void DrafterSwapped();  // CompletionService::SwapDrafter
  // A sequence finished (or was cancelled): its tokens and, if it speculated, its statistics.
  void SequenceFinished(int64_t tokens, const SpeculationStats& speculation);
  // The scheduler's statistics so far (read on its thread): target busy time, forwards, steps,
  // and where its rounds' time went.
  void SchedulerProgress(const ScheduleStats& stats);

  // queue_length: sequences waiting for a slot now.
  std::string Text(int32_t queue_length) const;

 private:
  using Clock = std::chrono::steady_clock;
  double RecentTokensPerSecond(Clock::time_point now) const;
  // The parts of Text, under mutex_: requests and tokens, speculation, the scheduler's rounds.
  void AppendRequests(std::string& out, Clock::time_point now) const;
  void AppendSpeculation(std::string& out) const;
  void AppendScheduler(std::string& out, int32_t queue_length, double uptime) const;

  mutable std::mutex mutex_;
  Clock::time_point start_;
  int64_t requests_ = 0, refused_ = 0, failed_ = 0, drafter_swaps_ = 0;
  int64_t prompt_tokens_ = 0, generated_ = 0;
  int64_t sequences_started_ = 0, sequences_finished_ = 0;
  int64_t steps_ = 0, speculative_tokens_ = 0;  // of speculative sequences: tau
  std::vector<int64_t> accepted_at_depth_, reached_depth_;
  ScheduleStats scheduler_;
  mutable std::deque<std::pair<Clock::time_point, int64_t>> recent_;  // (finish time, tokens)
};

}  // namespace grove::serve
