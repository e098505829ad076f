// The response bodies of the completion endpoints, in OpenAI's shapes: a whole completion
// ("text_completion" / "chat.completion") and the chunks of a stream ("text_completion" /
// "chat.completion.chunk"), with `usage` and grove's extension object:
//   "grove": {"speculation": "sequoia:4,4" | "off", "tau": 2.4, "steps": 51,
//             "acceptance_by_depth": [0.83, 0.61, ...]}
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/completion_service.h"

namespace grove::serve {

// The text of a response body. Bytes that are not UTF-8 (a quoted piece of a bad request in an
// error message, a model's text cut inside a character) become U+FFFD rather than making the dump
// throw, which once turned a 400 into a 500 with the JSON library's text.
std::string ResponseText(const nlohmann::json& body);

// What a finished completion produced, per choice.
struct CompletionTexts {
  std::vector<std::string> text;
  std::vector<std::string> reasoning;  // chat: reasoning_content (reasoning_splitter.h), if any
  std::vector<std::string> finish_reason;
};

nlohmann::json CompletionBody(const Completion& completion, const CompletionTexts& texts, bool chat,
                              const std::string& model);
// A stream chunk for one choice: text (chat: the delta's content, or its reasoning_content when
// `reasoning`; `first` adds the role), or, with a finish_reason, the choice's last chunk.
nlohmann::json StreamChunk(const Completion& completion, bool chat, const std::string& model,
                           int choice, const std::string* text, const std::string* finish_reason,
                           bool first, bool reasoning = false);
// The stream's last chunk: no choices, the timings, grove's statistics, and usage when asked for.
nlohmann::json StreamSummary(const Completion& completion, bool chat, const std::string& model,
                             bool include_usage);
nlohmann::json Usage(const Completion& completion);
nlohmann::json GroveStats(const Completion& completion);
// llama-server's `timings` object, so that a client sees what speculation did for it: prompt_n and
// predicted_n (the request's tokens), prompt_ms (the prefill measured by each sequence) and
// predicted_ms (from the end of the prefill to the last token, wall clock: time spent sharing
// forwards with other requests included), their per-token and per-second figures, draft_n (draft
// tokens verified) and draft_n_accepted. With n > 1 choices the times and counts add up over them.
nlohmann::json Timings(const Completion& completion);

}  // namespace grove::serve
