#include "serve/api_request.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "serve/api_error.h"

namespace grove::serve {

namespace {

using nlohmann::json;

[[noreturn]] void Refuse(const std::string& param, std::string_view problem) {
  throw ApiError(400, StrCat(param, " ", problem), "invalid_request_error", param);
}

// The value as the client wrote it, cut short so that a huge value does not fill the message.
std::string Shown(const json& value) {
  constexpr size_t kMaxShown = 60;
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > kMaxShown) text = text.substr(0, kMaxShown) + "...";
  return text;
}

[[noreturn]] void RefuseValue(const std::string& param, std::string_view expected,
                              const json& value) {
  Refuse(param, StrCat("must be ", expected, ", got ", Shown(value)));
}

// The field, or nullptr when absent or null: OpenAI's clients send null for "not set".
const json* Field(const json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

// An integer in [lo, hi]. JSON integers beyond int64 arrive unsigned; a value such as 2.0 is a
// float in JSON and refused, as OpenAI refuses it.
int64_t ReadInt(const json& value, const std::string& param, int64_t lo, int64_t hi) {
  std::string expected = StrCat("an integer from ", lo, " to ", hi);
  if (!value.is_number_integer()) RefuseValue(param, expected, value);
  if (value.is_number_unsigned() &&
      value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    RefuseValue(param, expected, value);
  }
  int64_t v = value.get<int64_t>();
  if (v < lo || v > hi) RefuseValue(param, expected, value);
  return v;
}

// A number (integer or not) in [lo, hi], or (lo, hi] when lo_open.
float ReadNumber(const json& value, const std::string& param, double lo, double hi, bool lo_open) {
  std::string expected = lo_open ? StrCat("a number greater than ", lo, " and at most ", hi)
                                 : StrCat("a number from ", lo, " to ", hi);
  if (!value.is_number()) RefuseValue(param, expected, value);
  double v = value.get<double>();
  if ((lo_open ? v <= lo : v < lo) || v > hi) RefuseValue(param, expected, value);
  return static_cast<float>(v);
}

bool ReadBool(const json& value, const std::string& param) {
  if (!value.is_boolean()) RefuseValue(param, "a boolean", value);
  return value.get<bool>();
}

std::string ReadString(const json& value, const std::string& param) {
  if (!value.is_string()) RefuseValue(param, "a string", value);
  return value.get<std::string>();
}

// "prompt": a string, or an array holding exactly one string. Several prompts (one choice set
// each) and token ids are OpenAI features grove does not serve; say so rather than guess.
std::string ReadPrompt(const json& body) {
  const json* prompt = Field(body, "prompt");
  if (prompt == nullptr) Refuse("prompt", "is required");
  if (prompt->is_string()) return prompt->get<std::string>();
  if (!prompt->is_array()) RefuseValue("prompt", "a string", *prompt);
  if (!prompt->empty() && ((*prompt)[0].is_number() || (*prompt)[0].is_array())) {
    Refuse("prompt", "as token ids is not supported; send the prompt as a string");
  }
  if (prompt->size() != 1) {
    Refuse("prompt", StrCat("as an array must hold exactly one string (several prompts in one "
                            "request are not supported), got ",
                            prompt->size(), " elements"));
  }
  return ReadString((*prompt)[0], "prompt[0]");
}

// A message's content: a string, or an array of text parts {"type": "text", "text": ...} joined
// in order, one line each, as llama-server and vLLM join them for a template that takes strings.
// Images and audio parts are refused: the served models read text only.
std::string ReadContent(const json& message, const std::string& param, const std::string& role) {
  const json* content = Field(message, "content");
  if (content == nullptr) {
    // An assistant message that only called tools carries null content.
    if (role == "assistant") return "";
    Refuse(param, "is required for a " + role + " message");
  }
  if (content->is_string()) return content->get<std::string>();
  if (!content->is_array()) {
    RefuseValue(param, "a string or an array of text parts", *content);
  }
  std::string text;
  for (size_t i = 0; i < content->size(); ++i) {
    const json& part = (*content)[i];
    std::string part_param = StrCat(param, "[", i, "]");
    if (!part.is_object()) {
      RefuseValue(part_param, "an object {\"type\": \"text\", \"text\": ...}", part);
    }
    const json* type = Field(part, "type");
    if (type == nullptr || !type->is_string() || type->get<std::string>() != "text") {
      Refuse(part_param + ".type", StrCat("must be \"text\" (only text parts are supported), got ",
                                          type == nullptr ? "nothing" : Shown(*type)));
    }
    const json* part_text = Field(part, "text");
    if (part_text == nullptr) Refuse(part_param + ".text", "is required");
    if (i > 0) text += '\n';
    text += ReadString(*part_text, part_param + ".text");
  }
  return text;
}

std::vector<chat::ChatMessage> ReadMessages(const json& body) {
  const json* messages = Field(body, "messages");
  if (messages == nullptr) Refuse("messages", "is required");
  if (!messages->is_array()) RefuseValue("messages", "a non-empty array", *messages);
  if (messages->empty()) Refuse("messages", "must be a non-empty array, got []");
  std::vector<chat::ChatMessage> out;
  out.reserve(messages->size());
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& message = (*messages)[i];
    std::string param = StrCat("messages[", i, "]");
    if (!message.is_object()) RefuseValue(param, "an object with role and content", message);
    const json* role_value = Field(message, "role");
    if (role_value == nullptr) Refuse(param + ".role", "is required");
    std::string role = ReadString(*role_value, param + ".role");
    // OpenAI's newer models take "developer" for what older ones call "system".
    if (role == "developer") role = "system";
    if (role != "system" && role != "user" && role != "assistant" && role != "tool") {
      RefuseValue(param + ".role", "one of \"system\", \"user\", \"assistant\", \"tool\"",
                  *role_value);
    }
    std::string content = ReadContent(message, param + ".content", role);
    out.push_back({std::move(role), std::move(content)});
  }
  return out;
}

std::vector<std::string> ReadStop(const json& value, int32_t max_stops) {
  if (value.is_string()) return {value.get<std::string>()};
  if (!value.is_array()) RefuseValue("stop", "a string or an array of strings", value);
  if (value.size() > static_cast<size_t>(max_stops)) {
    Refuse("stop", StrCat("must hold at most ", max_stops, " strings, got ", value.size()));
  }
  std::vector<std::string> stops;
  for (size_t i = 0; i < value.size(); ++i) {
    stops.push_back(ReadString(value[i], StrCat("stop[", i, "]")));
  }
  return stops;
}

// max_tokens, or for chat its newer name max_completion_tokens; both given must agree.
int32_t ReadMaxTokens(const json& body, bool chat, const ApiLimits& limits) {
  std::optional<int64_t> max_tokens, max_completion_tokens;
  if (const json* v = Field(body, "max_tokens")) {
    max_tokens = ReadInt(*v, "max_tokens", 1, limits.max_tokens);
  }
  if (chat) {
    if (const json* v = Field(body, "max_completion_tokens")) {
      max_completion_tokens = ReadInt(*v, "max_completion_tokens", 1, limits.max_tokens);
    }
  }
  if (max_tokens && max_completion_tokens && *max_tokens != *max_completion_tokens) {
    Refuse("max_completion_tokens", StrCat("and max_tokens differ (", *max_completion_tokens,
                                           " and ", *max_tokens, "); send one of them"));
  }
  if (max_completion_tokens) return static_cast<int32_t>(*max_completion_tokens);
  if (max_tokens) return static_cast<int32_t>(*max_tokens);
  // The default, shortened to what the model can hold at all.
  return std::min(CompletionRequest{}.max_tokens, limits.max_tokens);
}

// OpenAI fields that change what a response holds and that grove does not implement: refused
// when they ask for something (a client relying on them would otherwise read a response that
// silently lacks it), accepted at their neutral value.
void RefuseUnimplemented(const json& body, bool chat) {
  auto truthy = [](const json& v) {
    return !(v.is_boolean() && !v.get<bool>()) && !(v.is_number() && v.get<double>() == 0);
  };
  for (const char* name :
       {"logprobs", "top_logprobs", "echo", "suffix", "presence_penalty", "frequency_penalty"}) {
    const json* v = Field(body, name);
    if (v && truthy(*v) && !(v->is_string() && v->get_ref<const std::string&>().empty())) {
      Refuse(name, "is not supported by grove (omit it, or send null)");
    }
  }
  if (const json* v = Field(body, "best_of"); v && !(v->is_number_integer() && *v == 1)) {
    Refuse("best_of", "is not supported by grove (omit it, or send 1; n gives several choices)");
  }
  if (const json* v = Field(body, "logit_bias"); v && !(v->is_object() && v->empty())) {
    Refuse("logit_bias", "is not supported by grove (omit it, or send {})");
  }
  if (const json* v = Field(body, "response_format");
      v && !(v->is_object() && v->value("type", "") == "text")) {
    Refuse("response_format", "is not supported by grove beyond {\"type\": \"text\"}");
  }
  if (chat) {
    if (const json* v = Field(body, "tool_choice");
        v && !(v->is_string() && (*v == "auto" || *v == "none"))) {
      Refuse("tool_choice", "is not supported by grove beyond \"auto\" and \"none\"");
    }
  }
}

}  // namespace

