// Many sequences on one target: KV slots acquire, release and fork (a fork continues exactly as
// its parent would); every scheduling policy gives each sequence the tokens it gets alone, at
// temperature 0 and above, with more sequences than slots (admission in turns), with siblings
// that fork a shared prompt, and whatever the drafting threads' timing; batched verification
// packs several sequences into one forward; bad requests and plans are refused.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "base/error.h"
#include "schedule/draft_rounds.h"
#include "schedule/frozen_auto_plan.h"
#include "schedule/request_feed.h"
#include "schedule/scheduler.h"
#include "speculate/model_drafter.h"
#include "speculate/ngram_drafter.h"
#include "speculate/plain_decoding.h"
#include "speculate/suffix_store.h"
#include "speculate/verify_cost_cache.h"
#include "test_support.h"
#include "tokenize/tokenizer.h"

namespace grove {
namespace {

const std::string kTarget = std::string(GROVE_MODELS_DIR) + "/grove-target.gguf";
const std::string kDraft = std::string(GROVE_MODELS_DIR) + "/grove-draft.gguf";

TEST(KvCachePool, AcquireReleaseAndErrors) {
  KvCachePool pool(2, 1, 8, 4);
  EXPECT_EQ(pool.Acquire(), 0);
  EXPECT_EQ(pool.Acquire(), 1);
  EXPECT_EQ(pool.in_use(), 2);
  EXPECT_THROW(pool.Acquire(), Error);
  pool.Release(0);
  EXPECT_FALSE(pool.acquired(0));
  EXPECT_THROW(pool.Release(0), Error);
  EXPECT_THROW(pool.Fork(0, 0), Error);  // not acquired
  EXPECT_EQ(pool.Acquire(), 0);
  EXPECT_EQ(pool.bytes_per_slot(), 2u * sizeof(float) * 1 * 8 * 4);
}

// A fork holds the parent's keys and values bit for bit, and a token continuing the fork gets the
// logits it gets continuing the parent.
TEST(KvCachePool, ForkContinuesAsTheParent) {
  auto model = testing::MakeRandomModel(testing::TinySpec(GgmlType::kQ8_0, 5),
                                        {.n_threads = 1, .n_ctx = 64, .n_seq = 3});
  KvCachePool& kv = model->kv();
  const int32_t parent = kv.Acquire();
  const std::vector<int32_t> prompt = {1, 5, 9, 2, 7, 3};
  Batch batch;
  model->ForwardChain(prompt, 0, parent, batch, /*want_logits=*/false);
  EXPECT_THROW(kv.Fork(parent, 7), Error);  // more than the parent holds
  const int32_t child = kv.Fork(parent, 4);
  ASSERT_NE(child, parent);
  const KvCache& a = model->cache(parent);
  const KvCache& b = model->cache(child);
  ASSERT_EQ(b.length(), 4);
  EXPECT_EQ(b.chain_length(), 4);
  for (int32_t slot = 0; slot < 4; ++slot) {
    EXPECT_EQ(b.position(slot), a.position(slot));
    EXPECT_EQ(0, std::memcmp(a.key(0, slot), b.key(0, slot), sizeof(float) * a.kv_dim()));
    EXPECT_EQ(0, std::memcmp(a.value(1, slot), b.value(1, slot), sizeof(float) * a.kv_dim()));
  }
  // Continue the child at position 4 with token 11, and the parent truncated to 4 likewise.
  const std::vector<int32_t> next = {11};
  const std::span<const float> forked = model->ForwardChain(next, 4, child, batch, true);
  const std::vector<float> from_fork(forked.begin(), forked.end());
  model->cache(parent).Truncate(4);
  const std::span<const float> original = model->ForwardChain(next, 4, parent, batch, true);
  ASSERT_EQ(from_fork.size(), original.size());
  EXPECT_EQ(0, std::memcmp(from_fork.data(), original.data(), sizeof(float) * original.size()));
  kv.Release(child);
  kv.Release(parent);
  EXPECT_EQ(kv.in_use(), 0);
}

// Weights are loaded once: a second context over the same parameters holds no copy of them.
TEST(Model, ContextsShareParameters) {
  ASSERT_TRUE(testing::FileExists(kDraft)) << kDraft;
  auto first = Model::Load(kDraft, {.n_threads = 1, .n_ctx = 64});
  auto second = Model::Create(first->parameters(), {.n_threads = 1, .n_ctx = 32, .n_seq = 2});
  EXPECT_EQ(&first->config(), &second->config());
  EXPECT_EQ(first->parameters().use_count(), 2);
  EXPECT_EQ(second->n_seq(), 2);
  EXPECT_EQ(second->n_ctx(), 32);
  // Same weights, same logits.
  Batch batch;
  const std::vector<int32_t> tokens = {4, 8, 15, 16};
  const std::span<const float> a = first->ForwardChain(tokens, 0, 0, batch, true);
  const std::vector<float> from_first(a.begin(), a.end());
  const std::span<const float> b = second->ForwardChain(tokens, 0, 1, batch, true);
  ASSERT_EQ(b.size(), from_first.size());
  EXPECT_EQ(0, std::memcmp(b.data(), from_first.data(), sizeof(float) * b.size()));
}

class SchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(testing::FileExists(kTarget)) << kTarget;
    // Three slots for five requests: admission takes turns, and retained parents compete.
    target_ = Model::Load(kTarget, {.n_threads = 2, .n_ctx = 192, .n_seq = 3});
    auto draft = Model::Load(kDraft, {.pool = target_->shared_pool(), .n_ctx = 192});
    draft_ = draft->parameters();
    const Tokenizer& tok = *target_->tokenizer();
    const char* texts[] = {"Input: 4 9 10 13\nPossible next steps:\n", "Value: 3 8 8\n",
                           "Once upon a time", "Tom has 5 apples. He"};
    std::vector<std::vector<int32_t>> prompts;
    for (const char* t : texts) prompts.push_back(tok.Encode(t, tok.add_bos_by_default()));
    // Requests 0 and 1 share a prompt (a fork), then 2, 3, and 4 forks 0 after 0 may be done.
    const int order[] = {0, 0, 1, 2, 0};
    for (int i = 0; i < 5; ++i) {
      SequenceRequest q{.prompt = prompts[order[i]], .sequence = 100u + i, .n_predict = 40};
      if (i == 1 || i == 4) q.shares_prompt_with = 0;
      requests_.push_back(q);
    }
    requests_[3].prompt = prompts[3];
  }

  SpeculationPolicy PolicyFor(const std::string& plan, const SamplerParams& sampling) {
    ModelDrafter drafter(*Model::Create(draft_, {.n_threads = 1, .n_ctx = 64}), *target_);
    // Target-sample verification draws what plain sampling draws, so every policy, serial-ar
    // included, must give the same tokens at temperature > 0 too.
    return ResolveSpeculation({.plan = plan, .verify = sampling.greedy() ? "" : "target-sample"},
                              {.acceptance = {0.9, 0.05, 0.02}}, drafter, sampling);
  }

