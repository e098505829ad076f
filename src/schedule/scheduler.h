// Runs many sequences on one target under a scheduling policy (schedule_policy.h), each as the
// step phases of a SpeculativeSession (or plain decoding for serial-ar); no policy re-implements a
// step.
//
// Resources: the target is one forward context whose KV slots (Model::kv) the scheduler acquires,
// forks and releases; at most target.n_seq() sequences are in flight, the rest wait their turn in
// request order. Each sequence in flight drafts in a lane: a draft forward context of its own over
// the draft's shared parameters (one copy of the draft weights however many lanes), or a drafter
// without a model (n-gram, or suffix drafters sharing one store of outputs). Lanes of seed and
// batched draft on threads of their own with a one-thread pool, so on a 2-core machine drafting
// overlaps the target's forward; serial-sd's lane shares the target's pool.
//
// Invariant (tested): each sequence's tokens are those it gets alone, at any temperature, whatever
// the policy, the number of sequences and the thread timing: draws are keyed by the sequence's
// RNG key and position (contract 4), and a sequence's rows of a shared forward equal its rows of
// a forward of its own (contract 2). With greedy or target-sample verification (the rules whose
// draws are plain sampling's) serial-ar's tokens are the same too.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/model.h"
#include "schedule/concurrency_trees.h"
#include "schedule/schedule_policy.h"
#include "speculate/draft_source.h"
#include "speculate/session.h"
#include "speculate/speculation.h"

namespace grove {

// The batched policy's tokens per verify forward unless told (`--node-budget`): every command and
// the server take it from here.
inline constexpr int32_t kDefaultNodeBudget = 128;

class DraftRounds;
class RequestFeed;

// One speculative step of a sequence, for a live view: the tree it verified, the nodes it
// accepted (indices into tree, root to leaf), the tokens it emitted, and the session's statistics
// so far, this step included (an observer keeps no tally of its own); for a drafter made of
// several, which of them proposed each node and why (null for others).
struct StepView {
  const TokenTree& tree;
  std::span<const int32_t> accepted;
  std::span<const int32_t> tokens;
  const SpeculationStats& stats;
  const NodeAttribution* attribution = nullptr;
};

struct SequenceRequest {
  std::vector<int32_t> prompt;  // at least one token
  uint64_t sequence = 0;        // RNG key (SessionOptions::sequence)
  int32_t n_predict = 96;
  // Index of an earlier request with an identical prompt, or -1. While that sequence holds its
  // slot, this one forks it (KvCachePool::Fork) instead of prefilling the prompt again; not with a
  // drafter that reads the target's hidden states, which a fork would not compute.
  int32_t shares_prompt_with = -1;
  // Streaming: called on the thread that called Run, with the tokens each step accepted (the stop
  // token included), in order. Returning false cancels the sequence there (a client that went
  // away): its slot is freed at once and its result holds what was generated so far. Empty: run
  // to the end.
  std::function<bool(std::span<const int32_t>)> on_tokens;
  // Called before on_tokens with each speculative step (not for serial-ar), on the same thread.
  std::function<void(const StepView&)> on_step;
  // This sequence's own sampling, rule and tree (a server's per-request fields); null: the
  // scheduler's. An auto plan here means the scheduler's tree (chosen once, frozen_auto_plan.h); an
  // empty static tree means plain steps. Sequences of different policies still share forwards.
  std::shared_ptr<const SpeculationPolicy> speculation;
};

struct SequenceResult {
  std::vector<int32_t> tokens;      // the stop token included
  int64_t steps = 0;                // target forwards this sequence took part in (prefill excluded)
  double queue_wait_seconds = 0.0;  // seed, batched: from each draft's end to its verification
  bool forked = false;              // its prompt came from a sibling's slot
  bool cancelled = false;           // on_tokens returned false
  std::string error;                // Serve only: why the request could not run (else empty)
  std::string drafter;              // the name of the drafter that drafted it (DrafterTraits)
  SpeculationStats speculation;     // serial-sd, seed, batched: the session's (tau, by depth)
};

// Where the verifying thread's time went in seed and batched rounds (wall clock).
struct RoundTimes {
  int64_t rounds = 0;
  double draft_wait = 0.0;  // waiting for the round's drafts
  double forward = 0.0;     // the target forward that verified them
  double other = 0.0;       // building the batch, accepting, streaming, rechoosing trees

