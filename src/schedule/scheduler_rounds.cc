// seed and batched: a thread per lane drafts, this one gathers the finished drafts into rounds
// that one target forward verifies.

#include "schedule/scheduler.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <optional>
#include <thread>

#include "base/log.h"
#include "base/timer.h"
#include "schedule/draft_rounds.h"
#include "schedule/scheduler_lane.h"

namespace grove {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

void Scheduler::ShapeFor(Lane& lane) {
  if (!trees_by_concurrency_ || !lane.scheduler_tree) return;
  lane.session->UseShape(trees_by_concurrency_->For(in_flight_));
}

void Scheduler::LetDraft(DraftRounds& rounds, std::size_t l) {
  // Alone in flight, the lane's draft meets the target's pool only in an admission's prefill,
  // which waits out each of its ops (base/thread_pool.h).
  Lane& lane = *lanes_[l];
  if (lane.draft) lane.draft->pool().set_borrowing(in_flight_ == 1);
  rounds.AllowDraft(l);
}

// One round of seed or batched verification: the drafts it took, the batch that verifies them,
// and its times.
struct Scheduler::Round {
  std::vector<std::size_t> taken;  // lanes, in the order their drafts finished
  Batch batch;
  Clock::time_point start;
  double draft_wait = 0.0;
  double forward = 0.0;
  RoundObservation observed;  // batched with an auto plan: for the trees by concurrency
};

void Scheduler::RunRounds(Source& source) {
  const std::size_t n_lanes = source.max_lanes(static_cast<std::size_t>(target_.n_seq()));
  for (std::size_t l = 0; l < n_lanes; ++l) LaneAt(l);
  // SEED's rounds (draft_rounds.h): this thread verifies, each lane's thread drafts.
  DraftRounds rounds(n_lanes);
  // Lanes stop and join on every way out, exceptions included.
  struct Joiner {
    DraftRounds& rounds;
    std::vector<std::unique_ptr<Lane>>& lanes;
    std::size_t n;
    ~Joiner() {
      rounds.Stop();
      for (std::size_t l = 0; l < n; ++l) {
        if (lanes[l]->thread.joinable()) lanes[l]->thread.join();
      }
    }
  } joiner{rounds, lanes_, n_lanes};
  for (std::size_t l = 0; l < n_lanes; ++l) {
    Lane& lane = *lanes_[l];
    lane.thread = std::thread([&rounds, &lane, l] {
      while (rounds.WaitToDraft(l)) {
        try {
          lane.session->Draft();
        } catch (...) {
          rounds.Failed(std::current_exception());
          return;
        }
        rounds.Drafted(l);
      }
    });
  }
  // batched: a round waits for every draft under way (the lanes drafted in parallel since the
  // last forward) for at most as long as the last forward took, so that one forward verifies them
  // all; seed verifies whatever is ready (its FCFS queue). Without the wait, 4 plain sequences
  // shared a forward 2.8 at a time on average on 2 cores.
  const bool batched = options_.policy == SchedulePolicy::kBatched;
  Clock::duration last_forward = std::chrono::milliseconds(1);
  Round round;
  for (bool closed = false;;) {
    AdmitWhileLanesAreFree(source, rounds, n_lanes, &closed);
    if (in_flight_ == 0) {
      if (closed) break;
      continue;
    }
    // A round, from here: its wait for drafts, its forward, accepting and streaming (admitting,
    // prefills included, is no step's cost).
    GatherRound(rounds, batched ? std::optional(last_forward) : std::nullopt, round);
    Timer busy;
    PackRound(source, rounds, round);
    Timer forward;
    const std::span<const float> logits = target_.Forward(round.batch);
    round.forward = forward.Seconds();
    last_forward =
        std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(round.forward));
    ++stats_.target_forwards;
    SettleRound(source, rounds, logits, round);
    stats_.target_busy_seconds += busy.Seconds();
  }
}

