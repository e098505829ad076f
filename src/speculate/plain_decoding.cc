#include "speculate/plain_decoding.h"

#include "base/error.h"
#include "base/timer.h"
#include "tokenize/tokenizer.h"

namespace grove {

std::vector<int32_t> GeneratePlain(Model& target, std::span<const int32_t> prompt,
                                   const SamplerParams& sampling, const SessionOptions& options,
                                   const std::function<bool(int32_t)>& on_token,
                                   PlainTiming* timing) {
  const int32_t cached = KeepCachedPrompt(target, options, prompt);
  const int32_t seq = options.target_seq;
  const Tokenizer* tokenizer = target.tokenizer();
  Sampler sampler(sampling);
  Batch batch;
  Timer prefill;
  std::span<const float> logits =
      target.ForwardChain(prompt.subspan(static_cast<std::size_t>(cached)), cached, seq, batch,
                          /*want_logits=*/true);
  if (timing) {
    timing->cached_prompt_tokens = cached;
    timing->prefill_seconds = prefill.Seconds();
  }
  std::vector<int32_t> out;
  if (options.n_predict == 0) return out;
  int32_t position = static_cast<int32_t>(prompt.size());
  Timer timer;
  while (true) {
    const int32_t token = sampler.Sample(logits, options.sequence, position);
    out.push_back(token);
    if (on_token && !on_token(token)) break;
    if (options.stop_at_eog && tokenizer && tokenizer->IsEndOfGeneration(token)) break;
    if (position + 1 >= target.n_ctx() || static_cast<int32_t>(out.size()) == options.n_predict)
      break;
    batch.Clear();
    batch.Add(token, position, seq, -1, true);
    logits = target.Forward(batch);
    ++position;
  }
  if (timing) timing->generation_seconds = timer.Seconds();
  return out;
}

}  // namespace grove