  // Each request alone: plain decoding in slot 0 (target-sample and greedy reproduce it).
  std::vector<std::vector<int32_t>> Alone(const SamplerParams& sampling) {
    std::vector<std::vector<int32_t>> out;
    for (const SequenceRequest& q : requests_) {
      out.push_back(GeneratePlain(*target_, q.prompt, sampling,
                                  {.n_predict = q.n_predict, .sequence = q.sequence}, {}));
    }
    return out;
  }

  std::unique_ptr<Model> target_;
  // Each lane's drafter: a forward context of its own over the draft's parameters.
  DraftSource Source() const { return DraftSource::FromModel(draft_, *target_->parameters()); }
  std::shared_ptr<const ModelParameters> draft_;
  std::vector<SequenceRequest> requests_;
};

TEST_F(SchedulerTest, EveryPolicyGivesEachSequenceWhatItGetsAlone) {
  const SamplerParams greedy{.temperature = 0.0f};
  const SamplerParams hot{.temperature = 0.8f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = 9};
  for (const SamplerParams& sampling : {greedy, hot}) {
    const auto alone = Alone(sampling);
    for (const char* plan : {"sequoia:8", "kconfig:2,2,1", "opt:8,0.05"}) {
      const SpeculationPolicy speculation = PolicyFor(plan, sampling);
      for (SchedulePolicy policy : kAllSchedulePolicies) {
        SCOPED_TRACE(std::string(plan) + " " + std::string(SchedulePolicyName(policy)) +
                     " temperature " + std::to_string(sampling.temperature));
        Scheduler scheduler(*target_, Source(),
                            {.policy = policy, .speculation = speculation, .node_budget = 40});
        // Twice: the drafting threads' timing differs between runs, the tokens may not.
        for (int run = 0; run < 2; ++run) {
          const std::vector<SequenceResult> results = scheduler.Run(requests_);
          ASSERT_EQ(results.size(), requests_.size());
          for (std::size_t i = 0; i < results.size(); ++i) {
            EXPECT_EQ(results[i].tokens, alone[i]) << "sequence " << i << " run " << run;
          }
          const ScheduleStats& stats = scheduler.stats();
          EXPECT_GE(stats.forks, 1);  // request 1 forks request 0, which is still in flight
          EXPECT_TRUE(results[1].forked);
          EXPECT_LE(stats.max_in_flight, target_->n_seq());
          EXPECT_EQ(target_->kv().in_use(), 0);
          EXPECT_GT(stats.target_busy_seconds, 0.0);
          EXPECT_LE(stats.target_busy_seconds, stats.wall_seconds * 1.01);
          if (policy == SchedulePolicy::kSerialAr) {
            EXPECT_EQ(stats.tau(), 1.0);
          }
        }
      }
    }
  }
}

TEST_F(SchedulerTest, BatchedVerifiesSeveralSequencesPerForward) {
  const SpeculationPolicy speculation = PolicyFor("sequoia:8", {.temperature = 0.0f});
  Scheduler seed(*target_, Source(), {.policy = SchedulePolicy::kSeed, .speculation = speculation});
  seed.Run(requests_);
  EXPECT_EQ(seed.stats().sequences_per_forward(), 1.0);  // SEED verifies one tree per forward
  EXPECT_EQ(seed.stats().queued_drafts, seed.stats().steps);
  Scheduler batched(*target_, Source(),
                    {.policy = SchedulePolicy::kBatched, .speculation = speculation});
  batched.Run(requests_);
  // Three drafters draft while the target verifies: by the time a forward ends, more than one
  // draft waits, so forwards verify more than one sequence on average.
  EXPECT_GT(batched.stats().sequences_per_forward(), 1.2);
  EXPECT_LT(batched.stats().target_forwards, seed.stats().target_forwards);
}

// A target of one slot has one lane, whose draft never overlaps the target's forward: the lane
// drafts on the target's pool (all its cores) instead of a pool of one of its own; with more
// slots a lane borrows that pool while its sequence is the one in flight. Same request, same
// fixed tree at one and two slots: the draft's ops dispatched on the target's pool in both, and
// the same tokens.
TEST_F(SchedulerTest, ALaneAloneInFlightDraftsOnTheTargetsPool) {
  const SpeculationPolicy speculation = PolicyFor("chain:4", {.temperature = 0.0f});
  const std::vector<SequenceRequest> one = {
      {.prompt = requests_[2].prompt, .sequence = 1, .n_predict = 24}};
  std::vector<uint64_t> dispatches;
  std::vector<std::vector<int32_t>> tokens;
  for (int32_t slots : {1, 2}) {
    auto target =
        Model::Create(target_->parameters(), {.n_threads = 2, .n_ctx = 96, .n_seq = slots});
    Scheduler scheduler(
        *target, Source(),
        {.policy = SchedulePolicy::kBatched, .speculation = speculation, .stop_at_eog = false});
    const uint64_t before = target->pool().dispatch_count();
    const std::vector<SequenceResult> results = scheduler.Run(one);
    dispatches.push_back(target->pool().dispatch_count() - before);
    tokens.push_back(results.at(0).tokens);
    EXPECT_EQ(scheduler.stats().rounds.rounds, results[0].steps) << slots;  // batched rounds
  }
  EXPECT_EQ(tokens[0], tokens[1]);
  EXPECT_EQ(tokens[0].size(), 24u);
  // The same target forwards dispatch the same loops; one slot's also dispatch the draft's.
  // Two slots: the lane borrows the target's pool while its sequence is the one in flight; only
  // the draft's prefill at admission, before the lane may borrow, runs on its own thread (3
  // dispatches here; every draft op, 27, without borrowing).
  EXPECT_LE(dispatches[0] - dispatches[1], 5u) << dispatches[0] << " vs " << dispatches[1];
}

TEST_F(SchedulerTest, NgramLanesNeedNoDraftModel) {
  const SamplerParams greedy{.temperature = 0.0f};
  const auto alone = Alone(greedy);
  NgramDrafter ngram(target_->config().n_vocab, target_->n_ctx());
  const SpeculationPolicy speculation = ResolveSpeculation({.plan = "chain:3"}, {}, ngram, greedy);
  Scheduler scheduler(*target_, DraftSource::PromptLookup(),
                      {.policy = SchedulePolicy::kSeed, .speculation = speculation});
  const auto results = scheduler.Run(requests_);
  for (std::size_t i = 0; i < results.size(); ++i) EXPECT_EQ(results[i].tokens, alone[i]);
}

