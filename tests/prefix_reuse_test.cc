// A conversation's next turn keeps what the caches hold of its prompt (SessionOptions::reuse_cache,
// issue 69): the target's cache, the draft model's and the feature drafter's keep the longest
// common token prefix and prefill only the rest. What comes out must be the bits of a cold prefill
// (contract 2): the first logits, and the greedy text token for token, on the bundled pair and on a
// family with sliding-window rings (Gemma 3), also when an earlier message was edited.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "llama_cpp_reference.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "model/random_model.h"
#include "sample/sampler.h"
#include "speculate/draft_source.h"
#include "speculate/model_drafter.h"
#include "speculate/plain_decoding.h"
#include "speculate/session.h"
#include "speculate/speculation.h"
#include "test_support.h"
#include "tokenize/tokenizer.h"

namespace grove {
namespace {

const SamplerParams kGreedy{.temperature = 0.0f};

std::string ModelPath(const char* name) { return std::string(GROVE_MODELS_DIR) + "/" + name; }

std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<int32_t> VariedTokens(int n, int32_t n_vocab, uint64_t x) {
  std::vector<int32_t> t;
  while (static_cast<int>(t.size()) < n) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    t.push_back(static_cast<int32_t>(3 + (x >> 33) % static_cast<uint64_t>(n_vocab - 3)));
  }
  return t;
}

SpeculationPolicy Policy(const std::string& plan, const Drafter& drafter) {
  TreePlanInputs inputs;
  inputs.acceptance = {0.6, 0.2, 0.1};
  return ResolveSpeculation({.plan = plan}, inputs, drafter, kGreedy);
}

// The last prompt token's logits after a prefill: with `reuse`, of only what the cache does not
// hold of the prompt (the number kept into *kept).
std::vector<float> FirstLogits(Model& model, const std::vector<int32_t>& prompt, bool reuse,
                               int32_t* kept) {
  const SessionOptions options{.n_predict = 1, .stop_at_eog = false, .reuse_cache = reuse};
  const int32_t cached = KeepCachedPrompt(model, options, prompt);
  if (kept) *kept = cached;
  Batch batch;
  const std::span<const float> logits =
      model.ForwardChain(std::span<const int32_t>(prompt).subspan(cached), cached, 0, batch, true);
  return {logits.end() - model.config().n_vocab, logits.end()};
}

void ExpectSameBits(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
}

TEST(MatchingPrefix, StopsAtTheFirstDifferentTokenAndAtTheChain) {
  auto model = testing::MakeRandomModel(testing::TinySpec(), {.n_threads = 1, .n_ctx = 64});
  const std::vector<int32_t> tokens = VariedTokens(20, model->config().n_vocab, 3);
  Batch batch;
  model->ForwardChain(tokens, 0, 0, batch, false);
  const KvCache& cache = model->cache(0);
  EXPECT_EQ(cache.MatchingPrefix(tokens), 20);
  std::vector<int32_t> edited = tokens;
  edited[7] = edited[7] == 5 ? 6 : 5;
  EXPECT_EQ(cache.MatchingPrefix(edited), 7);
  // Longer than what the cache holds: what it holds.
  EXPECT_EQ(cache.MatchingPrefix(Concat(tokens, {4, 5, 6})), 20);
  EXPECT_EQ(cache.MatchingPrefix(std::span<const int32_t>(tokens).first(12)), 12);
  EXPECT_EQ(cache.MatchingPrefix({}), 0);
}

// The first logits of turn two, prefilled after turn one's cache, against a cold prefill.
void CheckFirstLogits(Model& model, uint64_t seed) {
  const int32_t nv = model.config().n_vocab;
  const std::vector<int32_t> turn1 = VariedTokens(40, nv, seed);
  const std::vector<int32_t> turn2 = Concat(turn1, VariedTokens(30, nv, seed + 1));
  model.cache(0).Clear();
  // Turn one and a generated answer leave 40 + 12 tokens in the cache.
  const SessionOptions options{.n_predict = 12, .stop_at_eog = false, .reuse_cache = true};
  const std::vector<int32_t> answer = GeneratePlain(model, turn1, kGreedy, options, {});
  const std::vector<int32_t> turn2_after_answer =
      Concat(Concat(turn1, answer), VariedTokens(25, nv, seed + 2));
  int32_t kept = 0;
  const std::vector<float> warm = FirstLogits(model, turn2_after_answer, true, &kept);
  EXPECT_EQ(kept, 40 + 11);  // the answer's last token was sampled, never fed
  model.cache(0).Clear();
  ExpectSameBits(warm, FirstLogits(model, turn2_after_answer, false, nullptr));
  // Turn two without the answer (an edited conversation) keeps turn one only; off, nothing, and
  // from an empty cache nothing.
  FirstLogits(model, Concat(turn1, answer), false, nullptr);
  const std::vector<float> edited_warm = FirstLogits(model, turn2, true, &kept);
  EXPECT_EQ(kept, 40);
  model.cache(0).Clear();
  ExpectSameBits(edited_warm, FirstLogits(model, turn2, true, &kept));
  EXPECT_EQ(kept, 0);
  FirstLogits(model, turn2, false, &kept);
  EXPECT_EQ(kept, 0);
}

TEST(PrefixReuse, FirstLogitsAreTheBitsOfAColdPrefillOnTheBundledTarget) {
  const std::string path = ModelPath("grove-target.gguf");
  ASSERT_TRUE(testing::FileExists(path)) << path;
  auto model = Model::Load(path, {.n_threads = 2, .n_ctx = 256});
  CheckFirstLogits(*model, 11);
}

std::unique_ptr<Model> Gemma(std::shared_ptr<ThreadPool> pool = nullptr) {
  return testing::MakeRandomModel(
      testing::FamilyTestSpec("gemma3", GgmlType::kQ8_0),
      {.n_threads = 2, .pool = std::move(pool), .n_ctx = 256, .max_batch = 16});
}

TEST(PrefixReuse, FirstLogitsAreTheBitsOfAColdPrefillWithSlidingWindows) {
  auto model = Gemma();
  ASSERT_GT(model->cache(0).ring_rows(), 0);
  CheckFirstLogits(*model, 21);
}

// A conversation of three turns, token prompts standing for rendered ones: each turn's greedy
// answer with reuse must be the cold one's, and the draft cache after the turn's Start must hold
// the same bits. Turn three edits turn one (a template that rewrote an earlier turn), so it keeps
// only what precedes the edit.
struct Turns {
  std::vector<std::vector<int32_t>> answers;
  std::vector<int64_t> cached;  // target prompt tokens kept, per turn
};

Turns Converse(Model& target, Drafter& drafter, const std::string& plan, bool reuse,
               const std::vector<std::vector<int32_t>>& user, int32_t edit_at, int32_t n_predict) {
  Turns t;
  target.cache(0).Clear();
  SpeculativeSession session(target, drafter, Policy(plan, drafter),
                             {.n_predict = n_predict, .stop_at_eog = false, .reuse_cache = reuse});
  std::vector<int32_t> conversation;
  for (std::size_t turn = 0; turn < user.size(); ++turn) {
    if (turn == 2) {
      // The edit: one token of the first message changes.
      conversation[static_cast<std::size_t>(edit_at)] ^= 1;
    }
    conversation = Concat(conversation, user[turn]);
    const std::vector<int32_t> answer = session.Generate(conversation, {});
    t.answers.push_back(answer);
    t.cached.push_back(session.stats().cached_prompt_tokens);
    conversation = Concat(conversation, answer);
  }
  return t;
}

void CheckConversation(Model& target, Drafter& drafter, const std::string& plan,
                       const std::vector<std::vector<int32_t>>& user, int32_t edit_at,
                       int32_t n_predict, bool window_lost_on_edit) {
  SCOPED_TRACE(plan);
  const Turns warm = Converse(target, drafter, plan, true, user, edit_at, n_predict);
  const Turns cold = Converse(target, drafter, plan, false, user, edit_at, n_predict);
  ASSERT_EQ(warm.answers.size(), cold.answers.size());
  for (std::size_t i = 0; i < warm.answers.size(); ++i) {
    EXPECT_EQ(warm.answers[i], cold.answers[i]) << "turn " << i;
    EXPECT_EQ(cold.cached[i], 0) << "turn " << i;
  }
  EXPECT_EQ(warm.cached[0], 0);
  // Turn two keeps turn one and its answer: all of it where the last step ended on an accepted
  // node (its slot is in the cache), all but the last token where it ended on the token after
  // them (sampled, never fed).
  const auto turn_one = static_cast<int64_t>(user[0].size() + warm.answers[0].size());
  EXPECT_GE(warm.cached[1], turn_one - 1);
  EXPECT_LE(warm.cached[1], turn_one);
  // Turn three keeps what precedes the edit, unless the window's ring lost it.
  EXPECT_EQ(warm.cached[2], window_lost_on_edit ? 0 : edit_at);
}

TEST(PrefixReuse, ConversationOnTheBundledPairIsTheColdOne) {
  const std::string target_path = ModelPath("grove-target.gguf");
  const std::string draft_path = ModelPath("grove-draft.gguf");
  ASSERT_TRUE(testing::FileExists(target_path) && testing::FileExists(draft_path));
  auto target = Model::Load(target_path, {.n_threads = 2, .n_ctx = 320});
  auto draft = Model::Load(draft_path, {.pool = target->shared_pool(), .n_ctx = 320});
  const Tokenizer& tok = *target->tokenizer();
  const std::vector<std::vector<int32_t>> user = {
      tok.Encode("Once upon a time, there was a little girl named Lily.", true),
      tok.Encode(" One day, she went to the park", false), tok.Encode(" The sun was", false)};
  for (const char* plan : {"chain:4", "opt:10,0.05"}) {
    ModelDrafter drafter(*draft, *target);
    CheckConversation(*target, drafter, plan, user, 5, 40, false);
  }
}

// The draft cache a reusing Begin leaves holds the bits a cold Begin writes.
TEST(PrefixReuse, DraftCacheAfterAReusingBeginIsTheColdOne) {
  const std::string draft_path = ModelPath("grove-draft.gguf");
  ASSERT_TRUE(testing::FileExists(draft_path));
  auto target = Model::Load(draft_path, {.n_threads = 2, .n_ctx = 256});
  auto draft = Model::Load(draft_path, {.pool = target->shared_pool(), .n_ctx = 256});
  const Tokenizer& tok = *target->tokenizer();
  const std::vector<int32_t> turn1 = tok.Encode("Once upon a time, there was a dog.", true);
  ModelDrafter drafter(*draft, *target);
  drafter.ReuseCache(true);
  SpeculativeSession session(*target, drafter, Policy("chain:3", drafter),
                             {.n_predict = 20, .stop_at_eog = false, .reuse_cache = true});
  const std::vector<int32_t> turn2 =
      Concat(Concat(turn1, session.Generate(turn1, {})), tok.Encode(" The end", false));
  drafter.Begin(turn2);
  const KvCache& d = draft->cache(0);
  const int32_t n = d.length();
  EXPECT_EQ(n, static_cast<int32_t>(turn2.size()) - 1);
  // Every layer's keys and values: a deeper layer's rows depend on the context they were computed
  // in, so a kept row computed from another prefix would differ there.
  const auto rows = [&] {
    std::vector<float> out;
    for (int32_t layer = 0; layer < draft->config().n_layer; ++layer) {
      for (int32_t slot = 0; slot < n; ++slot) {
        out.insert(out.end(), d.key(layer, slot), d.key(layer, slot) + d.kv_dim());
        out.insert(out.end(), d.value(layer, slot), d.value(layer, slot) + d.kv_dim());
      }
    }
    return out;
  };
  const std::vector<float> warm = rows();
  drafter.ReuseCache(false);
  drafter.Begin(turn2);
  ASSERT_EQ(d.length(), n);
  ExpectSameBits(warm, rows());
}

// Gemma 3's window is 16 tokens and its ring 48 rows: turn one's 30 tokens and 60 generated ones
// overwrite the rows of its beginning, so the edit at token 5 cannot be resumed (the ring no longer
// holds tokens 0..4's window): turn three prefills again from nothing, still the cold text.
TEST(PrefixReuse, ConversationWithSlidingWindowsIsTheColdOne) {
  auto target = Gemma();
  auto draft = Gemma(target->shared_pool());
  const int32_t nv = target->config().n_vocab;
  const std::vector<std::vector<int32_t>> user = {VariedTokens(30, nv, 5), VariedTokens(6, nv, 6),
                                                  VariedTokens(4, nv, 7)};
  ModelDrafter drafter(*draft, *target);
  CheckConversation(*target, drafter, "chain:3", user, 5, 30, true);
  // An edit near the end of what the ring holds is resumed there.
  ModelDrafter again(*draft, *target);
  CheckConversation(*target, again, "chain:3", user, 80, 30, false);
}

// The bundled feature drafter reads the target's features: those it keeps of the shared prefix,
// and the target cache, must give the cold text.
TEST(PrefixReuse, ConversationWithTheFeatureDrafterIsTheColdOne) {
  const std::string target_path = ModelPath("grove-base-target.gguf");
  const std::string feature_path = ModelPath("grove-base-feature.gguf");
  ASSERT_TRUE(testing::FileExists(target_path) && testing::FileExists(feature_path));
  auto target = Model::Load(target_path, {.n_threads = 2, .n_ctx = 256});
  OpenedDrafter opened = OpenDrafter(feature_path, *target);
  ASSERT_NE(opened.drafter->feature_reader(), nullptr);
  const Tokenizer& tok = *target->tokenizer();
  const std::vector<std::vector<int32_t>> user = {
      tok.Encode("Once upon a time, there was a little girl named Lily.", true),
      tok.Encode(" One day, she went to the park", false), tok.Encode(" The sun was", false)};
  CheckConversation(*target, *opened.drafter, "chain:3", user, 5, 24, false);
}

}  // namespace
}  // namespace grove
