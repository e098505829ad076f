#include "serve/choice_stream.h"

#include <utility>

#include "serve/completion_service.h"

namespace grove::serve {

ChoiceStream::ChoiceStream(const Tokenizer& tok, int32_t choice, std::vector<std::string> stops,
                           std::optional<bool> split_reasoning)
    : tok_(tok), choice_(choice), decoder_(tok), stop_(std::move(stops)) {
  if (split_reasoning) reasoning_.emplace(*split_reasoning);
}

bool ChoiceStream::Push(Completion& completion, std::span<const int32_t> tokens) {
  if (completion.cancelled()) return false;
  if (!first_tokens_) completion.FirstTokens(choice_);
  first_tokens_ = true;
  for (int32_t token : tokens) {
    if (tok_.IsEndOfGeneration(token)) {
      end_of_generation_ = true;
      break;
    }
    Emit(completion, stop_.Push(decoder_.Push(token)), false);
    if (stop_.stopped()) {
      stopped_ = true;
      return false;
    }
  }
  return true;
}

const char* ChoiceStream::Finish(Completion& completion, const SequenceResult& result) {
  if (!result.error.empty()) return "error";
  std::string rest;
  if (!stopped_) rest = stop_.Push(decoder_.Flush()) + stop_.Flush();
  Emit(completion, std::move(rest), true);
  return stopped_ || end_of_generation_ ? "stop" : "length";
}

void ChoiceStream::Emit(Completion& completion, std::string text, bool end) {
  if (!reasoning_) {
    if (!text.empty()) completion.Push({.choice = choice_, .text = std::move(text)});
    return;
  }
  chat::ReasoningSplitter::Parts parts = reasoning_->Push(text);
  if (end) {
    chat::ReasoningSplitter::Parts rest = reasoning_->Flush();
    parts.reasoning += rest.reasoning;
    parts.content += rest.content;
  }
  if (!parts.reasoning.empty()) {
    completion.Push({.choice = choice_, .text = std::move(parts.reasoning), .reasoning = true});
  }
  if (!parts.content.empty()) {
    completion.Push({.choice = choice_, .text = std::move(parts.content)});
  }
}

}  // namespace grove::serve