// Lanes of a mixture (the draft model and suffix drafting, one store for all lanes) give each
// sequence what it gets alone under every policy; the store keeps every finished sequence.
TEST_F(SchedulerTest, MixtureLanesShareOneSuffixStore) {
  const SamplerParams greedy{.temperature = 0.0f};
  const auto alone = Alone(greedy);
  std::vector<DraftSource> members;
  members.push_back(Source());
  members.push_back(DraftSource::Suffix());
  const DraftSource mixture = DraftSource::Mixture(std::move(members));
  // With a draft model its rows are that model's distribution where children are sampled; a
  // mixture of guessers ranks, always.
  EXPECT_FALSE(mixture.traits().deterministic);
  EXPECT_EQ(mixture.traits().name, "draft-model+suffix");
  std::vector<DraftSource> guessers;
  guessers.push_back(DraftSource::PromptLookup());
  guessers.push_back(DraftSource::Suffix());
  EXPECT_TRUE(DraftSource::Mixture(std::move(guessers)).traits().deterministic);
  const SpeculationPolicy speculation =
      ResolveSpeculation({.plan = "kconfig:2,1"}, {}, mixture.traits(), greedy);
  int64_t finished = 0;
  for (SchedulePolicy policy :
       {SchedulePolicy::kSerialSd, SchedulePolicy::kSeed, SchedulePolicy::kBatched}) {
    SCOPED_TRACE(std::string(SchedulePolicyName(policy)));
    Scheduler scheduler(*target_, mixture, {.policy = policy, .speculation = speculation});
    const auto results = scheduler.Run(requests_);
    for (std::size_t i = 0; i < results.size(); ++i) EXPECT_EQ(results[i].tokens, alone[i]);
    finished += static_cast<int64_t>(results.size());
    EXPECT_EQ(mixture.suffix_store()->documents(), finished);
  }
  std::vector<DraftSource> two_models;
  two_models.push_back(Source());
  two_models.push_back(Source());
  EXPECT_THROW(DraftSource::Mixture(std::move(two_models)), Error);
}

// A mixture of three (DRAFT.gguf+ngram+suffix), opened by name: its lanes give each sequence what
// it gets alone under every policy, greedy and sampled, and share one store of outputs.
TEST_F(SchedulerTest, ThreeMemberMixtureLanesGiveWhatEachSequenceGetsAlone) {
  const DraftSource mixture =
      DraftSource::Open(kDraft + "+ngram+suffix", *target_->parameters(), *target_->shared_pool());
  EXPECT_EQ(mixture.traits().name, "draft-model+ngram+suffix");
  ASSERT_NE(mixture.suffix_store(), nullptr);
  const SamplerParams greedy{.temperature = 0.0f};
  const SamplerParams hot{.temperature = 0.8f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = 5};
  int64_t finished = 0;
  for (const SamplerParams& sampling : {greedy, hot}) {
    const auto alone = Alone(sampling);
    const SpeculationPolicy speculation = ResolveSpeculation(
        {.plan = "kconfig:2,1", .verify = sampling.greedy() ? "" : "target-sample"}, {},
        mixture.traits(), sampling);
    for (SchedulePolicy policy :
         {SchedulePolicy::kSerialSd, SchedulePolicy::kSeed, SchedulePolicy::kBatched}) {
      SCOPED_TRACE(std::string(SchedulePolicyName(policy)) + " temperature " +
                   std::to_string(sampling.temperature));
      Scheduler scheduler(*target_, mixture, {.policy = policy, .speculation = speculation});
      const auto results = scheduler.Run(requests_);
      for (std::size_t i = 0; i < results.size(); ++i) {
        EXPECT_EQ(results[i].tokens, alone[i]) << "sequence " << i;
        EXPECT_EQ(results[i].drafter, "draft-model+ngram+suffix");
      }
      finished += static_cast<int64_t>(results.size());
      EXPECT_EQ(mixture.suffix_store()->documents(), finished);
    }
  }
}

// A swap keeps what the suffix drafters learnt when the new source shares the old one's store
// (as a server's swap opens it): a request served before the swap is drafted from its earlier
// output after it, by the new drafter, in a few long steps; a source with a store of its own
// starts from nothing.
TEST_F(SchedulerTest, ASwapToASourceSharingTheStoreKeepsWhatItLearnt) {
  const SamplerParams greedy{.temperature = 0.0f};
  const std::vector<SequenceRequest> one = {
      {.prompt = requests_[2].prompt, .sequence = 7, .n_predict = 40}};
  const std::vector<int32_t> alone = GeneratePlain(
      *target_, one[0].prompt, greedy, {.n_predict = 40, .stop_at_eog = false, .sequence = 7}, {});
  auto store = std::make_shared<SuffixStore>();
  const DraftSource suffix = DraftSource::Suffix(store);
  const SpeculationPolicy speculation =
      ResolveSpeculation({.plan = "chain:8"}, {}, suffix.traits(), greedy);
  Scheduler scheduler(
      *target_, suffix,
      {.policy = SchedulePolicy::kSeed, .speculation = speculation, .stop_at_eog = false});
  const SequenceResult first = scheduler.Run(one).at(0);
  EXPECT_EQ(first.tokens, alone);
  ASSERT_EQ(store->documents(), 1);
  // Swapped to a mixture of prompt lookup and suffix drafting over the same store.
  scheduler.ReplaceDraft(
      DraftSource::Open("ngram+suffix", *target_->parameters(), *target_->shared_pool(), store));
  const SequenceResult again = scheduler.Run(one).at(0);
  EXPECT_EQ(again.tokens, alone);
  EXPECT_EQ(again.drafter, "ngram+suffix");
  // Each step drafts a chain of 8 that the earlier output matches: 9 tokens a step but at the
  // end, against the steps of a first answer drafted from its own text alone.
  EXPECT_LE(again.steps, 6) << "first: " << first.steps;
  EXPECT_LT(again.steps, first.steps);
  EXPECT_EQ(store->documents(), 2);
  // A source with a store of its own knows nothing of the request.
  scheduler.ReplaceDraft(
      DraftSource::Open("ngram+suffix", *target_->parameters(), *target_->shared_pool()));
  const SequenceResult fresh = scheduler.Run(one).at(0);
  EXPECT_EQ(fresh.tokens, alone);
  EXPECT_GT(fresh.steps, again.steps);
  EXPECT_EQ(store->documents(), 2);
}

