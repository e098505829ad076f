#include "tot/scheduled_generator.h"

namespace grove {

ScheduledGenerator::ScheduledGenerator(Scheduler& scheduler, const Tokenizer& tokenizer)
    : scheduler_(scheduler), tokenizer_(tokenizer) {}

std::vector<std::string> ScheduledGenerator::Generate(std::span<const GenerationRequest> requests) {
  requests_.resize(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const GenerationRequest& g = requests[i];
    SequenceRequest& q = requests_[i];
    q.prompt = tokenizer_.Encode(g.prompt, tokenizer_.add_bos_by_default());
    q.sequence = g.sequence;
    q.n_predict = g.max_tokens;
    q.shares_prompt_with = g.shares_prompt_with;
  }
  std::vector<SequenceResult> results = scheduler_.Run(requests_);
  totals_ += scheduler_.stats();
  std::vector<std::string> texts;
  texts.reserve(results.size());
  for (SequenceResult& result : results) {
    std::span<const int32_t> shown(result.tokens);
    if (!shown.empty() && tokenizer_.IsEndOfGeneration(shown.back())) {
      shown = shown.first(shown.size() - 1);
    }
    texts.push_back(tokenizer_.Decode(shown));
    outputs_.push_back(std::move(result.tokens));
  }
  return texts;
}

}  // namespace grove
