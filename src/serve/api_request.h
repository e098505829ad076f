// The bodies of POST /v1/completions and /v1/chat/completions, read and checked. Every field
// grove uses is validated by type and range with an OpenAI-style error naming the field. Fields
// that would change what a response holds and that grove does not implement (logprobs, echo,
// best_of, penalties, logit_bias, response_format, tool_choice beyond auto/none) are refused unless
// they carry their neutral value; other fields (user, metadata, ...) are ignored, as OpenAI
// ignores unknown ones.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "chat/reasoning_splitter.h"

namespace grove::serve {

// Bounds that depend on the served model and the server's flags.
struct ApiLimits {
  int32_t max_tokens = 4096;  // the context size: max_tokens above it is refused
  int32_t max_n = 16;         // most choices per request
  int32_t max_stops = 4;      // OpenAI's limit on `stop`
};

struct CompletionRequest {
  bool chat = false;
  std::string model;                        // as sent; empty when absent
  std::string prompt;                       // /v1/completions: the prompt text
  std::vector<chat::ChatMessage> messages;  // /v1/chat/completions
  // The messages and tools as sent, keys in the client's order, for the model's own Jinja template
  // (tool calls, tool results and reasoning fields included); set by the HTTP handler.
  nlohmann::ordered_json chat_messages;
  nlohmann::ordered_json tools;
  // Chat: more variables for the template (`chat_template_kwargs`, as vLLM and llama-server take
  // them, e.g. {"enable_thinking": false} for Qwen3), keys in the client's order.
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();
  // Chat: `reasoning_format` ("none", "deepseek" or "auto"); absent: the server's choice.
  std::optional<chat::ReasoningFormat> reasoning_format;
  int32_t max_tokens = 256;  // default when absent (`max_completion_tokens` too, for chat)
  // Sampling; absent: the server's defaults (ServiceOptions::sampling, from `grove serve --temp
  // --top-k --top-p --min-p`, as llama-server does). temperature in [0, 2], top_p in (0, 1], and
  // llama-server's and vLLM's top_k >= 0 (0: off) and min_p in [0, 1] (0: off).
  std::optional<float> temperature;
  std::optional<float> top_p;
  std::optional<int32_t> top_k;
  std::optional<float> min_p;
  std::optional<uint64_t> seed;   // absent: the server draws one per request
  std::vector<std::string> stop;  // a string or an array of at most max_stops strings
  int32_t n = 1;                  // choices, 1..max_n
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  // grove's extension: "grove": {"speculation": "off" | "auto" | a tree spec such as "sequoia:8"}.
  std::string speculation = "auto";
};

// Throws ApiError (400) naming the field: a body that is not a JSON object, a missing prompt or
// messages, a wrong type (e.g. "max_tokens": "ten"), a value out of range (max_tokens <= 0 or above
// limits.max_tokens, temperature outside [0, 2], top_p outside (0, 1], top_k < 0, min_p outside
// [0, 1], n outside [1, max_n], more
// than max_stops stops), a prompt given as an array of several prompts or as token ids (not
// supported: said so), messages whose content is not a string (or an array of text parts), an
// unknown role, "grove" not an object or its speculation not a string.
CompletionRequest ParseCompletionRequest(const nlohmann::json& body, bool chat,
                                         const ApiLimits& limits);

}  // namespace grove::serve
