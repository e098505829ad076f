#include "tot_engine.h"

#include <algorithm>
#include <cstdio>
#include <optional>

#include "base/error.h"
#include "base/thread_pool.h"
#include "bundled_models.h"
#include "engine_options.h"
#include "option_checks.h"
#include "sampling_options.h"
#include "speculate/command_speculation.h"
#include "speculate/draft_source.h"
#include "speculate/tree_plan.h"

namespace grove::cli {

void AddTotModelOptions(CLI::App& cmd, TotModelOptions& o) {
  AddModelOption(cmd, o.model, ModelRole::kTarget);
  AddPairOption(cmd, o.pair);
  AddDraftOption(cmd, o.draft, DraftRole::kDrafter);
  cmd.add_option(
         "--spec", o.spec,
         "Tree of every speculative sequence: auto (one Sequoia tree per policy, chosen from "
         "the target's verify curve measured on that policy's threads when the search starts, "
         "the draft's cost and --accept), chain:K, kconfig:a,b,..., sequoia:N[,D], opt:N,DELTA, "
         "file:T.json")
      ->capture_default_str();
  cmd.add_option("--verify", o.verify,
                 "Verification rule (default: greedy at temperature 0, else target-sample, whose "
                 "draws are plain sampling's, so every policy gives the same text)");
  AddAcceptOption(cmd, o.accept_file);
  // ToT samples its thoughts: --temp defaults to 0.7 (tot_engine.h).
  AddSamplingOptions(cmd, o.sampling);
  cmd.add_option("-s,--seed", o.seed, "Seed of sampling and of the search's sequence keys")
      ->capture_default_str();
  AddThreadsOption(cmd, o.threads, "of the target for serial policies");
  cmd.add_option("--overlap-threads", o.overlap_threads,
                 "Target threads for seed and batched, whose drafters run beside the target (0: "
                 "--threads less one, at least 1)")
      ->capture_default_str()
      ->check(ThreadCount());
  cmd.add_option("--slots", o.slots, "Most sequences in flight (target KV slots)")
      ->capture_default_str();
  AddContextOption(cmd, o.n_ctx);
  AddCacheTypeOption(cmd, o.cache_type);
  cmd.add_option("--node-budget", o.node_budget,
                 "batched: most tokens (roots and tree nodes) one verify forward packs")
      ->capture_default_str();
  cmd.add_flag("-v,--verbose", o.verbose, "Print debug diagnostics");
}

TotEngine::TotEngine(TotModelOptions o) : options_(std::move(o)) {
  TotModelOptions& opt = options_;
  DefaultToBundledPair(opt.model, opt.draft, opt.pair, BundledDraft::kMixture);
  if (opt.slots < 1 || opt.slots > 1024) Fail("--slots ", opt.slots, " out of range 1..1024");
  if (opt.threads < 0 || opt.overlap_threads < 0) Fail("thread counts must be >= 0");
  if (opt.seed < 0) Fail("--seed must be >= 0");
  opt.sampling.seed = static_cast<uint64_t>(opt.seed);
  opt.sampling.Validate();
  if (opt.verify.empty() && !opt.sampling.greedy()) opt.verify = "target-sample";
  target_ = Model::Load(opt.model, {.n_threads = opt.threads,
                                    .n_ctx = opt.n_ctx,
                                    .cache_type = ParseKvCacheType(opt.cache_type)});
  if (!target_->tokenizer()) Fail("'", opt.model, "' has no tokenizer");
  // The draft's parameters, checked against the target; the scheduler's lanes make forward
  // contexts of their own over them.
  if (!opt.draft.empty())
    draft_ = DraftSource::Open(opt.draft, *target_->parameters(), *target_->shared_pool());
  const DrafterTraits* drafter = draft_ ? &draft_->traits() : nullptr;
  if (drafter) {
    speculation_ = ResolveCommandSpeculation(
        {.request = {.plan = opt.spec, .verify = opt.verify},
         .accept_file = opt.accept_file,
         .default_accept_file = BundledAcceptanceFor(opt.model, opt.draft, opt.sampling.greedy())},
        target_->max_batch(), *drafter, opt.sampling);
  } else {
    speculation_.sampling = opt.sampling;
  }
  target_->WarmUp();
  std::fprintf(stderr, "[grove] target %s, draft %s; tree %s, rule %s\n", opt.model.c_str(),
               opt.draft.empty() ? "none" : opt.draft.c_str(),
               drafter ? speculation_.plan.text.c_str() : "-",
               drafter ? std::string(VerifyRuleName(speculation_.rule)).c_str() : "-");
}

int TotEngine::TargetThreads(SchedulePolicy policy) const {
  const int all = PoolThreadCount(options_.threads);
  if (!DraftsConcurrently(policy)) return all;
  return options_.overlap_threads > 0 ? options_.overlap_threads : std::max(1, all - 1);
}

Scheduler& TotEngine::SchedulerFor(SchedulePolicy policy) {
  if (IsSpeculative(policy) && options_.draft.empty()) {
    Fail("policy ", SchedulePolicyName(policy), " speculates and needs a draft (--draft)");
  }
  scheduler_.reset();
  context_.reset();
  // Every scheduler starts with an empty suffix store, as a fresh process would: one policy's
  // search must not draft from the outputs of the policies (or repetitions) run before it.
  if (draft_ && draft_->suffix_store()) draft_->suffix_store()->Clear();
  context_ = Model::Create(target_->parameters(), {.n_threads = TargetThreads(policy),
                                                   .n_ctx = target_->n_ctx(),
                                                   .n_seq = options_.slots,
                                                   .cache_type = target_->cache_type()});
  context_->WarmUp();
  scheduler_ = std::make_unique<Scheduler>(
      *context_, draft_ ? *draft_ : DraftSource::PromptLookup(),
      SchedulerOptions{
          .policy = policy, .speculation = speculation_, .node_budget = options_.node_budget});
  return *scheduler_;
}

uint64_t TotEngine::draft_lane_bytes() const {
  if (!draft_ || !draft_->model()) return 0;
  auto lane = Model::Create(draft_->model(), {.n_threads = 1,
                                              .n_ctx = target_->n_ctx(),
                                              .max_batch = 128,
                                              .cache_type = target_->cache_type()});
  return lane->kv().bytes_per_slot() + lane->activation_bytes();
}

uint64_t TotEngine::weight_bytes() const {
  return target_->weight_bytes() +
         (draft_ && draft_->model() ? draft_->model()->weight_bytes() : 0);
}

}  // namespace grove::cli
