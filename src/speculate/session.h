// One sequence's speculative decoding, as three phases that a driver calls in turn:
//
//   Draft()              the drafter builds this step's tree (empty: a plain step);
//   AppendVerify(batch)  the root and the tree go into a target Batch, possibly beside other
//                        sequences' trees (each session verifies in its own KV cache);
//   Accept(logits)       after the driver's target Forward: verify this session's rows, commit the
//                        accepted tokens and the next one, compact both caches.
//
// Generate() drives the three alone, one target forward per step; the scheduler, the pipeline and
// the server drive the same calls (several sessions per forward). None of them re-implements a
// step. A session allocates nothing per step once its buffers have grown (a test checks it); the
// one exception is an auto plan measuring the verify cost again, at most once per doubling of the
// context.
//
// Randomness: one key per sequence (SessionOptions::sequence). Draws are (sequence, position, draw)
// counters of the sampling seed (contract 4), so the output does not depend on what else shares a
// batch, nor on timing.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "base/timer.h"
#include "model/model.h"
#include "sample/sampler.h"
#include "speculate/drafter.h"
#include "speculate/speculation.h"
#include "speculate/speculation_stats.h"
#include "speculate/step_planner.h"
#include "speculate/tree_builder.h"
#include "speculate/verify.h"

namespace grove {

struct SessionOptions {
  int32_t n_predict = 128;
  bool stop_at_eog = true;  // stop after an end-of-generation token (needs the target's tokenizer)
  uint64_t sequence = 0;    // the RNG key of this sequence (a server gives each request its own)
  int32_t target_seq = 0;   // the target KV cache this session decodes in
  // The target cache already holds the first cached_prompt tokens of the prompt (a fork of a
  // sequence that shares them, kv_cache_pool.h): the prefill starts after them. At most the prompt
  // less its last token (which the first step feeds).
  int32_t cached_prompt = 0;
  // Keep more than cached_prompt where the target cache holds more of the prompt, token for token
  // (KvCache::MatchingPrefix: what an earlier turn or request left there), and let the drafter's
  // caches keep what they hold of it too (Drafter::ReuseCache): the prefill runs only past it.
  // The output is the same as a cold prefill's (contract 2). Off: the prefill starts at
  // cached_prompt. Models with layers that cannot rewind (prefix_reuse.h) never reuse.
  bool reuse_cache = false;
  // t(n) of the target for a plan chosen elsewhere (the scheduler's auto tree): with it, and under
  // an auto plan with the planner's, a step the drafter announces as cheap is drafted as the chain
  // that curve makes best (speculate/step_planner.h). Must outlive the session.
  const VerifyCostCurve* verify_cost = nullptr;
};

// Checks options.cached_prompt against the prompt and the target cache, drops whatever the cache
// holds past it, and returns it (the first prompt token the prefill must run): 0 when the sliding
// window's ring no longer holds what continuing after it needs (KvCache::ReusablePrefix). With
// options.reuse_cache, the prefix the cache holds of the prompt when that is longer (at most the
// prompt less its last token). Throws grove::Error on an empty prompt, one that fills the
// context, or a cached prefix the cache does not hold.
int32_t KeepCachedPrompt(Model& target, const SessionOptions& options,
                         std::span<const int32_t> prompt);

class SpeculativeSession {
 public:
  // The drafter serves this session alone while it runs. Throws grove::Error if the drafter's
  // vocabulary differs from the target's or the plan's trees do not fit the target's batch.
  SpeculativeSession(Model& target, Drafter& drafter, const SpeculationPolicy& policy,
                     const SessionOptions& options);
  ~SpeculativeSession();

  // Prefills the prompt (at least one token; all but the last go into the target cache) and starts
  // the drafter. Resets the statistics. Throws grove::Error if the prompt does not fit the context.
  void Start(std::span<const int32_t> prompt);
  // True once n_predict tokens were emitted, an end-of-generation token was, or the context is
  // full.
  bool done() const { return done_; }

  void Draft();
  // Appends the root and this step's tree for sequence options.target_seq; every row wants logits.
  void AppendVerify(Batch& batch);
  // `logits` is what the target's Forward returned for the batch. Returns the tokens this step
  // emits (valid until the next call), at most n_predict in all, ending at a stop token.
  std::span<const int32_t> Accept(std::span<const float> logits);
  // The driver's target forward time for this step, for the time split (a shared forward may be
  // attributed as the driver sees fit).
  void RecordVerifyForward(double seconds) { step_.verify_forward += seconds; }
  // Time this step spent waiting on the driver between Draft() and Accept() (queued behind other
  // sequences, or their share of a shared forward): not part of this sequence's time split.
  void RecordWait(double seconds) { step_wait_ += seconds; }

