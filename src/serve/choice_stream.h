// One choice of a completion as its client sees it: the tokens the scheduler accepts become text
// (whole characters: TokenStreamDecoder), cut at the first stop string (stop_matcher.h), split
// into reasoning and content when the request asks (reasoning_splitter.h), and pushed to the
// completion as they come. Used on the scheduler's thread only.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "chat/reasoning_splitter.h"
#include "chat/stop_matcher.h"
#include "schedule/scheduler.h"
#include "tokenize/tokenizer.h"

namespace grove::serve {

class Completion;

class ChoiceStream {
 public:
  // split_reasoning: whether to split, and if so whether the prompt left a thinking block open.
  ChoiceStream(const Tokenizer& tok, int32_t choice, std::vector<std::string> stops,
               std::optional<bool> split_reasoning);

  // A step's tokens. False: the choice ends at this step (a stop string, or a client gone).
  bool Push(Completion& completion, std::span<const int32_t> tokens);
  // The sequence ended: the rest of the text (unless it failed) goes to the client. Returns the
  // finish reason: "stop" (a stop string or the end of generation), "length" or "error".
  const char* Finish(Completion& completion, const SequenceResult& result);

 private:
  // Hands text that passed the stop strings to the client; `end`: the text is complete (releases
  // what the splitter holds).
  void Emit(Completion& completion, std::string text, bool end);

  const Tokenizer& tok_;
  const int32_t choice_;
  TokenStreamDecoder decoder_;
  chat::StopMatcher stop_;
  std::optional<chat::ReasoningSplitter> reasoning_;
  bool stopped_ = false;
  bool end_of_generation_ = false;
  bool first_tokens_ = false;  // the first step's tokens came (Completion::FirstTokens)
};

}  // namespace grove::serve