  double total() const { return draft_wait + forward + other; }
  RoundTimes& operator+=(const RoundTimes& b) {
    rounds += b.rounds;
    draft_wait += b.draft_wait;
    forward += b.forward;
    other += b.other;
    return *this;
  }
};

struct ScheduleStats {
  double wall_seconds = 0.0;
  // The target's forward passes (prefill, verification, plain steps) and their bookkeeping on
  // the verifying thread: what keeps the target busy.
  double target_busy_seconds = 0.0;
  int64_t target_forwards = 0;  // generation forwards (prefill excluded)
  int64_t sequences = 0;
  int64_t steps = 0;  // sequence steps: a forward verifying k sequences counts k
  int64_t generated = 0;
  int64_t queued_drafts = 0;
  double queue_wait_seconds = 0.0;  // summed over queued drafts
  int64_t forks = 0;
  int32_t max_in_flight = 0;
  StepTimes times;    // summed over speculative sessions (verify forward shared in proportion)
  RoundTimes rounds;  // seed, batched

  double tau() const { return steps ? static_cast<double>(generated) / steps : 0.0; }
  double busy_share() const { return wall_seconds > 0 ? target_busy_seconds / wall_seconds : 0.0; }
  double mean_queue_wait() const {
    return queued_drafts ? queue_wait_seconds / queued_drafts : 0.0;
  }
  // Sums b's figures into these (max_in_flight: the larger): totals over several runs.
  ScheduleStats& operator+=(const ScheduleStats& b);
  double sequences_per_forward() const {
    return target_forwards ? static_cast<double>(steps) / target_forwards : 0.0;
  }
};

struct SchedulerOptions {
  SchedulePolicy policy = SchedulePolicy::kSeed;
  // Plan, rule, child draw and sampling (serial-ar samples with speculation.sampling). An auto
  // plan becomes one Sequoia tree for every sequence, chosen when the first requests arrive
  // (schedule/frozen_auto_plan.h); options() then shows it.
  SpeculationPolicy speculation;
  // batched: most tokens (roots and tree nodes) one target forward verifies; at least one tree
  // always goes in.
  int32_t node_budget = kDefaultNodeBudget;
  bool stop_at_eog = true;
};

class Scheduler {
 public:
  // Tokens every draft lane's forward context holds in one batch, at least: a request's own tree
  // (SequenceRequest::speculation) may draft at most this many less one nodes per level.
  static constexpr int32_t kMinDraftBatch = 128;

  // `draft`: where each lane's drafter comes from (any, for serial-ar alone). Throws grove::Error
  // on a node budget < 1.
  Scheduler(Model& target, DraftSource draft, const SchedulerOptions& options);
  ~Scheduler();

  // Generates every request; results in request order. Throws grove::Error on a malformed
  // request (an empty prompt, a prompt the context cannot hold, a bad shares_prompt_with).
  std::vector<SequenceResult> Run(std::span<const SequenceRequest> requests);
  // Chooses an auto plan's tree now, measuring on `context` (frozen_auto_plan.h), instead of at
  // the first request: a server does it at start-up, before load can disturb the measurement.
  // Does nothing for other plans or once chosen. Call it while nothing runs.
  void ChooseAutoTree(std::span<const int32_t> context);
  // Runs the requests a feed (request_feed.h) receives while it runs, admitting them in arrival
  // order as slots free, until the feed is closed and everything queued is done. Each result goes
  // to its request's on_done on this thread; a request that cannot run (its prompt does not fit
  // the context) gets result.error and the others go on. Every other failure is thrown, after
  // every running and waiting request got on_done with the error.
  void Serve(RequestFeed& feed);
  // Makes `draft` the source of every sequence admitted from now on; call it from any thread
  // (a server swapping its drafter while it serves). Sequences in flight finish with the drafter
  // they started with; a lane makes its new drafter when its next sequence is admitted. The
  // caller checks that `draft` suits the target and the policy (its vocabulary, whether it reads
  // the target's features as the old one did).
  void ReplaceDraft(DraftSource draft);

