// Chat templates: how a conversation (`grove chat`, /v1/chat/completions) becomes the prompt text
// a model was trained on. GGUF files carry a Jinja template (`tokenizer.chat_template`); grove does
// not run Jinja but recognises the common families by their marker tokens and renders them itself:
//   Llama-3  "<|start_header_id|>" ... "<|eot_id|>"
//   ChatML   "<|im_start|>" ... "<|im_end|>"   (Qwen, many fine-tunes)
//   Llama-2  "[INST]" ... "[/INST]"             (Llama-2 chat, Mistral instruct)
// and a plain one, documented here, for models without a template (the bundled pair):
//   each message as "<Role>: <content>\n" with Role one of System, User, Assistant, then
//   "Assistant:" for the reply; generation stops at "\nUser:".
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"

namespace grove::chat {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant"
  std::string content;
};

// Messages the renderers refuse (none, or a role they do not know). param() names the field as a
// request names it ("messages", "messages[1].role"), for the server's error object.
class ChatMessagesError : public Error {
 public:
  ChatMessagesError(const std::string& message, std::string param)
      : Error(message), param_(std::move(param)) {}
  const std::string& param() const { return param_; }

 private:
  std::string param_;
};

enum class ChatTemplate { kPlain, kLlama3, kChatMl, kLlama2 };

// The family a GGUF template belongs to; kPlain for an empty or unrecognised one.
ChatTemplate DetectChatTemplate(std::string_view jinja);
std::string_view ChatTemplateName(ChatTemplate t);  // "plain", "llama-3", "chatml", "llama-2"

// The prompt text for the messages, ending where the assistant's reply begins. `bos` is the BOS
// token's text where the family writes it in the text (Llama-3's "<|begin_of_text|>", Llama-2's
// "<s>"); the caller then encodes without adding BOS. Throws ChatMessagesError for an empty list or
// an unknown role.
std::string RenderChat(ChatTemplate t, std::span<const ChatMessage> messages, std::string_view bos);

// Texts that end the assistant's turn for the family (besides the model's end-of-generation
// tokens), e.g. "\nUser:" for plain.
std::vector<std::string> ChatStopStrings(ChatTemplate t);

}  // namespace grove::chat
