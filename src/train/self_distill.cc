#include "train/self_distill.h"

#include <algorithm>

#include "base/error.h"
#include "tokenize/tokenizer.h"

namespace grove {

std::vector<std::vector<int32_t>> SelfDistill(
    Model& target, std::span<const std::vector<int32_t>> prompts, const SelfDistillOptions& options,
    const std::function<void(int64_t, int64_t)>& progress) {
  for (const std::vector<int32_t>& p : prompts) {
    if (p.empty() || static_cast<int32_t>(p.size()) >= target.n_ctx())
      Fail("self-distill: a prompt of ", p.size(), " tokens for a context of ", target.n_ctx());
  }
  const Tokenizer* tokenizer = target.tokenizer();
  Sampler sampler(options.sampling);
  std::vector<std::vector<int32_t>> out(prompts.size());
  // One lane per KV-cache slot: the prompt it decodes (-1: idle), its next position, the token it
  // feeds next.
  struct Lane {
    int64_t prompt = -1;
    int32_t position = 0;
    int32_t next = 0;
  };
  std::vector<Lane> lanes(static_cast<std::size_t>(target.n_seq()));
  std::size_t queued = 0;
  int64_t done = 0, tokens = 0;
  Batch prefill, step;
  // Emits `token` for the lane's prompt; false when its document ends there.
  auto emit = [&](Lane& lane, int32_t token) {
    std::vector<int32_t>& text = out[static_cast<std::size_t>(lane.prompt)];
    if (tokenizer && tokenizer->IsEndOfGeneration(token)) return false;
    text.push_back(token);
    ++tokens;
    lane.next = token;
    return static_cast<int32_t>(text.size()) < options.max_new_tokens &&
           lane.position + 1 < target.n_ctx();
  };
  auto start = [&](int32_t seq, Lane& lane) {
    while (queued < prompts.size() &&
           (options.token_budget <= 0 || tokens < options.token_budget)) {
      lane.prompt = static_cast<int64_t>(queued++);
      const std::vector<int32_t>& p = prompts[static_cast<std::size_t>(lane.prompt)];
      target.cache(seq).Clear();
      const std::span<const float> logits = target.ForwardChain(p, 0, seq, prefill, true);
      lane.position = static_cast<int32_t>(p.size());
      if (options.max_new_tokens > 0 &&
          emit(lane, sampler.Sample(logits, static_cast<uint64_t>(lane.prompt), lane.position)))
        return;
      ++done;
    }
    lane.prompt = -1;
  };
  for (std::size_t s = 0; s < lanes.size(); ++s) start(static_cast<int32_t>(s), lanes[s]);
  while (true) {
    step.Clear();
    for (std::size_t s = 0; s < lanes.size(); ++s) {
      if (lanes[s].prompt >= 0)
        step.Add(lanes[s].next, lanes[s].position, static_cast<int32_t>(s), -1, true);
    }
    if (step.size() == 0) break;
    const std::span<const float> logits = target.Forward(step);
    const auto n_vocab = static_cast<std::size_t>(target.config().n_vocab);
    std::size_t row = 0;
    for (std::size_t s = 0; s < lanes.size(); ++s) {
      Lane& lane = lanes[s];
      if (lane.prompt < 0) continue;
      ++lane.position;
      const int32_t token = sampler.Sample(logits.subspan(row++ * n_vocab, n_vocab),
                                           static_cast<uint64_t>(lane.prompt), lane.position);
      if (!emit(lane, token)) {
        ++done;
        start(static_cast<int32_t>(s), lane);
      }
    }
    if (progress) progress(done, tokens);
  }
  return out;
}

}  // namespace grove
