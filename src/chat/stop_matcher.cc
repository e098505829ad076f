#include "chat/stop_matcher.h"

#include <algorithm>
#include <utility>

namespace grove::chat {

namespace {

// The length of the longest suffix of `text` that is a proper prefix of `stop` (a stop string that
// may still complete with the next piece). Stops are a few short strings, so the quadratic scan
// costs less than building an automaton per request.
size_t PartialMatchLength(std::string_view text, std::string_view stop) {
  for (size_t len = std::min(text.size(), stop.size() - 1); len > 0; --len) {
    if (text.substr(text.size() - len) == stop.substr(0, len)) return len;
  }
  return 0;
}

bool IsUtf8Continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

}  // namespace

StopMatcher::StopMatcher(std::vector<std::string> stops) {
  for (std::string& stop : stops) {
    if (!stop.empty()) stops_.push_back(std::move(stop));
  }
}

std::string StopMatcher::Push(std::string_view piece) {
  if (stopped_) return "";
  if (stops_.empty()) return std::string(piece);
  std::string text = std::move(held_);
  held_.clear();
  text.append(piece);

  // The earliest full match of any stop ends the text there. The held-back text never holds a
  // full match, so a match found now involves the new piece.
  size_t stop_at = std::string::npos;
  for (const std::string& stop : stops_) stop_at = std::min(stop_at, text.find(stop));
  if (stop_at != std::string::npos) {
    stopped_ = true;
    text.resize(stop_at);
    return text;
  }

  // Hold back the longest tail that could still grow into a stop: no earlier position can start
  // one (it would be a full match, found above, or a longer such tail).
  size_t hold = 0;
  for (const std::string& stop : stops_) hold = std::max(hold, PartialMatchLength(text, stop));
  size_t release = text.size() - hold;
  // A valid UTF-8 stop begins with a lead byte, so `release` is already a character boundary;
  // this only guards against a stop that begins mid-character.
  while (release > 0 && release < text.size() && IsUtf8Continuation(text[release])) --release;
  held_ = text.substr(release);
  text.resize(release);
  return text;
}

std::string StopMatcher::Flush() {
  if (stopped_) return "";
  return std::exchange(held_, std::string());
}

}  // namespace grove::chat
