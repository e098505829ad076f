#include "serve/service_metrics.h"

#include <algorithm>
#include <cstdio>

namespace grove::serve {
namespace {

constexpr double kRecentSeconds = 10.0;

void Line(std::string& out, const char* name, const char* type, const char* help, double value) {
  char text[512];
  std::snprintf(text, sizeof(text), "# HELP %s %s\n# TYPE %s %s\n%s %.6g\n", name, help, name, type,
                name, value);
  out += text;
}

}  // namespace

ServiceMetrics::ServiceMetrics() : start_(Clock::now()) {}

void ServiceMetrics::RequestServed(int64_t prompt_tokens, int32_t sequences) {
  std::lock_guard lock(mutex_);
  ++requests_;
  prompt_tokens_ += prompt_tokens;
  sequences_started_ += sequences;
}

void ServiceMetrics::RequestRefused() {
  std::lock_guard lock(mutex_);
  ++refused_;
}

void ServiceMetrics::RequestFailed() {
  std::lock_guard lock(mutex_);
  ++failed_;
}

void ServiceMetrics::DrafterSwapped() {
  std::lock_guard lock(mutex_);
  ++drafter_swaps_;
}

void ServiceMetrics::SequenceFinished(int64_t tokens, const SpeculationStats& speculation) {
  std::lock_guard lock(mutex_);
  ++sequences_finished_;
  generated_ += tokens;
  recent_.emplace_back(Clock::now(), tokens);
  if (speculation.steps > speculation.plain_steps) {
    steps_ += speculation.steps;
    speculative_tokens_ += speculation.generated;
  }
  const std::size_t depths = speculation.reached_depth.size();
  if (accepted_at_depth_.size() < depths) {
    accepted_at_depth_.resize(depths, 0);
    reached_depth_.resize(depths, 0);
  }
  for (std::size_t d = 0; d < depths; ++d) {
    reached_depth_[d] += speculation.reached_depth[d];
    if (d < speculation.accepted_at_depth.size()) {
      accepted_at_depth_[d] += speculation.accepted_at_depth[d];
    }
  }
}

void ServiceMetrics::SchedulerProgress(const ScheduleStats& stats) {
  std::lock_guard lock(mutex_);
  scheduler_ = stats;
}

double ServiceMetrics::RecentTokensPerSecond(Clock::time_point now) const {
  while (!recent_.empty() &&
         std::chrono::duration<double>(now - recent_.front().first).count() > kRecentSeconds) {
    recent_.pop_front();
  }
  int64_t tokens = 0;
  for (const auto& [time, n] : recent_) tokens += n;
  const double window =
      std::min(kRecentSeconds, std::chrono::duration<double>(now - start_).count());
  return window > 0 ? tokens / window : 0.0;
}

void ServiceMetrics::AppendRequests(std::string& out, Clock::time_point now) const {
  Line(out, "grove_requests_total", "counter", "Completion requests accepted.", requests_);
  Line(out, "grove_requests_refused_total", "counter",
       "Requests answered 503 because the queue was full.", refused_);
  Line(out, "grove_requests_failed_total", "counter", "Requests answered with another error.",
       failed_);
  Line(out, "grove_drafter_swaps_total", "counter", "Drafters swapped in while serving.",
       drafter_swaps_);
  Line(out, "grove_prompt_tokens_total", "counter", "Prompt tokens of accepted requests.",
       prompt_tokens_);
  Line(out, "grove_generated_tokens_total", "counter", "Tokens generated.", generated_);
  Line(out, "grove_tokens_per_second", "gauge",
       "Tokens generated per second over the last ten seconds (by finished sequences).",
       RecentTokensPerSecond(now));
}

void ServiceMetrics::AppendSpeculation(std::string& out) const {
  Line(out, "grove_tau", "gauge",
       "Mean tokens per target step of finished speculative sequences (accepted + 1).",
       steps_ ? static_cast<double>(speculative_tokens_) / steps_ : 0.0);
  out +=
      "# HELP grove_acceptance_by_depth Share of steps reaching a tree depth that accepted a node "
      "there.\n# TYPE grove_acceptance_by_depth gauge\n";
  for (std::size_t d = 0; d < reached_depth_.size(); ++d) {
    if (reached_depth_[d] == 0) continue;
    char text[128];
    std::snprintf(text, sizeof(text), "grove_acceptance_by_depth{depth=\"%zu\"} %.6g\n", d + 1,
                  static_cast<double>(accepted_at_depth_[d]) / reached_depth_[d]);
    out += text;
  }
}

void ServiceMetrics::AppendScheduler(std::string& out, int32_t queue_length, double uptime) const {
  Line(out, "grove_queue_length", "gauge", "Sequences waiting for a KV slot.", queue_length);
  Line(out, "grove_sequences_in_flight", "gauge", "Sequences admitted and not finished.",
       static_cast<double>(sequences_started_ - sequences_finished_ - queue_length));
  Line(out, "grove_target_busy_share", "gauge",
       "Share of the server's uptime the target spent in forwards and verification.",
       uptime > 0 ? scheduler_.target_busy_seconds / uptime : 0.0);
  Line(out, "grove_target_forwards_total", "counter",
       "Target forwards of generation (prefills excluded).",
       static_cast<double>(scheduler_.target_forwards));
  Line(out, "grove_sequence_steps_total", "counter",
       "Sequence steps the target forwards verified (a forward of k sequences counts k).",
       static_cast<double>(scheduler_.steps));
  const RoundTimes& rounds = scheduler_.rounds;
  out +=
      "# HELP grove_round_seconds_total Verifying thread's time in rounds: waiting for the drafts, "
      "the target forward, the rest (batch, acceptance, streaming).\n"
      "# TYPE grove_round_seconds_total counter\n";
  for (const auto& [part, seconds] :
       {std::pair{"draft_wait", rounds.draft_wait}, std::pair{"forward", rounds.forward},
        std::pair{"other", rounds.other}}) {
    char text[128];
    std::snprintf(text, sizeof(text), "grove_round_seconds_total{part=\"%s\"} %.9g\n", part,
                  seconds);
    out += text;
  }
  Line(out, "grove_rounds_total", "counter", "Rounds of verification.",
       static_cast<double>(rounds.rounds));
}

std::string ServiceMetrics::Text(int32_t queue_length) const {
  std::lock_guard lock(mutex_);
  const Clock::time_point now = Clock::now();
  const double uptime = std::chrono::duration<double>(now - start_).count();
  std::string out;
  AppendRequests(out, now);
  AppendSpeculation(out);
  AppendScheduler(out, queue_length, uptime);
  Line(out, "grove_uptime_seconds", "counter", "Seconds since the server started.", uptime);
  return out;
}

}  // namespace grove::serve
