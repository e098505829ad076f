#include "chat/reasoning_splitter.h"

#include <algorithm>

namespace grove::chat {
namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string_view TrimLeft(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  return s;
}

std::string_view TrimRight(std::string_view s) {
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

// The length of the longest suffix of `s` that is a proper prefix of `marker`.
std::size_t PartialMarkerAtEnd(std::string_view s, std::string_view marker) {
  for (std::size_t k = std::min(s.size(), marker.size() - 1); k > 0; --k) {
    if (s.substr(s.size() - k) == marker.substr(0, k)) return k;
  }
  return 0;
}

}  // namespace

bool ParseReasoningFormat(std::string_view name, ReasoningFormat* out) {
  if (name == "none") {
    *out = ReasoningFormat::kNone;
  } else if (name == "deepseek" || name == "auto") {
    *out = ReasoningFormat::kDeepSeek;
  } else {
    return false;
  }
  return true;
}

bool PromptOpensThinking(std::string_view prompt) {
  const std::string_view trimmed = TrimRight(prompt);
  return trimmed.size() >= kOpen.size() && trimmed.substr(trimmed.size() - kOpen.size()) == kOpen;
}

ReasoningSplitter::ReasoningSplitter(bool thinking_open)
    : state_(State::kStart), thinking_open_(thinking_open) {}

ReasoningSplitter::Parts ReasoningSplitter::Push(std::string_view piece) {
  held_.append(piece);
  Parts out;
  Step(&out, /*flush=*/false);
  return out;
}

ReasoningSplitter::Parts ReasoningSplitter::Flush() {
  Parts out;
  Step(&out, /*flush=*/true);
  return out;
}

void ReasoningSplitter::Step(Parts* out, bool flush) {
  if (state_ == State::kStart) {
    const std::string_view text = TrimLeft(held_);
    if (text.substr(0, kOpen.size()) == kOpen) {
      held_.erase(0, held_.size() - text.size() + kOpen.size());
      state_ = State::kReasoning;
    } else if (!flush && (text.empty() || kOpen.substr(0, text.size()) == text)) {
      return;  // white space so far, or a start of "<think>": wait for more
    } else {
      state_ = thinking_open_ ? State::kReasoning : State::kContent;
      skip_space_ = thinking_open_;  // a plain answer is returned as written
    }
  }
  if (state_ == State::kReasoning) {
    if (skip_space_) {
      held_.erase(0, held_.size() - TrimLeft(held_).size());
      if (held_.empty()) return;
      skip_space_ = false;
    }
    const std::size_t close = held_.find(kClose);
    if (close == std::string::npos) {
      // Release all but a partial "</think>" at the end and the white space before it, which
      // is dropped if the reasoning ends there.
      std::size_t keep = flush ? 0 : PartialMarkerAtEnd(held_, kClose);
      const std::string_view release = std::string_view(held_).substr(0, held_.size() - keep);
      const std::string_view body = TrimRight(release);
      out->reasoning.append(body);
      held_.erase(0, flush ? held_.size() : body.size());
      return;
    }
    out->reasoning.append(TrimRight(std::string_view(held_).substr(0, close)));
    held_.erase(0, close + kClose.size());
    state_ = State::kContent;
    skip_space_ = true;
  }
  // kContent
  if (skip_space_) {
    held_.erase(0, held_.size() - TrimLeft(held_).size());
    if (held_.empty()) return;
    skip_space_ = false;
  }
  out->content.append(held_);
  held_.clear();
}

}  // namespace grove::chat
