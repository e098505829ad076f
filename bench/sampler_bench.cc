// Sampler::Distribution per vocabulary row: what a speculative step pays for every draft level it
// expands and every target row verification reads when sampling (the default sampler: T 0.8,
// top-k 40, top-p 0.95, min-p 0.05).
//
// Rows are logits of one of two shapes: "peaked" (a few tokens far ahead of a normal tail, as a
// trained model's rows mostly are) and "flat" (the tail alone, the worst case for top-p).
//
//   sampler_bench --benchmark_filter=Distribution --benchmark_repetitions=5
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "sample/sampler.h"

namespace grove {
namespace {

constexpr int kRows = 64;  // distinct rows cycled through, so no row's answer is cached

std::vector<std::vector<float>> MakeRows(int64_t n_vocab, bool peaked) {
  std::mt19937 rng(7);
  std::normal_distribution<float> tail(0.0f, 2.0f);
  std::uniform_int_distribution<int64_t> token(0, n_vocab - 1);
  std::vector<std::vector<float>> rows(kRows, std::vector<float>(n_vocab));
  for (auto& row : rows) {
    for (float& v : row) v = tail(rng);
    if (peaked) {
      for (float lead : {14.0f, 12.5f, 11.0f, 10.0f}) row[token(rng)] = lead;
    }
  }
  return rows;
}

// Args: vocabulary size, peaked (1) or flat (0), top-k (40 the default; 0 off, as OpenAI-style
// clients that send only top-p leave it).
void BM_Distribution(benchmark::State& state) {
  const auto rows = MakeRows(state.range(0), state.range(1) != 0);
  Sampler sampler(SamplerParams{.top_k = static_cast<int32_t>(state.range(2))});
  std::vector<float> probs(rows[0].size());
  int r = 0;
  for (auto _ : state) {
    sampler.Distribution(rows[r], probs);
    benchmark::DoNotOptimize(probs.data());
    r = (r + 1) % kRows;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Distribution)->ArgsProduct({{3072, 32000, 151936}, {1, 0}, {40, 0}});

}  // namespace
}  // namespace grove

BENCHMARK_MAIN();
