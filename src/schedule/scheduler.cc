#include "schedule/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <functional>
#include <optional>
#include <thread>

#include "base/error.h"
#include "base/log.h"
#include "base/timer.h"
#include "model/kv_cache_pool.h"
#include "model/model_parameters.h"
#include "model/recurrent_state.h"
#include "schedule/draft_rounds.h"
#include "schedule/frozen_auto_plan.h"
#include "schedule/request_feed.h"
#include "schedule/scheduler_lane.h"

namespace grove {
namespace {

// Whether the recurrent state of `slot` (model/recurrent_state.h) can be rewound to `position`:
// always on a model without recurrent layers; else only back to its checkpoint.
bool RecurrentStateHolds(const KvCachePool& kv, int32_t slot, int32_t position) {
  const RecurrentStates* states = kv.recurrent();
  return states == nullptr || states->checkpoint(slot) <= position;
}

// Tokens a draft lane's forward context must hold in one batch: the widest tree level it expands,
// and prompt chunks (ForwardChain splits longer prompts).
int32_t DraftMaxBatch(const SpeculationPolicy& policy) {
  return std::clamp(policy.plan.max_drafted_nodes() + 1, Scheduler::kMinDraftBatch, 8192);
}

// A forked sequence's target never computes its prompt's hidden states, so a drafter that reads
// them would draft the whole prompt from zero features (worse guesses for the whole sequence):
// with such a drafter each sequence prefills its own prompt. Plain decoding still forks.
bool ForksPrompts(const DraftSource& draft, SchedulePolicy policy) {
  return !draft.reads_target_features() || policy == SchedulePolicy::kSerialAr;
}

}  // namespace

bool DeliverStep(const SequenceRequest& request, const SpeculativeSession& session,
                 std::span<const int32_t> accepted, SequenceResult& result) {
  if (request.on_step) {
    request.on_step({session.tree(), session.accepted_nodes(), accepted, session.stats(),
                     session.drafter().attribution()});
  }
  result.tokens.insert(result.tokens.end(), accepted.begin(), accepted.end());
  ++result.steps;
  if (request.on_tokens && !request.on_tokens(accepted)) result.cancelled = true;
  return !result.cancelled;
}

ScheduleStats& ScheduleStats::operator+=(const ScheduleStats& b) {
  wall_seconds += b.wall_seconds;
  target_busy_seconds += b.target_busy_seconds;
  target_forwards += b.target_forwards;
  sequences += b.sequences;
  steps += b.steps;
  generated += b.generated;
  queued_drafts += b.queued_drafts;
  queue_wait_seconds += b.queue_wait_seconds;
  forks += b.forks;
  max_in_flight = std::max(max_in_flight, b.max_in_flight);
  times += b.times;
  rounds += b.rounds;
  return *this;
}

Scheduler::Scheduler(Model& target, DraftSource draft, const SchedulerOptions& options)
    : target_(target), draft_(std::move(draft)), options_(options) {
  if (options_.node_budget < 1)
    Fail("scheduler: node budget ", options_.node_budget, " must be at least 1");
  forks_prompts_ = ForksPrompts(draft_, options_.policy);
}

Scheduler::~Scheduler() = default;

Scheduler::Lane& Scheduler::LaneAt(std::size_t i) {
  while (lanes_.size() <= i) {
    auto lane = std::make_unique<Lane>();
    MakeDrafter(*lane);
    lanes_.push_back(std::move(lane));
  }
  return *lanes_[i];
}

void Scheduler::MakeDrafter(Lane& lane) {
  // Serial lanes take turns with the target on its pool, and so does the one lane of a target
  // with one slot: its draft and the target's forward never overlap (a round waits for the draft;
  // a request is admitted only while the lane is free). On a pool of its own that lane's draft
  // split none of its ops and the target's workers idled through it; on the target's, the draft's
  // widest ops (the output projection) split, and serving one client with the bundled pair on 2
  // cores took 1-14% less time a step (design.md, "The scheduler"). The concurrent lanes of a
  // target of more slots get a borrowing pool: the target's workers while theirs is the one
  // sequence in flight (LetDraft), their own thread otherwise, with no workers to contend with the
  // target's.
  ModelOptions draft_options{.n_ctx = target_.n_ctx(),
                             .n_seq = 1,
                             .max_batch = DraftMaxBatch(options_.speculation),
                             .device = ComputeDevice::kAuto,
                             .cache_type = target_.cache_type()};
  if (DraftsConcurrently(options_.policy) && target_.n_seq() > 1) {
    draft_options.pool = std::make_shared<ThreadPool>(target_.shared_pool());
  } else {
    draft_options.pool = target_.shared_pool();
  }
  // The session refers to the drafter, and the drafter to its draft model: gone in that order.
  lane.session.reset();
  lane.drafter.reset();
  lane.draft.reset();
  lane.drafter = draft_.Make(target_, draft_options, &lane.draft);
  lane.draft_generation = draft_generation_;
}

void Scheduler::ReplaceDraft(DraftSource draft) {
  std::lock_guard lock(replacement_mutex_);
  replacement_ = std::move(draft);
}

void Scheduler::AdoptReplacement() {
  std::lock_guard lock(replacement_mutex_);
  if (!replacement_) return;
  // The old draft model is closed on this thread once the sequences in flight are done with it: it
  // must not then write what is left of its packed weights here, delaying every sequence.
  if (draft_.model()) draft_.model()->StopKeepingPackedWeights();
  draft_ = std::move(*replacement_);
  replacement_.reset();
  ++draft_generation_;
  forks_prompts_ = ForksPrompts(draft_, options_.policy);
}

SessionOptions Scheduler::SessionOptionsFor(const SequenceRequest& request, int32_t slot,
                                            int32_t cached) const {
  // Sequences on the scheduler's auto tree draft cheap steps as chains (speculate/draft_outlook.h).
  const bool auto_tree = !request.speculation || request.speculation->plan.is_auto();
  return SessionOptions{
      .n_predict = request.n_predict,
      .stop_at_eog = options_.stop_at_eog,
      .sequence = request.sequence,
      .target_seq = slot,
      .cached_prompt = cached,
      .verify_cost = auto_tree && auto_verify_cost_ ? &*auto_verify_cost_ : nullptr};
}

class Scheduler::ListSource : public Source {
 public:
  ListSource(std::span<const SequenceRequest> requests, std::vector<SequenceResult>& results)
      : requests_(requests), results_(results) {}
  int64_t Next(bool) override {
    return next_ < static_cast<int64_t>(requests_.size()) ? next_++ : kClosed;
  }
  const SequenceRequest& request(int64_t id) override { return requests_[id]; }
  SequenceResult& result(int64_t id) override { return results_[id]; }
  void Done(int64_t) override {}
  bool TakeFailure(int64_t, const Error&) override { return false; }
  std::size_t max_lanes(std::size_t n_slots) const override {
    return std::min(n_slots, requests_.size());
  }