TEST_F(SchedulerTest, AutoBecomesOneMeasuredTreePerScheduler) {
  const SamplerParams greedy{.temperature = 0.0f};
  const auto alone = Alone(greedy);
  const SpeculationPolicy automatic = PolicyFor("auto", greedy);
  for (SchedulePolicy policy :
       {SchedulePolicy::kSerialSd, SchedulePolicy::kSeed, SchedulePolicy::kBatched}) {
    SCOPED_TRACE(std::string(SchedulePolicyName(policy)));
    Scheduler scheduler(*target_, Source(), {.policy = policy, .speculation = automatic});
    EXPECT_TRUE(scheduler.options().speculation.plan.is_auto());  // chosen when requests arrive
    const auto results = scheduler.Run(requests_);
    const TreePlan& plan = scheduler.options().speculation.plan;
    EXPECT_EQ(plan.kind, TreeKind::kSequoia);
    ASSERT_TRUE(plan.sequoia_choice.has_value());
    EXPECT_EQ(plan.shape.size() + 1, plan.sequoia_choice->size);  // the root is not a node
    EXPECT_EQ(plan.text.rfind("auto: ", 0), 0u) << plan.text;
    // Measuring left nothing behind: no slot held, and every sequence is what it is alone.
    EXPECT_EQ(target_->kv().in_use(), 0);
    for (std::size_t i = 0; i < results.size(); ++i) EXPECT_EQ(results[i].tokens, alone[i]);
    const std::string chosen = plan.text;
    scheduler.Run(requests_);
    EXPECT_EQ(scheduler.options().speculation.plan.text, chosen);  // once per scheduler
  }
}

// What a server needs: every step's tokens streamed as they are accepted, and a consumer that
// goes away cancelling its sequence at that step without disturbing the others.
TEST_F(SchedulerTest, StreamsEachStepAndCancelsWhenTheConsumerStops) {
  const SamplerParams greedy{.temperature = 0.0f};
  const auto alone = Alone(greedy);
  const SpeculationPolicy speculation = PolicyFor("sequoia:8", greedy);
  constexpr std::size_t kCancelled = 2, kCancelAfter = 5;
  for (SchedulePolicy policy : kAllSchedulePolicies) {
    SCOPED_TRACE(std::string(SchedulePolicyName(policy)));
    std::vector<SequenceRequest> requests = requests_;
    std::vector<std::vector<int32_t>> streamed(requests.size());
    std::vector<int> calls(requests.size(), 0);
    std::vector<int> views(requests.size(), 0);
    for (std::size_t i = 0; i < requests.size(); ++i) {
      // A live view sees each step's tree and the accepted path: the emitted tokens are the
      // accepted nodes' tokens and one more (fewer at n_predict or a stop token).
      requests[i].on_step = [&, i](const StepView& step) {
        ++views[i];
        for (std::size_t k = 0; k < step.accepted.size(); ++k) {
          const TreeNode& node = step.tree.node(step.accepted[k]);
          EXPECT_EQ(node.depth, static_cast<int32_t>(k) + 1);
          EXPECT_EQ(node.parent, k == 0 ? -1 : step.accepted[k - 1]);
          if (k < step.tokens.size()) {
            EXPECT_EQ(node.token, step.tokens[k]);
          }
        }
      };
      requests[i].on_tokens = [&, i](std::span<const int32_t> tokens) {
        EXPECT_FALSE(tokens.empty());
        ++calls[i];
        streamed[i].insert(streamed[i].end(), tokens.begin(), tokens.end());
        return !(i == kCancelled && streamed[i].size() >= kCancelAfter);
      };
    }
    Scheduler scheduler(*target_, Source(), {.policy = policy, .speculation = speculation});
    const auto results = scheduler.Run(requests);
    for (std::size_t i = 0; i < results.size(); ++i) {
      EXPECT_EQ(streamed[i], results[i].tokens) << "sequence " << i;
      EXPECT_EQ(calls[i], results[i].steps) << "one call per step, sequence " << i;
      EXPECT_EQ(views[i], IsSpeculative(policy) ? calls[i] : 0) << "sequence " << i;
      if (i == kCancelled) {
        EXPECT_TRUE(results[i].cancelled);
        ASSERT_GE(results[i].tokens.size(), kCancelAfter);
        ASSERT_LT(results[i].tokens.size(), alone[i].size());
        EXPECT_TRUE(
            std::equal(results[i].tokens.begin(), results[i].tokens.end(), alone[i].begin()));
      } else {
        EXPECT_FALSE(results[i].cancelled);
        EXPECT_EQ(results[i].tokens, alone[i]) << "sequence " << i;
      }
    }
    EXPECT_EQ(target_->kv().in_use(), 0);
  }
}

// Batched verification: a tree's worth depends on how many share the forward and on what a step
// costs besides it. On a compute-bound curve (t(n) = 0.1 + 0.05 n ms) with nothing besides,
// sixteen sequences sharing a forward get smaller trees than one alone; with a large step cost,
// the largest tree that fits; never beyond the node budget or the tree for one.
// SEED's queue serves drafts in the order they finished (a last-in-first-out queue gives the same
// tokens but starves the sequence that drafted first), and batched rounds take the drafts behind
// the head in that order while they fit.
TEST(DraftRounds, VerifiesDraftsInTheOrderTheyFinished) {
  DraftRounds rounds(3);
  for (std::size_t l = 0; l < 3; ++l) rounds.AllowDraft(l);
  const std::size_t finish_order[] = {2, 0, 1};
  for (std::size_t l : finish_order) {
    ASSERT_TRUE(rounds.WaitToDraft(l));  // allowed: returns at once
    rounds.Drafted(l);
  }
  EXPECT_LE(rounds.enqueued(2), rounds.enqueued(0));
  EXPECT_LE(rounds.enqueued(0), rounds.enqueued(1));
  std::vector<std::size_t> taken;
  const auto one = [](std::size_t) { return false; };
  for (std::size_t l : finish_order) {
    rounds.TakeReady(taken, std::nullopt, one);
    EXPECT_EQ(taken, std::vector<std::size_t>{l});
  }
  // Batched: the drafts behind the head join while take_more accepts them, in order.
  for (std::size_t l : finish_order) {
    rounds.AllowDraft(l);
    ASSERT_TRUE(rounds.WaitToDraft(l));
    rounds.Drafted(l);
  }
  std::vector<std::size_t> offered;
  rounds.TakeReady(taken, std::chrono::milliseconds(0), [&](std::size_t l) {
    offered.push_back(l);
    return offered.size() < 2;
  });
  EXPECT_EQ(taken, (std::vector<std::size_t>{2, 0}));
  EXPECT_EQ(offered, (std::vector<std::size_t>{0, 1}));
  rounds.TakeReady(taken, std::nullopt, one);
  EXPECT_EQ(taken, std::vector<std::size_t>{1});
  // A lane's failure reaches the verifier; stopping releases every lane.
  rounds.Failed(std::make_exception_ptr(Error("draft failed")));
  EXPECT_THROW(rounds.TakeReady(taken, std::nullopt, one), Error);
  rounds.Stop();
  EXPECT_FALSE(rounds.WaitToDraft(0));
}