namespace {

// temperature, top_p, top_k, min_p and seed, each with the command line's range.
void ReadSampling(const json& body, CompletionRequest& request) {
  if (const json* v = Field(body, "temperature")) {
    request.temperature = ReadNumber(*v, "temperature", 0, 2, /*lo_open=*/false);
  }
  if (const json* v = Field(body, "top_p")) {
    request.top_p = ReadNumber(*v, "top_p", 0, 1, /*lo_open=*/true);
  }
  if (const json* v = Field(body, "top_k")) {
    request.top_k = static_cast<int32_t>(ReadInt(*v, "top_k", 0, 1 << 30));
  }
  if (const json* v = Field(body, "min_p")) {
    request.min_p = ReadNumber(*v, "min_p", 0, 1, /*lo_open=*/false);
  }
  if (const json* v = Field(body, "seed")) {
    // A negative seed is more likely a mistake than a request for 2^64 - 1; refuse it.
    if (!v->is_number_integer() || (!v->is_number_unsigned() && v->get<int64_t>() < 0)) {
      RefuseValue("seed", "a non-negative integer", *v);
    }
    request.seed = v->get<uint64_t>();
  }
}

void ReadStreaming(const json& body, CompletionRequest& request) {
  if (const json* v = Field(body, "stream")) request.stream = ReadBool(*v, "stream");
  if (const json* v = Field(body, "stream_options")) {
    if (!v->is_object()) RefuseValue("stream_options", "an object", *v);
    if (const json* usage = Field(*v, "include_usage")) {
      request.include_usage = ReadBool(*usage, "stream_options.include_usage");
    }
  }
}

// A chat's reasoning_format and chat_template_kwargs (read into the template by SetChatJson).
void ReadChatOptions(const json& body, CompletionRequest& request) {
  if (const json* v = Field(body, "reasoning_format")) {
    chat::ReasoningFormat format;
    if (!v->is_string() || !chat::ParseReasoningFormat(v->get_ref<const std::string&>(), &format)) {
      RefuseValue("reasoning_format", "\"none\", \"deepseek\" or \"auto\"", *v);
    }
    request.reasoning_format = format;
  }
  if (const json* v = Field(body, "chat_template_kwargs")) {
    if (!v->is_object()) RefuseValue("chat_template_kwargs", "an object", *v);
  }
}

// grove's own fields: {"grove": {"speculation": "off" | "auto" | a tree spec}}.
void ReadGroveOptions(const json& body, CompletionRequest& request) {
  const json* v = Field(body, "grove");
  if (v == nullptr) return;
  if (!v->is_object()) RefuseValue("grove", "an object", *v);
  if (const json* spec = Field(*v, "speculation")) {
    if (!spec->is_string() || spec->get_ref<const std::string&>().empty()) {
      RefuseValue("grove.speculation", "\"off\", \"auto\" or a tree spec such as \"sequoia:8\"",
                  *spec);
    }
    request.speculation = spec->get<std::string>();
  }
}

}  // namespace

CompletionRequest ParseCompletionRequest(const nlohmann::json& body, bool chat,
                                         const ApiLimits& limits) {
  if (!body.is_object()) {
    throw ApiError(400, StrCat("the request body must be a JSON object, got ", body.type_name()));
  }
  RefuseUnimplemented(body, chat);
  CompletionRequest request;
  request.chat = chat;
  if (const json* v = Field(body, "model")) request.model = ReadString(*v, "model");
  if (chat) {
    request.messages = ReadMessages(body);
  } else {
    request.prompt = ReadPrompt(body);
  }
  request.max_tokens = ReadMaxTokens(body, chat, limits);
  ReadSampling(body, request);
  if (const json* v = Field(body, "stop")) request.stop = ReadStop(*v, limits.max_stops);
  if (const json* v = Field(body, "n")) {
    request.n = static_cast<int32_t>(ReadInt(*v, "n", 1, limits.max_n));
  }
  ReadStreaming(body, request);
  if (chat) ReadChatOptions(body, request);
  ReadGroveOptions(body, request);
  return request;
}

}  // namespace grove::serve
