#include "serve/api_response.h"

namespace grove::serve {
namespace {

nlohmann::json Envelope(const Completion& completion, const char* object,
                        const std::string& model) {
  return {{"id", completion.id()},
          {"object", object},
          {"created", completion.created()},
          {"model", model},
          {"system_fingerprint", "grove"}};
}

}  // namespace

std::string ResponseText(const nlohmann::json& body) {
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

nlohmann::json Usage(const Completion& completion) {
  return {{"prompt_tokens", completion.prompt_tokens()},
          {"completion_tokens", completion.completion_tokens()},
          {"total_tokens", completion.prompt_tokens() + completion.completion_tokens()}};
}

nlohmann::json GroveStats(const Completion& completion) {
  const SpeculationStats s = completion.speculation();
  return {{"speculation", completion.tree()},
          {"drafter", completion.drafter()},
          {"steps", s.steps},
          {"tau", s.tau()},
          {"acceptance_by_depth", s.acceptance_by_depth()}};
}

nlohmann::json Timings(const Completion& completion) {
  const SpeculationStats s = completion.speculation();
  const auto per_token_ms = [](double seconds, int64_t n) { return n ? 1e3 * seconds / n : 0.0; };
  const auto per_second = [](double seconds, int64_t n) { return seconds > 0 ? n / seconds : 0.0; };
  const int64_t prompt_n = completion.prompt_tokens();
  const int64_t predicted_n = completion.completion_tokens();
  // llama-server's: the prompt's time runs to the first token, the predicted tokens (all choices,
  // the first included) over the time after it (Completion::prompt_seconds).
  const double prompt_seconds = completion.prompt_seconds();
  const double predicted_seconds = completion.generation_seconds();
  return {{"prompt_n", prompt_n},
          {"prompt_ms", 1e3 * prompt_seconds},
          {"prompt_per_token_ms", per_token_ms(prompt_seconds, prompt_n)},
          {"prompt_per_second", per_second(prompt_seconds, prompt_n)},
          {"predicted_n", predicted_n},
          {"predicted_ms", 1e3 * predicted_seconds},
          {"predicted_per_token_ms", per_token_ms(predicted_seconds, predicted_n)},
          {"predicted_per_second", per_second(predicted_seconds, predicted_n)},
          {"draft_n", s.tree_nodes},
          {"draft_n_accepted", s.accepted()}};
}

nlohmann::json CompletionBody(const Completion& completion, const CompletionTexts& texts, bool chat,
                              const std::string& model) {
  nlohmann::json body = Envelope(completion, chat ? "chat.completion" : "text_completion", model);
  nlohmann::json choices = nlohmann::json::array();
  for (std::size_t i = 0; i < texts.text.size(); ++i) {
    nlohmann::json choice{
        {"index", i}, {"logprobs", nullptr}, {"finish_reason", texts.finish_reason[i]}};
    if (chat) {
      choice["message"] = {{"role", "assistant"}, {"content", texts.text[i]}};
      // As llama-server: present only when the model reasoned (and the client asked for it).
      if (i < texts.reasoning.size() && !texts.reasoning[i].empty()) {
        choice["message"]["reasoning_content"] = texts.reasoning[i];
      }
    } else {
      choice["text"] = texts.text[i];
    }
    choices.push_back(std::move(choice));
  }
  body["choices"] = std::move(choices);
  body["usage"] = Usage(completion);
  body["timings"] = Timings(completion);
  body["grove"] = GroveStats(completion);
  return body;
}

nlohmann::json StreamChunk(const Completion& completion, bool chat, const std::string& model,
                           int choice, const std::string* text, const std::string* finish_reason,
                           bool first, bool reasoning) {
  nlohmann::json body =
      Envelope(completion, chat ? "chat.completion.chunk" : "text_completion", model);
  nlohmann::json c{{"index", choice},
                   {"logprobs", nullptr},
                   {"finish_reason", finish_reason ? nlohmann::json(*finish_reason) : nullptr}};
  if (chat) {
    nlohmann::json delta = nlohmann::json::object();
    if (first) delta["role"] = "assistant";
    if (text) delta[reasoning ? "reasoning_content" : "content"] = *text;
    c["delta"] = std::move(delta);
  } else {
    c["text"] = text ? *text : "";
  }
  body["choices"] = nlohmann::json::array({std::move(c)});
  return body;
}

nlohmann::json StreamSummary(const Completion& completion, bool chat, const std::string& model,
                             bool include_usage) {
  nlohmann::json body =
      Envelope(completion, chat ? "chat.completion.chunk" : "text_completion", model);
  body["choices"] = nlohmann::json::array();
  if (include_usage) body["usage"] = Usage(completion);
  body["timings"] = Timings(completion);
  body["grove"] = GroveStats(completion);
  return body;
}

}  // namespace grove::serve
