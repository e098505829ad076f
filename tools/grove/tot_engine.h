// What `grove tot` and `grove tot-bench` share: the target and draft loaded once (their shared
// parameters), the speculation policy resolved once, and a Scheduler per policy over a target
// forward context of its own (so each policy gets the thread count it runs best with, without a
// second copy of the weights).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "model/model.h"
#include "sample/sampler.h"
#include "schedule/scheduler.h"
#include "tokenize/tokenizer.h"

namespace grove::cli {

struct TotModelOptions {
  std::string model;  // empty: the bundled pair
  std::string draft;  // path, "ngram", or empty (the bundled draft with the bundled target)
  std::string pair;   // bundled pair when no -m (empty: the default)
  std::string spec = "auto";
  std::string verify;  // empty: greedy at temperature 0, else target-sample
  std::string accept_file;
  // Temperature 0.7 by default (the Tree of Thoughts paper's); the filters as in every command.
  SamplerParams sampling{.temperature = 0.7f};
  int64_t seed = 1;
  int threads = 0;                 // serial policies' target threads (0: all hardware threads)
  int overlap_threads = 0;         // seed/batched target threads (0: threads - 1, at least 1)
  int32_t slots = 16;              // sequences in flight at most (target KV slots)
  int32_t n_ctx = 0;               // 0: the model's
  std::string cache_type = "f32";  // --cache-type: every context's and lane's KV cache
  int32_t node_budget = kDefaultNodeBudget;  // batched: tokens per verify forward
  bool verbose = false;
};

// Registers the options above on a command.
void AddTotModelOptions(CLI::App& cmd, TotModelOptions& o);

class TotEngine {
 public:
  // Loads the models, prints what it loaded to stderr. Throws grove::Error.
  explicit TotEngine(TotModelOptions options);

  const Tokenizer& tokenizer() const { return *target_->tokenizer(); }
  const TotModelOptions& options() const { return options_; }
  const SpeculationPolicy& speculation() const { return speculation_; }
  // A scheduler for `policy` over a target context of its own (valid while the engine lives; the
  // previous policy's context is freed), its drafters' suffix store emptied.
  Scheduler& SchedulerFor(SchedulePolicy policy);
  // Target threads the policy runs with.
  int TargetThreads(SchedulePolicy policy) const;
  // Bytes: one KV slot of the target, and the draft lanes' state (KV and activations) per lane.
  uint64_t target_slot_bytes() const { return target_->kv().bytes_per_slot(); }
  uint64_t draft_lane_bytes() const;
  uint64_t weight_bytes() const;

 private:
  TotModelOptions options_;
  std::unique_ptr<Model> target_;  // the first context (tokenizer, warm-up)
  std::optional<DraftSource> draft_;
  SpeculationPolicy speculation_;
  std::unique_ptr<Model> context_;  // the current policy's
  std::unique_ptr<Scheduler> scheduler_;
};

}  // namespace grove::cli
