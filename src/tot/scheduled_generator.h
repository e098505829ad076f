// The search's generations (tot/generation.h) run on a Scheduler: prompts tokenized with the
// target's tokenizer, each call's requests scheduled together under the scheduler's policy
// (siblings fork their shared prompt), texts decoded without the stop token. It keeps every
// call's tokens, so runs under different policies can be compared sequence by sequence, and the
// scheduler's statistics summed over calls.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "schedule/scheduler.h"
#include "tokenize/tokenizer.h"
#include "tot/generation.h"

namespace grove {

class ScheduledGenerator {
 public:
  ScheduledGenerator(Scheduler& scheduler, const Tokenizer& tokenizer);

  std::vector<std::string> Generate(std::span<const GenerationRequest> requests);
  GenerateFn AsFunction() {
    return [this](std::span<const GenerationRequest> r) { return Generate(r); };
  }

  // Statistics of every call so far, summed (max_in_flight: the largest).
  const ScheduleStats& totals() const { return totals_; }
  // Every generation's tokens so far, in call and request order.
  const std::vector<std::vector<int32_t>>& outputs() const { return outputs_; }

 private:
  Scheduler& scheduler_;
  const Tokenizer& tokenizer_;
  std::vector<SequenceRequest> requests_;
  ScheduleStats totals_;
  std::vector<std::vector<int32_t>> outputs_;
};

}  // namespace grove
