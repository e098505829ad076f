#include "chat/chat_template.h"

#include "base/error.h"
#include "base/named.h"

namespace grove::chat {

namespace {

bool Contains(std::string_view text, std::string_view marker) {
  return text.find(marker) != std::string_view::npos;
}

// Meta's Llama-2 and Llama-3 templates strip each message (`| trim`, `.strip()`); ChatML's do not.
std::string_view Trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\r\f\v";
  size_t begin = s.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  size_t end = s.find_last_not_of(kSpace);
  return s.substr(begin, end - begin + 1);
}

// Every message's role is one the families know; the renderers below may assume it.
void CheckMessages(std::span<const ChatMessage> messages) {
  if (messages.empty()) {
    throw ChatMessagesError("messages must be a non-empty array", "messages");
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role != "system" && role != "user" && role != "assistant") {
      std::string param = StrCat("messages[", i, "].role");
      throw ChatMessagesError(
          StrCat(param, " must be one of \"system\", \"user\", \"assistant\", got \"", role, "\""),
          param);
    }
  }
}

std::string RenderPlain(std::span<const ChatMessage> messages) {
  std::string out;
  for (const ChatMessage& m : messages) {
    std::string_view role = m.role == "system" ? "System" : m.role == "user" ? "User" : "Assistant";
    out += StrCat(role, ": ", m.content, "\n");
  }
  out += "Assistant:";
  return out;
}

std::string RenderLlama3(std::span<const ChatMessage> messages, std::string_view bos) {
  std::string out(bos);
  for (const ChatMessage& m : messages) {
    out += StrCat("<|start_header_id|>", m.role, "<|end_header_id|>\n\n", Trim(m.content),
                  "<|eot_id|>");
  }
  out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

std::string RenderChatMl(std::span<const ChatMessage> messages) {
  std::string out;
  for (const ChatMessage& m : messages) {
    out += StrCat("<|im_start|>", m.role, "\n", m.content, "<|im_end|>\n");
  }
  out += "<|im_start|>assistant\n";
  return out;
}

// Llama-2 has no system turn: system text is folded into the next user turn as a <<SYS>> block,
//   <s>[INST] <<SYS>>\nSYSTEM\n<</SYS>>\n\nUSER [/INST] ASSISTANT </s><s>[INST] USER2 [/INST]
// Meta's template refuses roles that do not alternate; grove renders them in order instead, with
// an empty user turn before an assistant message or an end that lacks one, so the text always
// ends with " [/INST]" where the reply begins.
std::string RenderLlama2(std::span<const ChatMessage> messages, std::string_view bos) {
  std::string out;
  std::string system;           // system text waiting for the next user turn
  bool awaiting_reply = false;  // the text ends with a user turn
  auto user_turn = [&](std::string_view user) {
    out += StrCat(bos, "[INST] ");
    if (!system.empty()) out += StrCat("<<SYS>>\n", system, "\n<</SYS>>\n\n");
    out += StrCat(user, " [/INST]");
    system.clear();
    awaiting_reply = true;
  };
  for (const ChatMessage& m : messages) {
    std::string_view content = Trim(m.content);
    if (m.role == "system") {
      if (!system.empty()) system += "\n";
      system += content;
    } else if (m.role == "user") {
      user_turn(content);
    } else {
      if (!awaiting_reply || !system.empty()) user_turn("");
      out += StrCat(" ", content, " </s>");
      awaiting_reply = false;
    }
  }
  if (!awaiting_reply || !system.empty()) user_turn("");
  return out;
}

}  // namespace

ChatTemplate DetectChatTemplate(std::string_view jinja) {
  // Llama-3 first: its templates are the most specific; ChatML before "[INST]", which a ChatML
  // template may mention in a comment far less often than the reverse.
  if (Contains(jinja, "<|start_header_id|>")) return ChatTemplate::kLlama3;
  if (Contains(jinja, "<|im_start|>")) return ChatTemplate::kChatMl;
  if (Contains(jinja, "[INST]")) return ChatTemplate::kLlama2;
  return ChatTemplate::kPlain;
}

std::string_view ChatTemplateName(ChatTemplate t) {
  static constexpr Named<ChatTemplate> kNames[] = {{ChatTemplate::kPlain, "plain"},
                                                   {ChatTemplate::kLlama3, "llama-3"},
                                                   {ChatTemplate::kChatMl, "chatml"},
                                                   {ChatTemplate::kLlama2, "llama-2"}};
  return NameOf(kNames, t);
}

std::string RenderChat(ChatTemplate t, std::span<const ChatMessage> messages,
                       std::string_view bos) {
  CheckMessages(messages);
  switch (t) {
    case ChatTemplate::kPlain:
      return RenderPlain(messages);
    case ChatTemplate::kLlama3:
      return RenderLlama3(messages, bos);
    case ChatTemplate::kChatMl:
      return RenderChatMl(messages);
    case ChatTemplate::kLlama2:
      return RenderLlama2(messages, bos);
  }
  Fail("chat template: unknown value ", static_cast<int>(t));
}

std::vector<std::string> ChatStopStrings(ChatTemplate t) {
  switch (t) {
    case ChatTemplate::kPlain:
      return {"\nUser:"};
    case ChatTemplate::kLlama3:
      return {"<|eot_id|>"};
    case ChatTemplate::kChatMl:
      return {"<|im_end|>"};
    case ChatTemplate::kLlama2:
      // "</s>" is normally the end-of-generation token and stops there; as text it and a new
      // "[INST]" both mean the reply is over.
      return {"</s>", "[INST]"};
  }
  Fail("chat template: unknown value ", static_cast<int>(t));
}

}  // namespace grove::chat