TEST(ConcurrencyTrees, FollowTheCurveAndTheStepCost) {
  std::vector<std::pair<int32_t, double>> points;
  for (int32_t n = 1; n <= 128; ++n) points.emplace_back(n, 1e-4 + 5e-5 * n);
  constexpr int32_t kAlone = 8;  // tokens of the tree for one sequence, root included
  ConcurrencyTrees trees(VerifyCostCurve(points), {0.8, 0.1, 0.05}, kAlone, 16, 128,
                         /*drafting_cores=*/2, /*draft_seconds_per_level=*/0.0);
  auto check_bounds = [&] {
    for (int32_t k = 1; k <= 16; ++k) {
      EXPECT_LE(trees.For(k).size(), kAlone - 1) << k;
      EXPECT_LE((trees.For(k).size() + 1) * k, 128) << k;  // k trees and roots fit the budget
    }
  };
  trees.Update({.overhead_seconds = 0.0});
  check_bounds();
  EXPECT_GE(trees.For(1).size(), 2);
  EXPECT_LT(trees.For(16).size(), trees.For(1).size());
  trees.Update({.overhead_seconds = 1.0});  // every token a tree wins counts
  check_bounds();
  EXPECT_EQ(trees.For(16).size(), 128 / 16 - 1);
  EXPECT_EQ(trees.For(1).size(), kAlone - 1);
  EXPECT_EQ(trees.For(99).size(), trees.For(16).size());  // clamped
  EXPECT_DOUBLE_EQ(trees.costs().overhead_seconds, 1.0);
}

// The curve a session prices its own rows at: forwards observed where they ran often enough,
// the start curve scaled by how much slower they ran elsewhere.
TEST(ConcurrencyTrees, ServeTheirCurveAsObserved) {
  std::vector<std::pair<int32_t, double>> points;
  for (int32_t n : {1, 2, 4, 8, 16, 32}) points.emplace_back(n, 1e-3 * (1.0 + 0.05 * (n - 1)));
  const VerifyCostCurve start(points);
  ConcurrencyTrees trees(start, {0.8, 0.1, 0.05}, 8, 1, 128, /*drafting_cores=*/2,
                         /*draft_seconds_per_level=*/0.0);
  EXPECT_DOUBLE_EQ(trees.ServedCurve().Seconds(12), start.Seconds(12)) << "nothing served yet";
  const double twelve = 2.0 * start.Seconds(12);
  for (int i = 0; i < 16; ++i) {
    trees.Observe({.sequences = 1, .rows = 12, .forward_seconds = twelve});
  }
  const VerifyCostCurve served = trees.ServedCurve();
  EXPECT_EQ(served.max_size(), start.max_size());
  EXPECT_NEAR(served.Seconds(12), twelve, 1e-12);
  EXPECT_NEAR(served.Seconds(32), 2.0 * start.Seconds(32), 1e-12) << "scaled as 12 ran";
  EXPECT_NEAR(served.Seconds(1), 2.0 * start.Seconds(1), 1e-12);
}

// Drafting is charged to trees only, per draft level, shared among the cores the lanes draft on:
// where it costs more than the tokens a tree wins, plain steps are chosen. At 16 sequences with a
// step overhead of 0.1 ms a plain step costs 0.156 ms a token and a one-node tree 0.115 ms a
// token when drafting is free, but 0.226 ms when a level costs 0.4 ms (0.2 ms on 2 cores).
TEST(ConcurrencyTrees, ChargeDraftingToTreesAlone) {
  std::vector<std::pair<int32_t, double>> points;
  for (int32_t n = 1; n <= 128; ++n) points.emplace_back(n, 1e-4 + 5e-5 * n);
  ConcurrencyTrees trees(VerifyCostCurve(points), {0.8, 0.1, 0.05}, 8, 16, 128,
                         /*drafting_cores=*/2, /*draft_seconds_per_level=*/0.0);
  trees.Update({.overhead_seconds = 1e-4, .draft_seconds_per_level = 0.0});
  EXPECT_FALSE(trees.For(16).empty());
  trees.Update({.overhead_seconds = 1e-4, .draft_seconds_per_level = 4e-4});
  EXPECT_TRUE(trees.For(16).empty()) << trees.For(16).size();
  EXPECT_TRUE(trees.For(1).empty()) << trees.For(1).size();
  // Negative measurements count as zero.
  trees.Update({.overhead_seconds = -1.0, .draft_seconds_per_level = -1.0});
  EXPECT_EQ(trees.costs().overhead_seconds, 0.0);
  EXPECT_EQ(trees.costs().draft_seconds_per_level, 0.0);
}

// The table follows what serving sees: trees whose nodes are never accepted teach an acceptance
// vector near 0, which gives way to plain steps at every concurrency; the table is rechosen every
// kRoundsPerUpdate rounds.
TEST(ConcurrencyTrees, FollowTheAcceptanceServingSees) {
  std::vector<std::pair<int32_t, double>> points;
  for (int32_t n = 1; n <= 128; ++n) points.emplace_back(n, 1e-3 + 1e-5 * n);  // memory-bound
  ConcurrencyTrees trees(VerifyCostCurve(points), {0.8, 0.1, 0.05}, 8, 4, 128,
                         /*drafting_cores=*/2, /*draft_seconds_per_level=*/1e-5);
  for (int32_t k = 1; k <= 4; ++k) EXPECT_FALSE(trees.For(k).empty()) << k;
  EXPECT_NEAR(trees.acceptance()[0], 0.8, 1e-9) << "the start vector";
  const RoundObservation rejected{.sequences = 4,
                                  .rows = 16,
                                  .forward_seconds = 1.16e-3,
                                  .draft_wait_seconds = 1e-5,
                                  .other_seconds = 1e-4,
                                  .draft_levels = 12};
  // Four updates' worth of the trees served, none of whose nodes is accepted.
  for (int update = 0; update < 4; ++update) {
    for (int i = 1; i <= ConcurrencyTrees::kRoundsPerUpdate; ++i) {
      for (int k = 0; k < 4; ++k) trees.ObserveTree(trees.For(4), {});
      EXPECT_EQ(trees.Observe(rejected), i == ConcurrencyTrees::kRoundsPerUpdate) << i;
    }
  }
  // (Plain steps come before the vector has reached 0: each depth's trees gave 1 token where the
  // model expected more, and the table prices them at that; plain steps feed it nothing.)
  const double p1 = trees.acceptance()[0];
  EXPECT_LT(p1, 0.1);
  for (int32_t k = 1; k <= 4; ++k) EXPECT_TRUE(trees.For(k).empty()) << k;
  // Rounds of plain steps leave the vector where the trees left it.
  const RoundObservation plain{.sequences = 4, .rows = 4, .forward_seconds = 1.04e-3};
  for (int i = 0; i < ConcurrencyTrees::kRoundsPerUpdate; ++i) trees.Observe(plain);
  EXPECT_EQ(trees.acceptance()[0], p1);
}