  // Of the last Run, or of Serve so far (read it on the scheduler's thread: from on_tokens or
  // on_done, or after Serve returned).
  const ScheduleStats& stats() const { return stats_; }
  const SchedulerOptions& options() const { return options_; }
  // Batched with an auto plan: the tree for each number of sequences in flight (none before the
  // plan is chosen, and for other policies and plans). Read it on the scheduler's thread.
  const std::optional<ConcurrencyTrees>& trees_by_concurrency() const {
    return trees_by_concurrency_;
  }

 private:
  struct Lane;
  class Source;
  class ListSource;
  class FeedSource;

  Lane& LaneAt(std::size_t i);
  // (Re)makes a free lane's drafter from draft_ (after ReplaceDraft: from the new source).
  void MakeDrafter(Lane& lane);
  // Takes a source ReplaceDraft left, on the scheduler's thread.
  void AdoptReplacement();
  // Clears the per-run state (statistics, slots, shares) and chooses an auto plan's tree.
  void BeginRun(std::span<const int32_t> first_prompt);
  // A target slot for request r: a fork of its sibling's when that one still holds its slot
  // (*cached: the prompt tokens the fork holds), else a fresh one.
  int32_t AcquireSlot(Source& source, int64_t r, int32_t* cached);
  int32_t SlotOf(int64_t r) const;
  // Releases request r's slot, or keeps it while a later sibling may still fork it.
  void ReleaseSlot(int64_t r);
  // Releases a retained (finished) request's slot and forgets it.
  void ReleaseRetained(std::vector<int64_t>::iterator it);
  // Acquires (or forks) a slot for request r and starts its session in `lane`. False when the
  // source took the request's failure as its result (the lane stays free).
  bool Admit(Source& source, int64_t r, Lane& lane);
  void Finish(Source& source, Lane& lane);
  // Before a lane drafts: its tree for the sequences now in flight (batched, auto plan).
  void ShapeFor(Lane& lane);
  // Lets lane l draft its next tree, on the target's pool if it is the one sequence in flight.
  void LetDraft(DraftRounds& rounds, std::size_t l);
  // serial-ar and serial-sd (scheduler_serial.cc): one sequence at a time; RunPlain decodes
  // request r plainly.
  void RunSerial(Source& source);
  void RunPlain(Source& source, int64_t r);
  // seed and batched (scheduler_rounds.cc): rounds of gathering finished drafts, packing them
  // into one batch, the target's forward, and settling each sequence's step.
  struct Round;
  void RunRounds(Source& source);
  // Fills free lanes from the source and lets them draft; *closed once the source is.
  void AdmitWhileLanesAreFree(Source& source, DraftRounds& rounds, std::size_t n_lanes,
                              bool* closed);
  void GatherRound(DraftRounds& rounds, std::optional<std::chrono::steady_clock::duration> gather,
                   Round& round);
  void PackRound(Source& source, DraftRounds& rounds, Round& round);
  // Accepts, streams and finishes or reshapes each sequence, then records the round.
  void SettleRound(Source& source, DraftRounds& rounds, std::span<const float> logits,
                   Round& round);
  void Drive(Source& source);
  SessionOptions SessionOptionsFor(const SequenceRequest& request, int32_t slot,
                                   int32_t cached) const;
  // The policy request r runs under (SequenceRequest::speculation).
  SpeculationPolicy PolicyFor(const SequenceRequest& request) const;

  Model& target_;
  DraftSource draft_;
  int64_t draft_generation_ = 0;  // sources adopted; a lane's drafter is of the one it was made of
  std::mutex replacement_mutex_;
  std::optional<DraftSource> replacement_;  // ReplaceDraft's, until adopted
  SchedulerOptions options_;
  bool forks_prompts_ = true;  // shares_prompt_with forks the KV cache (not for feature drafters)
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::unordered_map<int64_t, int32_t> slot_of_request_;  // while in flight (or retained)
  std::unordered_map<int64_t, int32_t> pending_shares_;   // later requests that fork each one
  std::vector<int64_t> retained_;  // finished requests whose slot a sibling may fork
  // batched with an auto plan: the tree when k sequences are in flight (concurrency_trees.h).
  std::optional<ConcurrencyTrees> trees_by_concurrency_;
  // An auto plan's t(n), for the sessions on its tree to choose cheap steps' chains by.
  std::optional<VerifyCostCurve> auto_verify_cost_;
  int32_t in_flight_ = 0;
  ScheduleStats stats_;
};

}  // namespace grove