 private:
  std::span<const SequenceRequest> requests_;
  std::vector<SequenceResult>& results_;
  int64_t next_ = 0;
};

class Scheduler::FeedSource : public Source {
 public:
  FeedSource(RequestFeed& feed, ScheduleStats& stats) : feed_(feed), stats_(stats) {}
  ~FeedSource() override { FailAll("the scheduler stopped"); }

  int64_t Next(bool wait) override {
    RequestFeed::Entry entry;
    bool closed = false;
    if (!feed_.Take(&entry, wait, &closed)) return closed ? kClosed : kNone;
    const int64_t id = next_id_++;
    ++stats_.sequences;
    running_.emplace(id, Running{std::move(entry), {}});
    return id;
  }
  const SequenceRequest& request(int64_t id) override { return running_.at(id).entry.request; }
  SequenceResult& result(int64_t id) override { return running_.at(id).result; }
  void Done(int64_t id) override {
    auto it = running_.find(id);
    Running running = std::move(it->second);
    running_.erase(it);
    stats_.generated += static_cast<int64_t>(running.result.tokens.size());
    stats_.steps += running.result.steps;
    if (running.entry.on_done) running.entry.on_done(std::move(running.result));
  }
  bool TakeFailure(int64_t id, const Error& error) override {
    result(id).error = error.what();
    Done(id);
    return true;
  }
  std::size_t max_lanes(std::size_t n_slots) const override { return n_slots; }

  // Every running and waiting request gets on_done with `why` (Serve is failing or stopping).
  void FailAll(const std::string& why) {
    while (!running_.empty()) {
      const int64_t id = running_.begin()->first;
      if (result(id).error.empty()) result(id).error = why;
      Done(id);
    }
    while (Next(false) >= 0) {
    }
  }