// One sequence's table of trees up to 12 tokens over a verify curve where each token adds 5% of
// t(1) = 1 ms, a draft level costing 20 us.
ConcurrencyTrees OneSequenceTable(std::vector<double> acceptance) {
  std::vector<std::pair<int32_t, double>> points;
  for (int32_t n = 1; n <= 64; ++n) points.emplace_back(n, 1e-3 * (1.0 + 0.05 * (n - 1)));
  return ConcurrencyTrees(VerifyCostCurve(points), std::move(acceptance), 12, 1, 128,
                          /*drafting_cores=*/2, /*draft_seconds_per_level=*/2e-5);
}

// A pair whose first guess is right half as often as the start vector says gets shallower trees:
// each rank's rate is estimated, so the deep end of a chain is priced at what reaching it now
// takes (one factor on the expected length kept the start vector's chain of 10; issue 32's Game
// of 24 prompts).
TEST(ConcurrencyTrees, AWeakerFirstGuessGetsShallowerTrees) {
  ConcurrencyTrees trees = OneSequenceTable({0.86, 0.04, 0.02});
  const TokenTree start = trees.For(1);
  ASSERT_GE(start.depth(), 6) << "a long chain for a sure first guess";
  // Each step accepts the root's first child 4 times in 10 and nothing deeper.
  const RoundObservation round{.sequences = 1, .rows = start.size() + 1, .forward_seconds = 1e-3};
  for (int i = 1; i <= ConcurrencyTrees::kRoundsPerUpdate; ++i) {
    const TokenTree& tree = trees.For(1);
    const std::vector<int32_t> first = {tree.children(-1)[0]};
    trees.ObserveTree(tree,
                      i % 10 < 4 ? std::span<const int32_t>(first) : std::span<const int32_t>());
    trees.Observe(round);
  }
  EXPECT_LT(trees.acceptance()[0], 0.5);
  EXPECT_LT(trees.For(1).depth(), start.depth() / 2) << trees.Describe();
}

// Where acceptance falls with depth faster than the positional model says, the trees served show
// it: steps accept 0 nodes 2 times in 10, 2 nodes 6 times and 3 nodes twice (never a fourth), so
// a chain of 3 gives 2.8 tokens, as many as any deeper one, at less cost. After one update's worth
// of the start vector's deep chains, p_1 is estimated at about 0.68, at which the model alone
// keeps a chain of 5 (it expects 2.8 tokens of it and 2.45 of the chain of 3); priced at what each
// depth's cut gave, the chain of 2 or 3 is the table's.
TEST(ConcurrencyTrees, DeepNodesArePricedAtWhatTheyGaveWhenServed) {
  ConcurrencyTrees trees = OneSequenceTable({0.9, 0.03, 0.01});
  const TokenTree start = trees.For(1);
  ASSERT_GE(start.depth(), 6) << "a long chain for a sure first guess";
  constexpr int32_t kAccepted[10] = {0, 2, 2, 3, 2, 0, 2, 2, 3, 2};
  std::vector<int32_t> path;
  for (int i = 0; i < ConcurrencyTrees::kRoundsPerUpdate; ++i) {
    path.clear();
    for (int32_t node = -1; static_cast<int32_t>(path.size()) < kAccepted[i % 10];) {
      node = start.children(node)[0];
      path.push_back(node);
    }
    trees.ObserveTree(start, path);
    trees.Observe({.sequences = 1,
                   .rows = start.size() + 1,
                   .forward_seconds = 1e-3 * (1.0 + 0.05 * start.size()),
                   .other_seconds = 5e-5});
  }
  EXPECT_GT(trees.acceptance()[0], 0.6);
  EXPECT_LE(trees.For(1).depth(), 3) << trees.Describe();
  EXPECT_GE(trees.For(1).depth(), 2) << trees.Describe();
}

// FreezeAutoPlan measures the curve once and builds the table from it, within its bounds.
TEST_F(SchedulerTest, FrozenAutoPlanBuildsTreesByConcurrency) {
  const SpeculationPolicy automatic = PolicyFor("auto", {.temperature = 0.0f});
  auto lane = Model::Create(draft_, {.n_threads = 1, .n_ctx = 192});
  const std::vector<int32_t> context = requests_[0].prompt;
  const FrozenAutoPlan frozen = FreezeAutoPlan(*target_, lane.get(), context, automatic, 16, 128);
  EXPECT_EQ(target_->kv().in_use(), 0);
  const int32_t alone = frozen.plan.shape.size();
  EXPECT_EQ(frozen.by_concurrency.has_value(), alone != 0) << frozen.plan.text;
  if (alone == 0) return;  // a loaded machine measured plain decoding as the faster
  for (int32_t k = 1; k <= 16; ++k) {
    EXPECT_LE(frozen.by_concurrency->For(k).size(), alone) << k;
    EXPECT_LE((frozen.by_concurrency->For(k).size() + 1) * k, 128) << k;
  }
}

// A kept curve whose times were measured once is not trusted: FreezeAutoPlan measures, plans with
// its own times, and adds them to the kept curve as second samples; a settled curve is used as
// it is (issue 30: a curve slowed by other work made every server choose small trees).
TEST_F(SchedulerTest, FrozenAutoPlanMeasuresOverAKeptCurveMeasuredOnce) {
  SpeculationPolicy automatic = PolicyFor("auto", {.temperature = 0.0f});
  auto cache = std::make_shared<const VerifyCostCache>(testing::TempPath("frozen-once-curve"));
  automatic.inputs.verify_cost_cache = cache;
  CachedVerifyCost once;
  for (int32_t n : {1, 2, 4, 8, 16, 32, 64, 128}) once.AddSample(n, n == 1 ? 1.0 : 1.0 + n);
  cache->Store(*target_, once);
  auto lane = Model::Create(draft_, {.n_threads = 1, .n_ctx = 192});
  const std::vector<int32_t> context = requests_[0].prompt;
  const FrozenAutoPlan frozen = FreezeAutoPlan(*target_, lane.get(), context, automatic, 4, 128);
  ASSERT_TRUE(frozen.verify_cost.has_value());
  EXPECT_LT(frozen.verify_cost->Seconds(1), 0.5) << "measured, not the kept 1 s";
  const std::optional<CachedVerifyCost> kept = cache->Load(*target_);
  ASSERT_TRUE(kept.has_value());
  for (const auto& [n, measured] : kept->samples) {
    if (n <= 128 && once.Measured(n)) {
      EXPECT_EQ(measured.size(), 2u) << n;
    }
  }
  // The kept times still disagree, but this process measured once: a second scheduler plans with
  // that measurement and adds no sample that would share what slowed the first.
  const FrozenAutoPlan second = FreezeAutoPlan(*target_, lane.get(), context, automatic, 4, 128);
  ASSERT_TRUE(second.verify_cost.has_value());
  EXPECT_DOUBLE_EQ(second.verify_cost->Seconds(1), frozen.verify_cost->Seconds(1));
  const std::optional<CachedVerifyCost> kept_after = cache->Load(*target_);
  ASSERT_TRUE(kept_after.has_value());
  for (const auto& [n, measured] : kept_after->samples) {
    if (n <= 128 && once.Measured(n)) {
      EXPECT_EQ(measured.size(), 2u) << n;
    }
  }
  // Settled (every size twice, agreeing): planned with as kept, nothing measured.
  CachedVerifyCost settled;
  for (int32_t n : {1, 2, 4, 8, 16, 32, 64, 128})
    for (int32_t sample = 0; sample < 2; ++sample)
      settled.AddSample(n, n == 1 ? 1e-3 : 1.0 + n / 64.0);
  cache->Store(*target_, settled);
  const FrozenAutoPlan again = FreezeAutoPlan(*target_, lane.get(), context, automatic, 4, 128);
  ASSERT_TRUE(again.verify_cost.has_value());
  EXPECT_DOUBLE_EQ(again.verify_cost->Seconds(1), 1e-3);
  EXPECT_DOUBLE_EQ(again.verify_cost->Seconds(128), 1e-3 * 3.0);
}

