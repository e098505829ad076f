// The thinking of reasoning models, apart from their answer: Qwen3 and the DeepSeek-R1 distills
// write "<think>...</think>" before the answer, and clients of llama-server (--reasoning-format
// deepseek) and vLLM (--reasoning-parser) receive that part as the message's `reasoning_content`
// and the rest as `content`, in whole responses and in the deltas of a stream.
//
// The rule, as llama.cpp's "deepseek" format applies it:
// - the reasoning starts where the text starts with "<think>" (after white space), or at once
//   when the prompt itself left a "<think>" open (DeepSeek-R1 distills' templates end the
//   generation prompt with "<think>\n"; so does Qwen3's with thinking on in some versions);
// - it ends at "</think>", or with the text when the generation stops inside it;
// - white space around the reasoning and before the answer is dropped; nothing else is changed,
//   so reasoning + content is the text less the markers and that white space.
// Text that does not start with "<think>" is all content.
#pragma once

#include <string>
#include <string_view>

namespace grove::chat {

// How a chat completion's text is returned (the request's `reasoning_format`, else the server's
// --reasoning-format): kNone leaves it all in `content`, markers included.
enum class ReasoningFormat { kNone, kDeepSeek };

// "none" → kNone; "deepseek" and "auto" (llama-server's default name for the same rule) →
// kDeepSeek; anything else: false.
bool ParseReasoningFormat(std::string_view name, ReasoningFormat* out);

// True when the prompt ends inside an open "<think>" (its last "<think>" follows its last
// "</think>" and only white space follows it).
bool PromptOpensThinking(std::string_view prompt);

class ReasoningSplitter {
 public:
  struct Parts {
    std::string reasoning;
    std::string content;
  };

  // `thinking_open`: the prompt left "<think>" open (PromptOpensThinking).
  explicit ReasoningSplitter(bool thinking_open);

  // Adds a piece of generated text; returns what can be released now. A possible partial marker,
  // and white space that may turn out to end the reasoning, are held back.
  Parts Push(std::string_view piece);
  // The text ended: releases what was held (a partial marker is text after all).
  Parts Flush();

 private:
  enum class State { kStart, kReasoning, kContent };
  void Step(Parts* out, bool flush);

  State state_;
  const bool thinking_open_;
  bool skip_space_ = true;  // drop white space before the reasoning or the content starts
  std::string held_;
};

}  // namespace grove::chat