void Scheduler::AdmitWhileLanesAreFree(Source& source, DraftRounds& rounds, std::size_t n_lanes,
                                       bool* closed) {
  // Blocks for a request only when nothing is in flight.
  for (std::size_t l = 0; l < n_lanes && !*closed; ++l) {
    Lane& lane = *lanes_[l];
    while (lane.request < 0) {
      const int64_t r = source.Next(/*wait=*/in_flight_ == 0);
      if (r == Source::kClosed) *closed = true;
      if (r < 0) return;
      if (!Admit(source, r, lane)) continue;
      if (lane.session->done()) {  // n_predict 0: the lane is free again
        Finish(source, lane);
      } else {
        ShapeFor(lane);
        LetDraft(rounds, l);
      }
    }
  }
}

void Scheduler::GatherRound(DraftRounds& rounds, std::optional<Clock::duration> gather,
                            Round& round) {
  round.start = Clock::now();
  // seed takes the queue's head alone; batched the drafts behind it while the budget holds them.
  int32_t tokens = 0;
  const bool batched = options_.policy == SchedulePolicy::kBatched;
  rounds.TakeReady(round.taken, gather, [&](std::size_t l) {
    if (!batched) return false;
    if (tokens == 0) tokens = lanes_[round.taken.front()]->session->tree().size() + 1;
    const int32_t more = lanes_[l]->session->tree().size() + 1;
    if (tokens + more > options_.node_budget) return false;
    tokens += more;
    return true;
  });
  round.draft_wait = SecondsBetween(round.start, Clock::now());
}

void Scheduler::PackRound(Source& source, DraftRounds& rounds, Round& round) {
  const Clock::time_point now = Clock::now();
  round.batch.Clear();
  round.observed = {.sequences = static_cast<int32_t>(round.taken.size())};
  for (std::size_t l : round.taken) {
    Lane& lane = *lanes_[l];
    lane.enqueued = rounds.enqueued(l);
    const double wait = SecondsBetween(lane.enqueued, now);
    source.result(lane.request).queue_wait_seconds += wait;
    stats_.queue_wait_seconds += wait;
    ++stats_.queued_drafts;
    // A tail's levels cost microseconds: the draft's levels are the planned tree's.
    round.observed.draft_levels += lane.session->planned_tree().depth();
    lane.session->AppendVerify(round.batch);
  }
}

void Scheduler::SettleRound(Source& source, DraftRounds& rounds, std::span<const float> logits,
                            Round& round) {
  for (std::size_t l : round.taken) {
    Lane& lane = *lanes_[l];
    SpeculativeSession& session = *lane.session;
    // The shared forward is attributed in proportion to the rows each sequence put in it; the
    // rest of the time since its draft ended was waiting (the queue, the others' share).
    const double share = round.forward * (session.tree().size() + 1) / round.batch.size();
    session.RecordVerifyForward(share);
    session.RecordWait(std::max(0.0, SecondsBetween(lane.enqueued, Clock::now()) - share));
    // A cheap step's chain is not the table's tree: its acceptance says nothing of the table's.
    const bool table_tree = trees_by_concurrency_ && lane.scheduler_tree &&
                            !session.tree().empty() && !session.cheap_step();
    const std::span<const int32_t> accepted = session.Accept(logits);
    if (table_tree) {
      trees_by_concurrency_->ObserveTree(session.planned_tree(), session.planned_accepted());
    }
    const bool streaming =
        DeliverStep(source.request(lane.request), session, accepted, source.result(lane.request));
    if (session.done() || !streaming) {
      Finish(source, lane);
    } else {
      ShapeFor(lane);
      LetDraft(rounds, l);
    }
  }
  const double other = SecondsBetween(round.start, Clock::now()) - round.draft_wait - round.forward;
  // batched with an auto plan: what the round did goes to the trees by concurrency, which
  // rechoose themselves from it (concurrency_trees.h).
  if (options_.policy == SchedulePolicy::kBatched && trees_by_concurrency_) {
    round.observed.rows = static_cast<int32_t>(round.batch.size());
    round.observed.forward_seconds = round.forward;
    round.observed.draft_wait_seconds = round.draft_wait;
    round.observed.other_seconds = other;
    if (trees_by_concurrency_->Observe(round.observed)) {
      Log(LogLevel::kDebug, "batched: ", trees_by_concurrency_->Describe());
    }
  }
  stats_.rounds += RoundTimes{
      .rounds = 1, .draft_wait = round.draft_wait, .forward = round.forward, .other = other};
}

}  // namespace grove