// A server's requests: submitted from another thread while the scheduler runs, admitted as slots
// free; each is still what it is alone, one that cannot run fails alone, and nothing is held after.
TEST_F(SchedulerTest, ServesRequestsThatArriveWhileItRuns) {
  const SamplerParams greedy{.temperature = 0.0f};
  const auto alone = Alone(greedy);
  const SpeculationPolicy speculation = PolicyFor("sequoia:8", greedy);
  for (SchedulePolicy policy : kAllSchedulePolicies) {
    SCOPED_TRACE(std::string(SchedulePolicyName(policy)));
    Scheduler scheduler(*target_, Source(), {.policy = policy, .speculation = speculation});
    RequestFeed feed(8);
    std::mutex mutex;
    std::vector<SequenceResult> results(requests_.size() + 1);
    std::vector<int> done(requests_.size() + 1, 0);
    std::thread serving([&] { scheduler.Serve(feed); });
    for (std::size_t i = 0; i <= requests_.size(); ++i) {
      SequenceRequest q = i < requests_.size() ? requests_[i] : requests_[0];
      q.shares_prompt_with = -1;
      if (i == requests_.size()) q.prompt.assign(400, 5);  // longer than the context
      const auto submitted = feed.Submit(q, [&, i](SequenceResult&& r) {
        std::lock_guard lock(mutex);
        results[i] = std::move(r);
        ++done[i];
      });
      EXPECT_EQ(submitted, RequestFeed::Submitted::kQueued);
      // Later requests arrive while earlier ones run.
      std::this_thread::sleep_for(std::chrono::milliseconds(i % 2 ? 20 : 0));
    }
    feed.Close();
    serving.join();
    for (std::size_t i = 0; i < requests_.size(); ++i) {
      EXPECT_EQ(done[i], 1) << "sequence " << i;
      EXPECT_TRUE(results[i].error.empty()) << results[i].error;
      EXPECT_EQ(results[i].tokens, alone[i]) << "sequence " << i;
    }
    EXPECT_EQ(done.back(), 1);
    EXPECT_NE(results.back().error.find("context"), std::string::npos) << results.back().error;
    EXPECT_EQ(target_->kv().in_use(), 0);
    EXPECT_EQ(scheduler.stats().sequences, static_cast<int64_t>(requests_.size()) + 1);
    EXPECT_EQ(feed.Submit(requests_[0], {}), RequestFeed::Submitted::kClosed);
  }
}

// The auto plan measures on the first request's prompt: one the context cannot hold must fail
// alone, not the server.
TEST_F(SchedulerTest, ServeSurvivesAFirstRequestThatCannotRun) {
  const SamplerParams greedy{.temperature = 0.0f};
  const auto alone = Alone(greedy);
  Scheduler scheduler(*target_, Source(),
                      {.policy = SchedulePolicy::kSeed, .speculation = PolicyFor("auto", greedy)});
  RequestFeed feed(4);
  SequenceRequest too_long = requests_[2];
  too_long.prompt.assign(400, 5);
  std::vector<SequenceResult> results(2);
  feed.Submit(too_long, [&](SequenceResult&& r) { results[0] = std::move(r); });
  feed.Submit(requests_[2], [&](SequenceResult&& r) { results[1] = std::move(r); });
  feed.Close();
  scheduler.Serve(feed);
  EXPECT_FALSE(results[0].error.empty());
  EXPECT_TRUE(results[1].error.empty()) << results[1].error;
  EXPECT_EQ(results[1].tokens, alone[2]);
  EXPECT_EQ(target_->kv().in_use(), 0);
}

// A server's requests each bring their temperature and tree (or none): they share forwards, and
// each is still what it is alone under its own sampling.
TEST_F(SchedulerTest, EachRequestMayBringItsOwnPolicy) {
  const SamplerParams greedy{.temperature = 0.0f};
  const SamplerParams hot{
      .temperature = 0.9f, .top_k = 0, .top_p = 0.95f, .min_p = 0.0f, .seed = 4};
  auto hot_policy = std::make_shared<SpeculationPolicy>(PolicyFor("kconfig:2,2,1", hot));
  auto plain_policy = std::make_shared<SpeculationPolicy>(PolicyFor("sequoia:8", greedy));
  plain_policy->plan.shape = TokenTree();  // no tree: plain steps
  std::vector<SequenceRequest> requests = requests_;
  requests[2].speculation = hot_policy;
  requests[3].speculation = plain_policy;
  std::vector<std::vector<int32_t>> alone = Alone(greedy);
  alone[2] =
      GeneratePlain(*target_, requests[2].prompt, hot,
                    {.n_predict = requests[2].n_predict, .sequence = requests[2].sequence}, {});
  for (SchedulePolicy policy : kAllSchedulePolicies) {
    SCOPED_TRACE(std::string(SchedulePolicyName(policy)));
    Scheduler scheduler(*target_, Source(),
                        {.policy = policy, .speculation = PolicyFor("sequoia:8", greedy)});
    const auto results = scheduler.Run(requests);
    for (std::size_t i = 0; i < results.size(); ++i) {
      EXPECT_EQ(results[i].tokens, alone[i]) << "sequence " << i;
    }
    if (IsSpeculative(policy)) {
      EXPECT_EQ(results[3].steps, static_cast<int64_t>(results[3].tokens.size()));  // plain steps
    }
  }
}