 private:
  struct Running {
    RequestFeed::Entry entry;
    SequenceResult result;
  };
  RequestFeed& feed_;
  ScheduleStats& stats_;
  std::unordered_map<int64_t, Running> running_;
  int64_t next_id_ = 0;
};

SpeculationPolicy Scheduler::PolicyFor(const SequenceRequest& request) const {
  if (!request.speculation) return options_.speculation;
  SpeculationPolicy policy = *request.speculation;
  if (policy.plan.is_auto()) policy.plan = options_.speculation.plan;
  return policy;
}

std::vector<SequenceResult> Scheduler::Run(std::span<const SequenceRequest> requests) {
  const auto n = static_cast<int32_t>(requests.size());
  for (int32_t r = 0; r < n; ++r) {
    const SequenceRequest& q = requests[r];
    if (q.prompt.empty()) Fail("request ", r, " has an empty prompt: give at least one token");
    if (q.n_predict < 0) Fail("request ", r, " asks for ", q.n_predict, " tokens: 0 or more");
    const int32_t j = q.shares_prompt_with;
    if (j != -1 && (j < 0 || j >= r || requests[j].prompt != q.prompt)) {
      Fail("request ", r, " shares its prompt with ", j,
           ", which is not an earlier request with the same prompt");
    }
  }
  std::vector<SequenceResult> results(static_cast<std::size_t>(n));
  if (n == 0) {
    stats_ = ScheduleStats{};
    return results;
  }
  BeginRun(requests.front().prompt);
  stats_.sequences = n;
  for (const SequenceRequest& q : requests) {
    if (forks_prompts_ && q.shares_prompt_with >= 0) ++pending_shares_[q.shares_prompt_with];
  }
  ListSource source(requests, results);
  Drive(source);
  for (const SequenceResult& result : results) {
    stats_.generated += static_cast<int64_t>(result.tokens.size());
    stats_.steps += result.steps;
  }
  return results;
}

void Scheduler::Serve(RequestFeed& feed) {
  // The tree of an auto plan is chosen on the first request's prompt: wait for it.
  RequestFeed::Entry first;
  bool closed = false;
  if (!feed.Take(&first, /*wait=*/true, &closed)) return;
  BeginRun(first.request.prompt);
  feed.PutBack(std::move(first));
  FeedSource source(feed, stats_);
  try {
    Drive(source);
  } catch (const std::exception& e) {
    source.FailAll(e.what());
    throw;
  }
}

void Scheduler::BeginRun(std::span<const int32_t> first_prompt) {
  for (int32_t s = 0; s < target_.n_seq(); ++s) {
    if (target_.kv().acquired(s)) Fail("scheduler: target slot ", s, " is held by someone else");
  }
  ChooseAutoTree(first_prompt);
  stats_ = ScheduleStats{};
  slot_of_request_.clear();
  pending_shares_.clear();
  retained_.clear();
  in_flight_ = 0;
  for (auto& lane : lanes_) lane->request = -1;
}

void Scheduler::ChooseAutoTree(std::span<const int32_t> context) {
  if (IsSpeculative(options_.policy) && options_.speculation.plan.is_auto()) {
    const bool batched = options_.policy == SchedulePolicy::kBatched;
    FrozenAutoPlan frozen =
        FreezeAutoPlan(target_, LaneAt(0).draft.get(), context, options_.speculation,
                       batched ? target_.n_seq() : 0, options_.node_budget);
    options_.speculation.plan = std::move(frozen.plan);
    trees_by_concurrency_ = std::move(frozen.by_concurrency);
    auto_verify_cost_ = std::move(frozen.verify_cost);
  }
}

void Scheduler::Drive(Source& source) {
  Timer wall;
  try {
    if (DraftsConcurrently(options_.policy)) {
      RunRounds(source);
    } else {
      RunSerial(source);
    }
  } catch (...) {
    // Nothing stays acquired: the next run starts from a free pool.
    for (const auto& [r, slot] : slot_of_request_) target_.kv().Release(slot);
    slot_of_request_.clear();
    retained_.clear();
    throw;
  }
  stats_.wall_seconds = wall.Seconds();
  while (!retained_.empty()) ReleaseRetained(retained_.begin());
}

int32_t Scheduler::SlotOf(int64_t r) const {
  const auto it = slot_of_request_.find(r);
  return it == slot_of_request_.end() ? -1 : it->second;
}

void Scheduler::ReleaseRetained(std::vector<int64_t>::iterator it) {
  target_.kv().Release(SlotOf(*it));
  slot_of_request_.erase(*it);
  pending_shares_.erase(*it);
  retained_.erase(it);
}

int32_t Scheduler::AcquireSlot(Source& source, int64_t r, int32_t* cached) {
  KvCachePool& kv = target_.kv();
  const SequenceRequest& q = source.request(r);
  const int64_t parent = forks_prompts_ ? q.shares_prompt_with : -1;
  const bool parent_held = parent >= 0 && SlotOf(parent) >= 0 && q.prompt.size() > 1;
  // A full pool gives back the slots of finished sequences kept for their siblings, oldest first,
  // except the one this request forks.
  while (kv.in_use() == kv.size()) {
    auto it = std::find_if(retained_.begin(), retained_.end(),
                           [&](int64_t k) { return !(parent_held && k == parent); });
    if (it == retained_.end()) break;
    ReleaseRetained(it);
  }
  const auto retained_parent = std::find(retained_.begin(), retained_.end(), parent);
  *cached = 0;
  int32_t slot = -1;
  if (parent_held) {
    *cached = static_cast<int32_t>(q.prompt.size()) - 1;
    ++stats_.forks;
    if (retained_parent != retained_.end() &&
        (pending_shares_[parent] == 1 || kv.in_use() == kv.size())) {
      // The parent is done and this is its last sibling (or no slot is free): take its slot over
      // as it is; the session keeps the prompt and drops the rest (KeepCachedPrompt).
      slot = SlotOf(parent);
      // A recurrent state whose checkpoint has passed the prompt's end cannot go back to it:
      // the prompt is computed again in the same slot.
      if (!RecurrentStateHolds(kv, slot, *cached)) *cached = 0;
      slot_of_request_.erase(parent);
      retained_.erase(retained_parent);
    } else if (kv.cache(SlotOf(parent)).ReusablePrefix(*cached) == *cached &&
               RecurrentStateHolds(kv, SlotOf(parent), *cached)) {
      slot = kv.Fork(SlotOf(parent), *cached);
    } else {
      // The parent went on so far that its sliding-window ring no longer holds the rows the
      // shared prompt's end needs (model/kv_cache.h), or its recurrent state's checkpoint has
      // passed the prompt's end (model/recurrent_state.h): this sibling computes its prompt itself.
      slot = kv.Acquire();
      *cached = 0;
    }
  } else {
    slot = kv.Acquire();
  }
  if (parent >= 0 && --pending_shares_[parent] == 0) {
    pending_shares_.erase(parent);
    // No sibling is left to fork it: a finished parent's slot goes back.
    auto it = std::find(retained_.begin(), retained_.end(), parent);
    if (it != retained_.end()) ReleaseRetained(it);
  }
  slot_of_request_[r] = slot;
  return slot;
}

void Scheduler::ReleaseSlot(int64_t r) {
  const auto shares = pending_shares_.find(r);
  if (shares != pending_shares_.end() && shares->second > 0) {
    retained_.push_back(r);  // a sibling still to come forks the prompt from it
    return;
  }
  target_.kv().Release(SlotOf(r));
  slot_of_request_.erase(r);
}

bool Scheduler::Admit(Source& source, int64_t r, Lane& lane) {
  const SequenceRequest& request = source.request(r);
  AdoptReplacement();
  int32_t cached = 0;
  const int32_t slot = AcquireSlot(source, r, &cached);
  source.result(r).forked = cached > 0;
  lane.request = r;
  try {
    if (lane.draft_generation != draft_generation_) MakeDrafter(lane);
    const SpeculationPolicy policy = PolicyFor(request);
    if (policy.plan.max_drafted_nodes() > 0) source.result(r).drafter = lane.drafter->name();
    SessionOptions options = SessionOptionsFor(request, slot, cached);
    if (options.verify_cost && trees_by_concurrency_) {
      // Priced at what this server's forwards took, not at the curve measured at start: on the
      // base pair a 24-row forward served at 1.7 times a 12-row one where the curve said 1.5.
      lane.verify_cost = trees_by_concurrency_->ServedCurve();
      options.verify_cost = &*lane.verify_cost;
    }
    lane.session = std::make_unique<SpeculativeSession>(target_, *lane.drafter, policy, options);
    lane.scheduler_tree = !request.speculation || request.speculation->plan.is_auto();
    Timer busy;
    lane.session->Start(request.prompt);
    stats_.target_busy_seconds += busy.Seconds();
  } catch (const Error& error) {
    lane.request = -1;
    if (!source.TakeFailure(r, error)) throw;  // the run fails; Drive releases the slot
    ReleaseSlot(r);
    return false;
  }
  in_flight_++;
  stats_.max_in_flight = std::max(stats_.max_in_flight, in_flight_);
  return true;
}

void Scheduler::Finish(Source& source, Lane& lane) {
  stats_.times += lane.session->stats().times;
  source.result(lane.request).speculation = lane.session->stats();
  ReleaseSlot(lane.request);
  source.Done(lane.request);
  lane.request = -1;
  --in_flight_;
}

}  // namespace grove
