// libFuzzer target for encoding and decoding with the two tokenizer models grove has. The first
// byte of an input picks the vocabulary, the rest is the text x (any bytes):
//   even: byte-level BPE, the bundled draft's vocabulary (GPT-2 pre-tokenizer, 3072 tokens);
//   odd:  SentencePiece with byte fallback, the vocabulary of grove's random "tiny" model
//         (random_model.cc: control tokens, 256 byte tokens, pieces over "▁" and a-z).
// For both, Decode(Encode(x)) == x (tokenizer.h: ill-formed UTF-8 round-trips through the byte
// tokens; SentencePiece decodes a literal "▁" in x as a space, so x is compared with its "▁"s
// made spaces), decoding the same tokens one at a time with TokenStreamDecoder gives those bytes
// with each ill-formed subsequence made U+FFFD, however the tokens split the characters, and
// encoding with special tokens parsed must not fail either. A violation aborts.
// Seeds: tests/fuzz/corpus/tokenizer/.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <unicode/utf8.h>

#include "io/gguf.h"
#include "model/random_model.h"
#include "tokenize/tokenizer.h"

#ifndef GROVE_FUZZ_VOCAB
#error "GROVE_FUZZ_VOCAB: the GGUF file whose BPE vocabulary the target uses (fuzz/CMakeLists.txt)"
#endif

namespace {

// s with each ill-formed subsequence (as ICU's U8_NEXT delimits it) replaced by U+FFFD: what
// decoding s as one piece gives, and so what any split of s into tokens must give.
std::string Sanitized(std::string_view s) {
  std::string out;
  int32_t i = 0;
  const auto n = static_cast<int32_t>(s.size());
  while (i < n) {
    const int32_t start = i;
    UChar32 c;
    U8_NEXT(s.data(), i, n, c);
    if (c >= 0) {
      out.append(s.substr(start, i - start));
    } else {
      out.append("\xEF\xBF\xBD");
    }
  }
  return out;
}

[[noreturn]] void Violation(const grove::Tokenizer& tok, const char* what, std::string_view x,
                            std::string_view got) {
  std::fprintf(stderr, "tokenizer (%s): %s (input %zu bytes, got %zu bytes)\n",
               std::string(tok.model_name()).c_str(), what, x.size(), got.size());
  std::abort();
}

const grove::Tokenizer& Bpe() {
  static const std::unique_ptr<grove::Tokenizer> tok = [] {
    const std::unique_ptr<grove::GgufFile> gguf = grove::GgufFile::Open(GROVE_FUZZ_VOCAB);
    return grove::Tokenizer::FromGguf(*gguf);
  }();
  return *tok;
}

const grove::Tokenizer& SentencePiece() {
  static const std::vector<uint8_t> bytes =
      grove::RandomModelWriter(*grove::NamedModelShape("tiny")).WriteToBytes();
  static const std::unique_ptr<grove::Tokenizer> tok = [] {
    const std::unique_ptr<grove::GgufFile> gguf = grove::GgufFile::FromBytes(bytes, "tiny");
    return grove::Tokenizer::FromGguf(*gguf);
  }();
  return *tok;
}

// What Decode(Encode(x)) gives back: x, with SentencePiece's "▁" (U+2581) read as a space.
std::string Expected(const grove::Tokenizer& tok, std::string_view x) {
  std::string out(x);
  if (tok.model_name() != "llama") return out;
  static constexpr std::string_view kSpaceMark = "\xE2\x96\x81";
  for (std::size_t at = out.find(kSpaceMark); at != std::string::npos;
       at = out.find(kSpaceMark, at + 1)) {
    out.replace(at, kSpaceMark.size(), " ");
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const grove::Tokenizer& tok = data[0] % 2 == 0 ? Bpe() : SentencePiece();
  const std::string_view x(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::vector<int32_t> ids = tok.Encode(x, /*add_bos=*/false);
  const std::string expected = Expected(tok, x);
  const std::string back = tok.Decode(ids);
  if (back != expected) Violation(tok, "Decode(Encode(x)) != x", x, back);

  grove::TokenStreamDecoder stream(tok, /*strip_leading_space=*/true);
  std::string streamed;
  for (const int32_t id : ids) streamed += stream.Push(id);
  streamed += stream.Flush();
  if (streamed != Sanitized(expected)) {
    Violation(tok, "the token stream differs from Decode's bytes made valid UTF-8", x, streamed);
  }

  tok.Encode(x, /*add_bos=*/true, /*parse_special=*/true);
  return 0;
}