  // Start, then the three phases with one target forward per step until done, calling on_token
  // for each emitted token in order (the stop token included); on_token returns false to stop.
  // Returns the generated tokens.
  std::vector<int32_t> Generate(std::span<const int32_t> prompt,
                                const std::function<bool(int32_t)>& on_token);

  // The tree of the following steps instead of the plan's (a scheduler shrinks trees as more
  // sequences share its forwards): a shape of at most the plan's nodes, copied (its storage is
  // reused: no allocation once it held a tree as large). Static plans only; throws grove::Error
  // otherwise. UsePlanShape returns to the plan's.
  void UseShape(const TokenTree& shape) { planner_.UseShape(shape); }
  void UsePlanShape() { planner_.UsePlanShape(); }

  const SpeculationStats& stats() const { return stats_; }
  // This step's tree (after Draft), e.g. for a live view.
  const TokenTree& tree() const { return draft_.tree(); }
  const Drafter& drafter() const { return drafter_; }
  // This step (after Draft) is a cheap one, drafted as a chain of its own depth.
  bool cheap_step() const { return planner_.cheap_step(); }
  // The part of this step's tree (after Draft) that was planned, without a tail past it, and the
  // nodes of it that the last Accept accepted (the tree and accepted_nodes() when there was no
  // tail); valid until the next Draft. What the planners learn from.
  const TokenTree& planned_tree() const { return planner_.planned_tree(tree()); }
  std::span<const int32_t> planned_accepted() const {
    return planner_.planned_accepted(accepted_nodes());
  }
  // The nodes of tree() the last Accept accepted, root to leaf (valid until the next Draft).
  std::span<const int32_t> accepted_nodes() const { return result_.accepted; }
  const SpeculationPolicy& policy() const { return policy_; }
  // The auto planner's current choice, for `auto` plans (null otherwise).
  const AutoPlanner* planner() const { return planner_.auto_planner(); }
  // What chooses this session's trees.
  const StepPlanner& step_planner() const { return planner_; }

 private:
  bool IsStop(int32_t token) const;
  // Runs the prompt but its last token through the target from `cached` on; hands the drafter the
  // features when it reads them.
  void Prefill(std::span<const int32_t> prompt, int32_t cached);
  void RecordTreeStats(const TokenTree& tree);
  // One debug line of the step just verified: its kind, size, acceptance, times and the why.
  void LogStep(const TokenTree& tree) const;
  // Accept's phases: the verification rule over this session's rows of the logits (result_);
  // the accepted nodes kept in the target's cache and the drafter's; the step counted; the
  // accepted tokens emitted and the root moved past them. Then the planner is shown the step.
  void VerifyRows(std::span<const float> logits);
  // The target's recurrent state seconds of this session's sequence (0 without such layers).
  double TargetStateSeconds() const;
  void CommitAccepted();
  void HandOverFeatures();  // to a drafter that reads the target's features
  void CountStep(const TokenTree& tree);
  void EmitAccepted(const TokenTree& tree);

  Model& target_;
  Drafter& drafter_;
  TargetFeatureReader* feature_reader_;  // the drafter's, when it reads the target's features
  SpeculationPolicy policy_;
  SessionOptions options_;
  StepPlanner planner_;  // reads policy_
  TreeBuilder builder_;
  DraftState draft_;
  Sampler target_sampler_;
  Verifier verifier_;
  CounterRng rng_;
  VerifyResult result_;
  std::vector<float> target_row_;  // (n_vocab) the distribution of the row the rule reads now
  std::vector<int32_t> kept_slots_;
  std::vector<int32_t> drafted_accepted_;  // the accepted nodes as the drafter knows them
  std::vector<int32_t> emitted_;
  Batch batch_;  // Generate's own batch
  int32_t root_ = -1;
  int32_t root_position_ = 0;
  int32_t first_row_ = 0;         // this session's first logits row in the batch it was appended to
  int32_t root_batch_index_ = 0;  // the root's index in that batch (its hidden-state row)
  std::vector<float> features_;   // the target's features of the accepted path, for the drafter
  Timer step_timer_;              // from Draft() to the end of Accept()
  Timer generation_timer_;        // from the end of Start (SpeculationStats::total_seconds)
  StepTimes step_;                // this step's parts
  double step_wait_ = 0.0;        // RecordWait, this step
  double state_seconds_ = 0.0;    // the target's recurrent state time of this sequence so far
  bool done_ = true;
  SpeculationStats stats_;
};

struct PlainTiming;
// One generation of a command that may speculate (run, chat): with `session` when there is one,
// otherwise plain decoding of `target` with `sampling` (its timing into *plain_timing).
std::vector<int32_t> GenerateSpeculativeOrPlain(SpeculativeSession* session, Model& target,
                                                std::span<const int32_t> prompt,
                                                const SamplerParams& sampling,
                                                const SessionOptions& options,
                                                const std::function<bool(int32_t)>& on_token,
                                                PlainTiming* plain_timing);

}  // namespace grove
