#include "bench_timing.h"

#include <algorithm>

#include "base/timer.h"

namespace grove::cli {

BenchTimer::BenchTimer(Model& model, uint64_t seed)
    : model_(model), rng_(seed), token_(0, model.config().n_vocab - 1) {
  batch_.tokens.reserve(model.max_batch());
  chain_.reserve(model.max_batch());
}

void BenchTimer::AddRandomChain(int32_t n, bool all_logits) {
  chain_.clear();
  for (int32_t i = 0; i < n; ++i) chain_.push_back(token_(rng_));
  batch_.Clear();
  batch_.AddChain(chain_, model_.cache(0).length(), 0, all_logits);
}

int64_t BenchTimer::Prefill(int32_t n_tokens) {
  int64_t experts = 0;
  for (int32_t done = 0; done < n_tokens;) {
    const int32_t chunk = std::min(n_tokens - done, model_.max_batch());
    AddRandomChain(chunk, /*all_logits=*/false);
    model_.Forward(batch_);
    experts += model_.experts_read().experts;
    done += chunk;
  }
  return experts;
}

TimedRun BenchTimer::Prompt(int32_t n_tokens) {
  model_.cache(0).Clear();
  Timer timer;
  const int64_t experts = Prefill(n_tokens);
  const double seconds = timer.Seconds();
  const int32_t chunks = (n_tokens + model_.max_batch() - 1) / model_.max_batch();
  return {seconds, chunks, experts};
}

TimedRun BenchTimer::Generate(int32_t n_tokens) {
  model_.cache(0).Clear();
  Prefill(kGeneratePrefix);
  Timer timer;
  int64_t experts = 0;
  for (int32_t i = 0; i < n_tokens; ++i) {
    AddRandomChain(1, /*all_logits=*/true);
    model_.Forward(batch_);
    experts += model_.experts_read().experts;
  }
  return {timer.Seconds(), n_tokens, experts};
}

std::vector<BenchTimer::CurveSamples> BenchTimer::VerifyCurve(std::span<const int32_t> ns,
                                                              int32_t n_prefix, int repetitions) {
  KvCache& cache = model_.cache(0);
  cache.Clear();
  Prefill(n_prefix);
  std::vector<CurveSamples> samples(ns.size());
  for (int rep = -1; rep < repetitions; ++rep) {  // round -1 warms up every shape, not counted
    for (std::size_t i = 0; i < ns.size(); ++i) {
      // A chain is the costliest tree of n nodes for attention (each node sees all before it), so
      // the curve is an upper bound for any tree shape; the matmuls cost the same for every shape.
      AddRandomChain(ns[i], /*all_logits=*/true);
      Timer timer;
      model_.Forward(batch_);
      const double seconds = timer.Seconds();
      cache.Truncate(n_prefix);
      if (rep >= 0) {
        samples[i].seconds.push_back(seconds);
        samples[i].experts_per_layer.push_back(model_.experts_read().per_layer());
      }
    }
  }
  return samples;
}

}  // namespace grove::cli
