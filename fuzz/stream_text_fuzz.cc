// libFuzzer target for the two filters a streamed completion's text passes through in the server,
// whose input arrives in pieces (one per token) that may split a stop string, a "<think>" marker
// or a character anywhere. For any text and any split into pieces:
// - StopMatcher: what it releases is a prefix of the text with no stop string in it; when it
//   reports a stop, a stop string follows that prefix in the text; otherwise (after Flush) it is
//   the whole text.
// - ReasoningSplitter: the reasoning and the content released piece by piece are what the text
//   given as one piece gives (its rule is a function of the text: reasoning_splitter.h).
// Input: byte 0 holds the number of stop strings (bits 0-1), whether the prompt left "<think>"
// open (bit 2) and the seed of the split (bits 3-7); then each stop string as a length byte
// (0-7) and its bytes; the rest is the text. Seeds: tests/fuzz/corpus/stream_text/.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "chat/reasoning_splitter.h"
#include "chat/stop_matcher.h"

namespace {

[[noreturn]] void Violation(const char* what, std::size_t text_size) {
  std::fprintf(stderr, "stream_text: %s (text of %zu bytes)\n", what, text_size);
  std::abort();
}

// The text cut into pieces of 1-8 bytes, lengths from a small generator seeded by the input.
std::vector<std::string_view> Pieces(std::string_view text, uint32_t seed) {
  std::vector<std::string_view> pieces;
  uint32_t state = seed * 2654435761u + 1;
  for (std::size_t at = 0; at < text.size();) {
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    const std::size_t n = 1 + state % 8;
    pieces.push_back(text.substr(at, n));
    at += n;
  }
  return pieces;
}

void CheckStops(const std::vector<std::string>& stops, std::string_view text,
                const std::vector<std::string_view>& pieces) {
  grove::chat::StopMatcher matcher(stops);
  std::string out;
  for (std::string_view piece : pieces) out += matcher.Push(piece);
  out += matcher.Flush();
  if (text.substr(0, out.size()) != out)
    Violation("stop matcher: output not a prefix", text.size());
  for (const std::string& stop : stops) {
    if (!stop.empty() && out.find(stop) != std::string::npos) {
      Violation("stop matcher: a stop string was released", text.size());
    }
  }
  if (matcher.stopped()) {
    const std::string_view rest = text.substr(out.size());
    bool follows = false;
    for (const std::string& stop : stops) follows |= !stop.empty() && rest.starts_with(stop);
    if (!follows) Violation("stop matcher: stopped where no stop string starts", text.size());
  } else if (out.size() != text.size()) {
    Violation("stop matcher: text lost without a stop", text.size());
  }
}

void CheckReasoning(bool thinking_open, std::string_view text,
                    const std::vector<std::string_view>& pieces) {
  grove::chat::ReasoningSplitter whole(thinking_open);
  grove::chat::ReasoningSplitter::Parts want = whole.Push(text);
  const grove::chat::ReasoningSplitter::Parts rest = whole.Flush();
  want.reasoning += rest.reasoning;
  want.content += rest.content;

  grove::chat::ReasoningSplitter split(thinking_open);
  std::string reasoning;
  std::string content;
  for (std::string_view piece : pieces) {
    const grove::chat::ReasoningSplitter::Parts got = split.Push(piece);
    reasoning += got.reasoning;
    content += got.content;
  }
  const grove::chat::ReasoningSplitter::Parts last = split.Flush();
  reasoning += last.reasoning;
  content += last.content;
  if (reasoning != want.reasoning) Violation("reasoning differs when split", text.size());
  if (content != want.content) Violation("content differs when split", text.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  if (in.empty()) return 0;
  const auto head = static_cast<uint8_t>(in[0]);
  in.remove_prefix(1);
  std::vector<std::string> stops;
  for (int i = 0; i < (head & 3) && !in.empty(); ++i) {
    const std::size_t n = std::min<std::size_t>(static_cast<uint8_t>(in[0]) % 8, in.size() - 1);
    stops.emplace_back(in.substr(1, n));
    in.remove_prefix(1 + n);
  }
  const std::vector<std::string_view> pieces = Pieces(in, head >> 3);
  CheckStops(stops, in, pieces);
  CheckReasoning((head & 4) != 0, in, pieces);
  return 0;
}
