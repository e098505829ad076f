// Stop strings over streamed text (OpenAI's `stop`): text arrives in pieces as tokens decode, and
// a stop string may straddle pieces. The matcher releases only text that cannot be the start of a
// stop string, holds back a possible partial match, and on a full match releases the text before
// it and reports the stop; the stop string itself is never sent (OpenAI's behaviour).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace grove::chat {

class StopMatcher {
 public:
  // Empty strings are ignored.
  explicit StopMatcher(std::vector<std::string> stops);

  // Adds a piece; returns the text now safe to send. After a stop, returns "" for every piece.
  std::string Push(std::string_view piece);
  // The generation ended: the held-back text (a partial match that never completed).
  std::string Flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace grove::chat
