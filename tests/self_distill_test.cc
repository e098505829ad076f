// Self-distillation: the target's continuations decoded several at a time (one KV slot per lane,
// one batched forward per token) are token for token what plain decoding gives each prompt alone,
// greedy and sampled; the token budget stops starting new prompts.
#include <gtest/gtest.h>

#include "speculate/plain_decoding.h"
#include "test_support.h"
#include "tokenize/tokenizer.h"
#include "train/self_distill.h"

namespace grove {
namespace {

std::vector<std::vector<int32_t>> Prompts(int32_t n_vocab) {
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 7; ++i) {
    std::vector<int32_t> p;
    for (int j = 0; j < 3 + i % 4; ++j) p.push_back((i * 31 + j * 7 + 5) % n_vocab);
    prompts.push_back(p);
  }
  return prompts;
}

TEST(SelfDistill, LanesDecodeWhatPlainDecodingGivesEachPromptAlone) {
  const RandomModelSpec spec = testing::TinySpec(GgmlType::kQ8_0, 7);
  auto lanes = testing::MakeRandomModel(spec, {.n_threads = 1, .n_ctx = 64, .n_seq = 3});
  auto alone = testing::MakeRandomModel(spec, {.n_threads = 1, .n_ctx = 64});
  const std::vector<std::vector<int32_t>> prompts = Prompts(lanes->config().n_vocab);
  for (const SamplerParams& sampling :
       {SamplerParams{.temperature = 0.0f},
        SamplerParams{.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = 3}}) {
    int64_t last_done = 0;
    const std::vector<std::vector<int32_t>> out =
        SelfDistill(*lanes, prompts, {.max_new_tokens = 12, .sampling = sampling},
                    [&](int64_t done, int64_t) { last_done = done; });
    ASSERT_EQ(out.size(), prompts.size());
    EXPECT_EQ(last_done, static_cast<int64_t>(prompts.size()));
    for (std::size_t i = 0; i < prompts.size(); ++i) {
      std::vector<int32_t> plain = GeneratePlain(
          *alone, prompts[i], sampling,
          {.n_predict = 12, .stop_at_eog = true, .sequence = static_cast<uint64_t>(i)}, {});
      // Plain decoding emits the end-of-generation token it stops at; a document does not keep it.
      if (!plain.empty() && alone->tokenizer()->IsEndOfGeneration(plain.back())) plain.pop_back();
      EXPECT_EQ(out[i], plain) << "prompt " << i << " at temperature " << sampling.temperature;
    }
  }
}

TEST(SelfDistill, BudgetStopsStartingPrompts) {
  auto target = testing::MakeRandomModel(testing::TinySpec(GgmlType::kQ8_0, 7),
                                         {.n_threads = 1, .n_ctx = 64, .n_seq = 2});
  const std::vector<std::vector<int32_t>> prompts = Prompts(target->config().n_vocab);
  const auto out = SelfDistill(*target, prompts, {.max_new_tokens = 10, .token_budget = 15});
  int64_t total = 0, started = 0;
  for (const auto& o : out) {
    total += static_cast<int64_t>(o.size());
    started += !o.empty();
  }
  EXPECT_GE(total, 15);
  EXPECT_LE(total, 15 + 2 * 10);  // at most the two lanes in flight finish past it
  EXPECT_LT(started, static_cast<int64_t>(prompts.size()));
}

}  // namespace
}  // namespace grove