// Batched with an auto plan: each step drafts the tree the table holds for the sequences in
// flight when its lane was shaped (k), not for k + 1 or k - 1. The curve is given (a kept one):
// forwards cost the same up to 16 tokens, then climb steeply, and at 50 ms a forward drafting
// costs little beside it, so that the trees for one and two sequences differ.
TEST_F(SchedulerTest, BatchedAutoTreeIsTheOneForTheSequencesInFlight) {
  SpeculationPolicy automatic = PolicyFor("auto", {.temperature = 0.0f});
  auto cache = std::make_shared<const VerifyCostCache>(testing::TempPath("batched-lookup-curve"));
  // Each time measured twice (confirmed: a curve of single measurements would be measured again).
  CachedVerifyCost curve;
  for (int32_t n = 1; n <= target_->max_batch(); ++n) {
    const double ratio = n <= 16 ? 1.0 : 1.0 + 0.5 * (n - 16);
    for (int32_t sample = 0; sample < 2; ++sample) curve.AddSample(n, n == 1 ? 0.05 : ratio);
  }
  curve.complete = true;
  cache->Store(*target_, curve);
  automatic.inputs.verify_cost_cache = cache;
  const std::vector<SequenceRequest> requests = {
      {.prompt = requests_[2].prompt, .sequence = 1, .n_predict = 40},
      {.prompt = requests_[3].prompt, .sequence = 2, .n_predict = 10}};
  Scheduler scheduler(
      *target_, Source(),
      {.policy = SchedulePolicy::kBatched, .speculation = automatic, .stop_at_eog = false});
  const std::optional<ConcurrencyTrees>& table = scheduler.trees_by_concurrency();

  // A sequence's tree is shaped after its previous step was delivered (its first when admitted,
  // in request order): k is the number admitted and not finished then.
  std::vector<int32_t> delivered(requests.size(), 0);
  std::vector<int32_t> shaped_for = {1, 2};
  int32_t finished = 0;
  std::vector<std::string> mismatches;
  int32_t steps_with_two = 0;
  std::vector<SequenceRequest> observed = requests;
  for (std::size_t i = 0; i < observed.size(); ++i) {
    observed[i].on_step = [&, i](const StepView& view) {
      if (!table) return;  // asserted below
      const TokenTree& want = table->For(shaped_for[i]);
      if (view.tree.size() != want.size() || view.tree.depth() != want.depth()) {
        mismatches.push_back(
            "sequence " + std::to_string(i) + " at token " + std::to_string(delivered[i]) + ": " +
            std::to_string(view.tree.size()) + " nodes, want the tree for " +
            std::to_string(shaped_for[i]) + " (" + std::to_string(want.size()) + ")");
      }
      steps_with_two += shaped_for[i] == 2;
    };
    observed[i].on_tokens = [&, i](std::span<const int32_t> tokens) {
      delivered[i] += static_cast<int32_t>(tokens.size());
      if (delivered[i] >= observed[i].n_predict) ++finished;
      shaped_for[i] = static_cast<int32_t>(observed.size()) - finished;
      return true;
    };
  }
  const auto results = scheduler.Run(observed);
  ASSERT_TRUE(table.has_value()) << scheduler.options().speculation.plan.text;
  ASSERT_NE(table->For(1).size(), table->For(2).size()) << table->Describe();
  for (std::size_t i = 0; i < results.size(); ++i) {
    ASSERT_EQ(static_cast<int32_t>(results[i].tokens.size()), requests[i].n_predict) << i;
  }
  // Fewer rounds than the table takes to rechoose its trees from what it observed.
  ASSERT_LT(scheduler.stats().rounds.rounds, ConcurrencyTrees::kRoundsPerUpdate);
  EXPECT_TRUE(mismatches.empty()) << ::testing::PrintToString(mismatches);
  EXPECT_GT(steps_with_two, 1);  // both sequences in flight for more than the second's first step
}

TEST(RequestFeed, RefusesWhenFullOrClosedAndMalformedRequests) {
  RequestFeed feed(2);
  const SequenceRequest q{.prompt = {1, 2, 3}, .n_predict = 4};
  EXPECT_EQ(feed.Submit(q, {}), RequestFeed::Submitted::kQueued);
  EXPECT_EQ(feed.Submit(q, {}), RequestFeed::Submitted::kQueued);
  EXPECT_EQ(feed.Submit(q, {}), RequestFeed::Submitted::kFull);  // a server's 503
  EXPECT_EQ(feed.waiting(), 2);
  SequenceRequest shared = q;
  shared.shares_prompt_with = 0;
  EXPECT_THROW(feed.Submit(shared, {}), Error);
  EXPECT_THROW(feed.Submit(SequenceRequest{}, {}), Error);
  EXPECT_THROW(RequestFeed(0), Error);
  // Each refusal says what is allowed.
  const auto error_of = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error_of([&] { feed.Submit(SequenceRequest{}, {}); }).find("give at least one token"),
            std::string::npos);
  SequenceRequest negative = q;
  negative.n_predict = -3;
  EXPECT_NE(error_of([&] { feed.Submit(negative, {}); }).find("-3 tokens: 0 or more"),
            std::string::npos);
  EXPECT_NE(error_of([] { RequestFeed(0); }).find("must be at least 1"), std::string::npos);
  feed.Close();
  EXPECT_EQ(feed.Submit(q, {}), RequestFeed::Submitted::kClosed);

  RequestFeed group(3);  // a request's n choices go in together or not at all
  EXPECT_EQ(group.Submit(q, {}), RequestFeed::Submitted::kQueued);
  EXPECT_EQ(group.SubmitAll({q, q, q}, {{}, {}, {}}), RequestFeed::Submitted::kFull);
  EXPECT_EQ(group.waiting(), 1);
  EXPECT_EQ(group.SubmitAll({q, q}, {{}, {}}), RequestFeed::Submitted::kQueued);
  EXPECT_EQ(group.waiting(), 3);
}

TEST_F(SchedulerTest, RefusesBadRequestsAndPlans) {
  const SpeculationPolicy speculation = PolicyFor("sequoia:8", {.temperature = 0.0f});
  Scheduler scheduler(*target_, Source(),
                      {.policy = SchedulePolicy::kBatched, .speculation = speculation});
  std::vector<SequenceRequest> bad = requests_;
  bad[2].prompt.clear();
  EXPECT_THROW(scheduler.Run(bad), Error);
  bad = requests_;
  bad[0].shares_prompt_with = 0;  // itself
  EXPECT_THROW(scheduler.Run(bad), Error);
  bad = requests_;
  bad[3].shares_prompt_with = 2;  // a different prompt
  EXPECT_THROW(scheduler.Run(bad), Error);
  bad = requests_;
  bad[4].prompt.assign(400, 5);  // longer than the context
  bad[4].shares_prompt_with = -1;
  EXPECT_THROW(scheduler.Run(bad), Error);
  EXPECT_EQ(target_->kv().in_use(), 0);                          // a failed run leaves no slot held
  EXPECT_EQ(scheduler.Run(requests_).size(), requests_.size());  // and the next one works

  EXPECT_THROW(ParseSchedulePolicy("fastest"), Error);
  EXPECT_EQ(ParseSchedulePolicy("seed"), SchedulePolicy::kSeed);
}

}  // namespace
}  // namespace grove
