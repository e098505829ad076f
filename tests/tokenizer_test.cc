// Tokenizers: llama.cpp's test vectors for the shared SentencePiece and GPT-2 vocabs, round trips,
// streaming decode, special tokens, merge order on tiny synthetic vocabs, malformed vocabs.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <random>
#include <sstream>

#include "base/error.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "test_support.h"
#include "tokenize/pretokenizer.h"
#include "tokenize/split_pattern.h"
#include "tokenize/tokenizer.h"

namespace grove {
namespace {

using testing::SharedPath;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Independent of the code under test: RFC 3629 well-formedness (no overlongs, no surrogates, no
// code points above U+10FFFF).
bool IsValidUtf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const auto b = static_cast<uint8_t>(s[i]);
    std::size_t n;
    uint32_t cp;
    if (b < 0x80) {
      ++i;
      continue;
    } else if (b >= 0xC2 && b <= 0xDF) {
      n = 1, cp = b & 0x1F;
    } else if (b >= 0xE0 && b <= 0xEF) {
      n = 2, cp = b & 0x0F;
    } else if (b >= 0xF0 && b <= 0xF4) {
      n = 3, cp = b & 0x07;
    } else {
      return false;
    }
    if (i + n >= s.size()) return false;  // truncated
    for (std::size_t k = 1; k <= n; ++k) {
      const auto c = static_cast<uint8_t>(s[i + k]);
      if ((c & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (c & 0x3F);
    }
    if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += n + 1;
  }
  return true;
}

std::string Join(const std::vector<int32_t>& ids) {
  std::string out;
  for (int32_t id : ids) {
    out += ' ';
    out += std::to_string(id);
  }
  return out;
}

// -------------------------------------------------------------------------------------------------
// The shared vocabularies.

class SharedVocab : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    path_ = SharedPath(std::string("tokenizers/") + GetParam());
    GROVE_SKIP_IF_MISSING(path_);
    gguf_ = GgufFile::Open(path_);
    tok_ = Tokenizer::FromGguf(*gguf_);
  }
  std::string path_;
  std::unique_ptr<GgufFile> gguf_;
  std::unique_ptr<Tokenizer> tok_;
};

INSTANTIATE_TEST_SUITE_P(Tokenizer, SharedVocab,
                         ::testing::Values("ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf"),
                         [](const auto& info) {
                           return std::string(info.param).find("spm") != std::string::npos ? "Spm"
                                                                                           : "Gpt2";
                         });

// llama.cpp's test-tokenizer-0: the .inp file is the inputs, each followed by the line
// "__ggml_vocab_test__" (so the file ends with that line and its newline); the .out file has one
// line of ids per input, encoded without BOS and without special-token parsing.
TEST_P(SharedVocab, MatchesLlamaCppVectors) {
  GROVE_SKIP_IF_MISSING(path_ + ".inp");
  GROVE_SKIP_IF_MISSING(path_ + ".out");
  const std::string inp = ReadFile(path_ + ".inp");
  const std::string separator = "\n__ggml_vocab_test__\n";
  std::vector<std::string> inputs;
  for (std::size_t pos = 0; pos < inp.size();) {
    const std::size_t end = inp.find(separator, pos);
    ASSERT_NE(end, std::string::npos) << "input file does not end with the separator line";
    inputs.push_back(inp.substr(pos, end - pos));
    pos = end + separator.size();
  }
  std::vector<std::vector<int32_t>> expected;
  std::istringstream out(ReadFile(path_ + ".out"));
  for (std::string line; std::getline(out, line);) {
    std::istringstream ids(line);
    expected.emplace_back();
    for (int32_t id; ids >> id;) expected.back().push_back(id);
  }
  ASSERT_EQ(inputs.size(), expected.size());
  ASSERT_GE(inputs.size(), 40u);
  int passed = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const std::vector<int32_t> got = tok_->Encode(inputs[i], /*add_bos=*/false);
    EXPECT_EQ(got, expected[i]) << "vector " << i << " '" << inputs[i]
                                << "'\n  got:     " << Join(got)
                                << "\n  expected:" << Join(expected[i]);
    passed += got == expected[i];
  }
  EXPECT_EQ(passed, static_cast<int>(inputs.size()));
}

const std::vector<std::string>& RoundTripTexts() {
  static const std::vector<std::string> texts = {
      "Hello world",
      " Hello world",
      "  leading and trailing  ",
      "tabs\tand\nnewlines\r\n\n\n end",
      "\n",
      " ",
      "Äpfel, Straße, naïve café",
      "нещо на Български",
      "我想在apple工作1314151天～",
      "កាន់តែពិសេសអាចខលចេញ",
      "emoji 🦙🚀 😶‍🌫️ ✅ and flags 🇩🇪",
      "I've been 'told he's there, 'RE you sure? 'M not sure I'll",
      "3.14159 1000000 ١٢٣ Ⅻ ½",
      "<s> </s> <|endoftext|> look like special tokens but are text",
      "mixed\xE2\x80\x8Bzero\xC2\xA0width and\xE3\x80\x80ideographic spaces",
      // Not UTF-8: a lone continuation byte, a truncated sequence, 0xFF.
      std::string("bad \x80 bytes \xE2\x82 and \xFF end"),
  };
  return texts;
}

TEST_P(SharedVocab, DecodeInvertsEncode) {
  for (const std::string& text : RoundTripTexts()) {
    EXPECT_EQ(tok_->Decode(tok_->Encode(text, /*add_bos=*/false)), text) << text;
    EXPECT_EQ(tok_->Decode(tok_->Encode(text, /*add_bos=*/true)), text) << text;
  }
}

TEST_P(SharedVocab, EmptyTextIsEmptyOrBos) {
  EXPECT_TRUE(tok_->Encode("", false).empty());
  EXPECT_EQ(tok_->Encode("", true), std::vector<int32_t>{tok_->bos()});
  EXPECT_EQ(tok_->Decode({}), "");
}

TEST_P(SharedVocab, OutOfRangeIdsThrow) {
  const int32_t n = tok_->n_vocab();
  const std::vector<int32_t> bad = {tok_->bos(), n};
  try {
    tok_->Decode(bad);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(n)), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("position 1"), std::string::npos) << e.what();
  }
  const std::vector<int32_t> negative = {-1};
  EXPECT_THROW(tok_->Decode(negative), Error);
  EXPECT_THROW(tok_->TokenText(n), Error);
  EXPECT_THROW(tok_->TokenPiece(-5), Error);
  TokenStreamDecoder stream(*tok_);
  EXPECT_THROW(stream.Push(n + 100), Error);
  EXPECT_FALSE(tok_->IsEndOfGeneration(n));
  EXPECT_FALSE(tok_->IsEndOfGeneration(-1));
}

TEST_P(SharedVocab, StreamingDecodeHoldsBackSplitCharacters) {
  const std::string text = "Ünïcödé 🦙 and 我想 and 🚀🚀";
  const std::vector<int32_t> ids = tok_->Encode(text, /*add_bos=*/true);
  TokenStreamDecoder stream(*tok_, /*strip_leading_space=*/true);
  std::string streamed;
  int held_back = 0;  // tokens whose bytes could not be released yet
  for (int32_t id : ids) {
    const std::string chunk = stream.Push(id);
    EXPECT_TRUE(IsValidUtf8(chunk)) << "token " << id;
    held_back += chunk.empty() && !tok_->TokenPiece(id).empty();
    streamed += chunk;
  }
  streamed += stream.Flush();
  EXPECT_EQ(streamed, text);
  // Both vocabs spell the llama emoji with tokens that end mid-character.
  EXPECT_GT(held_back, 0);
}

TEST_P(SharedVocab, StreamingFlushReplacesUnfinishedCharacter) {
  // Find the token(s) for the first byte of "🦙" (F0 9F A6 99) alone: encode the byte itself.
  const std::vector<int32_t> ids = tok_->Encode("\xF0", false);
  ASSERT_FALSE(ids.empty());
  TokenStreamDecoder stream(*tok_);
  std::string out;
  for (int32_t id : ids) out += stream.Push(id);
  EXPECT_EQ(out.find("\xEF\xBF\xBD"), std::string::npos) << "held, not replaced, before Flush";
  const std::string flushed = stream.Flush();
  EXPECT_EQ(flushed, "\xEF\xBF\xBD");
  EXPECT_EQ(stream.Flush(), "");
  // A byte that can never start a character is replaced at once.
  TokenStreamDecoder stream2(*tok_);
  std::string now;
  for (int32_t id : tok_->Encode("a\xFF", false)) now += stream2.Push(id);
  EXPECT_NE(now.find("\xEF\xBF\xBD"), std::string::npos);
  EXPECT_TRUE(IsValidUtf8(now));
}

TEST_P(SharedVocab, LargeTextEncodesFastAndExactly) {
  // 1 MB of mixed-script text. The bound only guards against super-linear behaviour (it would take
  // minutes); the real number is reported as a test property.
  std::string text;
  while (text.size() < (1 << 20)) {
    for (const std::string& t : RoundTripTexts()) text += t + " ";
  }
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = tok_->Encode(text, false);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  RecordProperty("encode_1mb_ms", static_cast<int>(seconds * 1000));
  EXPECT_LT(seconds, 20.0);
  EXPECT_EQ(tok_->Decode(ids), text);
  // One long word, no spaces: a single run for the merge queue.
  const std::string word(1 << 20, 'a');
  EXPECT_EQ(tok_->Decode(tok_->Encode(word, false)), word);
}

// -------------------------------------------------------------------------------------------------
// Behaviour specific to each shared vocab.

std::unique_ptr<Tokenizer> LoadShared(const std::string& name, std::unique_ptr<GgufFile>* gguf) {
  *gguf = GgufFile::Open(SharedPath("tokenizers/" + name));
  return Tokenizer::FromGguf(**gguf);
}

TEST(TokenizerSpm, MetadataAndDecodeRules) {
  GROVE_SKIP_IF_MISSING(SharedPath("tokenizers/ggml-vocab-llama-spm.gguf"));
  std::unique_ptr<GgufFile> gguf;
  auto tok = LoadShared("ggml-vocab-llama-spm.gguf", &gguf);
  EXPECT_EQ(tok->model_name(), "llama");
  EXPECT_EQ(tok->n_vocab(), 32000);
  EXPECT_EQ(tok->bos(), 1);
  EXPECT_EQ(tok->eos(), 2);
  EXPECT_EQ(tok->unk(), 0);
  EXPECT_TRUE(tok->add_bos_by_default());
  EXPECT_TRUE(tok->IsEndOfGeneration(2));
  EXPECT_FALSE(tok->IsEndOfGeneration(1));
  EXPECT_EQ(tok->TokenText(15043), "\xE2\x96\x81Hello");
  EXPECT_EQ(tok->TokenPiece(15043), " Hello");
  EXPECT_EQ(tok->token_type(13), TokenType::kByte);
  EXPECT_EQ(tok->TokenPiece(13), "\n");  // <0x0A>

  // The space prefix is removed from the first text piece, after BOS or not (sentencepiece).
  EXPECT_EQ(tok->Decode(std::vector<int32_t>{15043, 3186}), "Hello world");
  EXPECT_EQ(tok->Decode(std::vector<int32_t>{1, 15043, 3186}), "Hello world");
  EXPECT_EQ(tok->Decode(std::vector<int32_t>{1, 29871, 15043}), " Hello");
  EXPECT_EQ(tok->Decode(std::vector<int32_t>{1, 2}), "");  // control tokens are invisible
  // Mid-sequence spaces stay.
  EXPECT_EQ(tok->Decode(std::vector<int32_t>{3186, 15043}), "world Hello");
  EXPECT_EQ(tok->Encode("Hello world", true), (std::vector<int32_t>{1, 15043, 3186}));
}

TEST(TokenizerSpm, ParseSpecial) {
  GROVE_SKIP_IF_MISSING(SharedPath("tokenizers/ggml-vocab-llama-spm.gguf"));
  std::unique_ptr<GgufFile> gguf;
  auto tok = LoadShared("ggml-vocab-llama-spm.gguf", &gguf);
  const std::string text = "<s>Hello</s> world";
  // Text after a special token gets the space prefix again, as in llama.cpp.
  std::vector<int32_t> expected = {1};
  for (int32_t id : tok->Encode("Hello", false)) expected.push_back(id);
  expected.push_back(2);
  for (int32_t id : tok->Encode(" world", false)) expected.push_back(id);
  EXPECT_EQ(tok->Encode(text, false, /*parse_special=*/true), expected);
  const std::vector<int32_t> plain = tok->Encode(text, false, /*parse_special=*/false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 1), 0);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 2), 0);
  EXPECT_EQ(tok->Decode(plain), text);
}

TEST(TokenizerGpt2, MetadataAndParseSpecial) {
  GROVE_SKIP_IF_MISSING(SharedPath("tokenizers/ggml-vocab-gpt-2.gguf"));
  std::unique_ptr<GgufFile> gguf;
  auto tok = LoadShared("ggml-vocab-gpt-2.gguf", &gguf);
  EXPECT_EQ(tok->model_name(), "gpt2");
  EXPECT_EQ(tok->n_vocab(), 50257);
  EXPECT_EQ(tok->bos(), 50256);
  EXPECT_EQ(tok->eos(), 50256);
  EXPECT_FALSE(tok->add_bos_by_default());
  EXPECT_TRUE(tok->IsEndOfGeneration(50256));
  EXPECT_EQ(tok->TokenText(995), "\xC4\xA0world");  // "Ġworld"
  EXPECT_EQ(tok->TokenPiece(995), " world");
  EXPECT_EQ(tok->TokenPiece(50256), "");  // control

  const std::string text = "Hello<|endoftext|> world<|endoftext|>";
  std::vector<int32_t> expected = tok->Encode("Hello", false);
  expected.push_back(50256);
  for (int32_t id : tok->Encode(" world", false)) expected.push_back(id);
  expected.push_back(50256);
  EXPECT_EQ(tok->Encode(text, false, /*parse_special=*/true), expected);
  const std::vector<int32_t> plain = tok->Encode(text, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 50256), 0);
  EXPECT_EQ(tok->Decode(plain), text);
  // No space prefix in byte-level BPE: decoding keeps a leading space.
  EXPECT_EQ(tok->Decode(tok->Encode(" world", false)), " world");
}

// -------------------------------------------------------------------------------------------------
// Pre-tokenizers, against splits worked out by hand from the regexes.

// The words of `text`; the general pattern matcher must split exactly as the hand-written one.
std::vector<std::string> Split(std::string_view name, std::string_view text) {
  const PreTokenizer& pre = PreTokenizer::ForName(name);
  std::vector<PreTokenizerWord> words;
  pre.Split(text, &words);
  std::vector<std::string> out;
  for (const auto& w : words) out.emplace_back(text.substr(w.begin, w.end - w.begin));
  std::vector<PreTokenizerWord> general;
  pre.SplitWithPatterns(text, &general);
  std::vector<std::string> general_words;
  for (const auto& w : general) general_words.emplace_back(text.substr(w.begin, w.end - w.begin));
  EXPECT_EQ(general_words, out) << "pre-tokenizer '" << name << "' on '" << text << "'";
  return out;
}

using Words = std::vector<std::string>;

TEST(PreTokenizer, Gpt2) {
  const std::string_view k = "gpt-2";
  EXPECT_EQ(Split(k, "Hello world"), (Words{"Hello", " world"}));
  EXPECT_EQ(Split(k, "I'VE it's 12345!!"), (Words{"I", "'", "VE", " it", "'s", " 12345", "!!"}));
  EXPECT_EQ(Split(k, "a   b"), (Words{"a", "  ", " b"}));  // \s+(?!\S) leaves one space
  EXPECT_EQ(Split(k, "a\n\nb  "), (Words{"a", "\n", "\n", "b", "  "}));
  EXPECT_EQ(Split(k, "\tx"), (Words{"\t", "x"}));
  EXPECT_EQ(Split(k, " (x) 🦙"), (Words{" (", "x", ")", " 🦙"}));
  EXPECT_EQ(Split(k, "naïve 東京"), (Words{"naïve", " 東京"}));
  EXPECT_EQ(Split(k, ""), Words{});
  EXPECT_EQ(Split(k, "a\xFF\xFE b"), (Words{"a", "\xFF\xFE", " b"}));
}

TEST(PreTokenizer, Llama3) {
  const std::string_view k = "llama-bpe";
  EXPECT_EQ(Split(k, "Hello world"), (Words{"Hello", " world"}));
  EXPECT_EQ(Split(k, "I'VE it's"), (Words{"I", "'VE", " it", "'s"}));  // (?i:...)
  EXPECT_EQ(Split(k, "1234567"), (Words{"123", "456", "7"}));          // \p{N}{1,3}
  EXPECT_EQ(Split(k, "(word"), (Words{"(word"}));                      // [^\r\n\p{L}\p{N}]?\p{L}+
  EXPECT_EQ(Split(k, "x;\n\ny"), (Words{"x", ";\n\n", "y"}));  // punctuation keeps its newlines
  EXPECT_EQ(Split(k, "a \n \n  b"), (Words{"a", " \n \n", " ", " b"}));  // \s*[\r\n]+
  EXPECT_EQ(Split(k, "a   b"), (Words{"a", "  ", " b"}));
  EXPECT_EQ(Split(k, "\tx"), (Words{"\tx"}));
}

TEST(PreTokenizer, Qwen2SmolLmDefault) {
  // Qwen2: Llama 3's pattern with single digits.
  EXPECT_EQ(Split("qwen2", "x 1234 (word"), (Words{"x", " ", "1", "2", "3", "4", " (", "word"}));
  // SmolLM: every digit alone first, then GPT-2's pattern inside the rest.
  EXPECT_EQ(Split("smollm", "ab 123c"), (Words{"ab", " ", "1", "2", "3", "c"}));
  // llama.cpp's default: punctuation runs first, then GPT-2, then numbers, then digit triples.
  EXPECT_EQ(Split("default", "a+b=12345!?"), (Words{"a", "+", "b", "=", "123", "45", "!?"}));
}

TEST(PreTokenizer, TekkenGpt4oDeepseekV3) {
  // Tekken: a run of capitals then lower case is one word; a new capital starts the next.
  EXPECT_EQ(Split("tekken", "HelloWorld XMLHttp 42/x"),
            (Words{"Hello", "World", " XMLHttp", " ", "4", "2", "/x"}));
  EXPECT_EQ(Split("tekken", "a/\nb"), (Words{"a", "/\n", "b"}));
  // GPT-4o keeps a contraction with its word and groups digits by three.
  EXPECT_EQ(Split("gpt-4o", "It's 12345"), (Words{"It's", " ", "123", "45"}));
  // DeepSeek-V3: digit triples, CJK runs, then a pattern that joins punctuation to letters.
  EXPECT_EQ(Split("deepseek-v3", "ab1234東京x.yz"), (Words{"ab", "123", "4", "東京", "x", ".yz"}));
}

TEST(SplitPattern, RefusesWhatItCannotMatchSafely) {
  for (const char* bad : {"a*?", "(ab)+", "^a", "\\bword", "\\p{Greek}", "(?<=a)b", "[a"}) {
    try {
      SplitPattern::Compile(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("split pattern"), std::string::npos) << e.what();
    }
  }
  EXPECT_NO_THROW(SplitPattern::Compile("(ab){1,3}"));  // bounded: safe
}

TEST(SplitPattern, LongInputsNeitherRecurseNorStall) {
  // 256 KiB of one class and of alternating classes: loops, not recursion per character.
  for (const std::string& text : {std::string(1 << 18, ' '), std::string(1 << 18, 'a'), [] {
                                    std::string s;
                                    for (int i = 0; i < (1 << 16); ++i) s += "a1 .";
                                    return s;
                                  }()}) {
    for (const char* name : {"default", "tekken", "gpt-4o", "deepseek-v3", "smollm"}) {
      std::vector<PreTokenizerWord> words;
      PreTokenizer::ForName(name).SplitWithPatterns(text, &words);
      ASSERT_FALSE(words.empty());
      EXPECT_EQ(words.back().end, text.size()) << name;
    }
  }
}

// The hand-written matchers equal the general one on random text over awkward characters.
TEST(PreTokenizer, HandWrittenMatchersEqualThePatterns) {
  const std::vector<std::string> pieces = {
      "a",   "Z", "é", "東", "1",    "٣",      " ",      "  ",     "\n",   "\r\n", "\t", "'s",
      "'LL", "'", "!", "(",  "🦙", "\u00a0", "\u2003", "\u0301", "\xff", "_",    "ǅ"};
  std::mt19937 rng(7);
  for (int i = 0; i < 3000; ++i) {
    std::string text;
    const int n = static_cast<int>(rng() % 12);
    for (int j = 0; j < n; ++j) text += pieces[rng() % pieces.size()];
    for (const char* name : {"gpt-2", "llama-bpe", "qwen2"}) Split(name, text);
  }
}

TEST(PreTokenizer, NamesAndUnknownName) {
  EXPECT_EQ(PreTokenizer::ForName("").name(), "default");
  EXPECT_EQ(PreTokenizer::ForName("gpt2").name(), "gpt-2");
  EXPECT_EQ(PreTokenizer::ForName("llama3").name(), "llama-bpe");
  EXPECT_EQ(PreTokenizer::ForName("llama-v3").name(), "llama-bpe");
  EXPECT_EQ(PreTokenizer::ForName("deepseek-r1-qwen").name(), "qwen2");
  EXPECT_TRUE(PreTokenizer::ForName("llama-bpe").ignore_merges());
  EXPECT_TRUE(PreTokenizer::ForName("tekken").adds_bos());
  EXPECT_FALSE(PreTokenizer::ForName("qwen2").adds_bos());
  // Each is compiled when first named: every name of the table compiles, and names one object.
  for (const std::string& name : PreTokenizer::SupportedNames()) {
    const PreTokenizer* compiled = nullptr;
    ASSERT_NO_THROW(compiled = &PreTokenizer::ForName(name)) << name;
    EXPECT_EQ(&PreTokenizer::ForName(name), compiled) << name;
  }
  try {
    PreTokenizer::ForName("chameleon");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'chameleon'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("tokenizer.ggml.pre"), std::string::npos) << e.what();
  }
}

// -------------------------------------------------------------------------------------------------
// Tiny synthetic vocabs built in memory: merge order, special tokens, defaults, malformed keys.

struct Vocab {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  void Add(std::string text, float score = 0, int32_t type = 1) {
    tokens.push_back(std::move(text));
    scores.push_back(score);
    types.push_back(type);
  }
  int32_t Id(std::string_view text) const {
    return static_cast<int32_t>(std::find(tokens.begin(), tokens.end(), text) - tokens.begin());
  }
};

// <unk> <s> </s>, the 256 byte tokens, then `extra`.
Vocab SpmBase() {
  Vocab v;
  v.Add("<unk>", 0, 2);
  v.Add("<s>", 0, 3);
  v.Add("</s>", 0, 3);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    v.Add(name, 0, 6);
  }
  return v;
}

GgufWriter SpmWriter(const Vocab& v) {
  GgufWriter w;
  w.SetString("tokenizer.ggml.model", "llama");
  w.SetStringArray("tokenizer.ggml.tokens", v.tokens);
  w.SetFloat32Array("tokenizer.ggml.scores", v.scores);
  w.SetInt32Array("tokenizer.ggml.token_type", v.types);
  return w;
}

// Keeps the bytes alive while the tokenizer loads (the tokenizer copies what it needs).
std::unique_ptr<Tokenizer> Load(const GgufWriter& w) {
  const std::vector<uint8_t> bytes = w.WriteToBytes();
  auto gguf = GgufFile::FromBytes(bytes, "vocab.gguf");
  return Tokenizer::FromGguf(*gguf);
}

void ExpectLoadError(const GgufWriter& w, const std::vector<std::string>& needles) {
  try {
    Load(w);
    FAIL() << "expected an error containing '" << needles.front() << "'";
  } catch (const Error& e) {
    for (const std::string& needle : needles) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  }
}

TEST(TokenizerSynthetic, SpmMergesByHighestScoreThenLeftmost) {
  auto encode = [](float ab, float bc) {
    Vocab v = SpmBase();
    v.Add("a", -1);
    v.Add("b", -1);
    v.Add("c", -1);
    v.Add("ab", ab);
    v.Add("bc", bc);
    GgufWriter w = SpmWriter(v);
    w.SetBool("tokenizer.ggml.add_space_prefix", false);
    auto tok = Load(w);
    std::vector<std::string> pieces;
    for (int32_t id : tok->Encode("abc", false)) pieces.push_back(tok->TokenText(id));
    return pieces;
  };
  EXPECT_EQ(encode(-5, -2), (Words{"a", "bc"}));
  EXPECT_EQ(encode(-2, -5), (Words{"ab", "c"}));
  EXPECT_EQ(encode(-3, -3), (Words{"ab", "c"}));  // tie: leftmost
}

TEST(TokenizerSynthetic, SpmByteFallbackAndSpacePrefix) {
  Vocab v = SpmBase();
  v.Add("\xE2\x96\x81", -1);
  v.Add("h", -1);
  v.Add("i", -1);
  v.Add("\xE2\x96\x81h", -0.5f);
  v.Add("\xE2\x96\x81hi", -0.1f);
  auto tok = Load(SpmWriter(v));
  // "é" is not in the vocab: its two UTF-8 bytes come out as <0xC3> <0xA9>.
  EXPECT_EQ(
      tok->Encode("hi é", true),
      (std::vector<int32_t>{1, v.Id("\xE2\x96\x81hi"), v.Id("\xE2\x96\x81"), 3 + 0xC3, 3 + 0xA9}));
  EXPECT_EQ(tok->Decode(tok->Encode("hi é", true)), "hi é");

  GgufWriter no_prefix = SpmWriter(v);
  no_prefix.SetBool("tokenizer.ggml.add_space_prefix", false);
  auto tok2 = Load(no_prefix);
  EXPECT_EQ(tok2->Encode("hi", false), (std::vector<int32_t>{v.Id("h"), v.Id("i")}));
  EXPECT_EQ(tok2->Decode(tok2->Encode(" hi", false)), " hi");  // nothing to strip
}

TEST(TokenizerSynthetic, SpecialTokensLongestFirstAndUserDefinedAlways) {
  Vocab v = SpmBase();
  v.Add("\xE2\x96\x81", -1);
  v.Add("x", -1);
  v.Add("<tag>", 0, 4);       // user-defined
  v.Add("<tag>x", 0, 4);      // user-defined, longer: wins where both match
  v.Add("<|eot_id|>", 0, 3);  // control
  GgufWriter w = SpmWriter(v);
  w.SetBool("tokenizer.ggml.add_space_prefix", false);
  auto tok = Load(w);
  const int32_t tag = v.Id("<tag>"), tagx = v.Id("<tag>x"), eot = v.Id("<|eot_id|>");
  EXPECT_EQ(tok->Encode("<tag>x<tag>", false), (std::vector<int32_t>{tagx, tag}));
  // User-defined tokens are split out without parse_special; control tokens only with it.
  const std::vector<int32_t> plain = tok->Encode("x<|eot_id|><tag>", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), eot), 0);
  EXPECT_EQ(plain.back(), tag);
  EXPECT_EQ(tok->Encode("x<|eot_id|>", false, true), (std::vector<int32_t>{v.Id("x"), eot}));
  // Decoding: user-defined tokens are their text, control tokens nothing.
  EXPECT_EQ(tok->Decode(std::vector<int32_t>{tagx, eot, tag}), "<tag>x<tag>");
  // End of generation by spelling, plus EOS.
  EXPECT_TRUE(tok->IsEndOfGeneration(eot));
  EXPECT_TRUE(tok->IsEndOfGeneration(2));
  EXPECT_FALSE(tok->IsEndOfGeneration(tag));
  // Defaults without the id keys: <s> and </s> by spelling, BOS on by default for SentencePiece.
  EXPECT_EQ(tok->bos(), 1);
  EXPECT_EQ(tok->eos(), 2);
  EXPECT_EQ(tok->unk(), 0);
  EXPECT_TRUE(tok->add_bos_by_default());
}

// 256 byte stand-ins (so every byte is encodable), then `extra`, with `merges`.
GgufWriter BpeWriter(const std::vector<std::string>& extra, const std::vector<std::string>& merges,
                     std::vector<std::string>* tokens_out = nullptr) {
  std::vector<std::string> tokens;
  uint32_t next_stand_in = 256;  // GPT-2's map, written out independently of the code under test
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    const uint32_t cp = printable ? b : next_stand_in++;
    std::string s;
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else {
      s += static_cast<char>(0xC0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
    tokens.push_back(s);
  }
  for (const std::string& t : extra) tokens.push_back(t);
  if (tokens_out) *tokens_out = tokens;
  GgufWriter w;
  w.SetString("tokenizer.ggml.model", "gpt2");
  w.SetStringArray("tokenizer.ggml.tokens", tokens);
  w.SetStringArray("tokenizer.ggml.merges", merges);
  return w;
}

TEST(TokenizerSynthetic, BpeMergesByLowestRankThenLeftmost) {
  auto encode = [](const std::vector<std::string>& merges, std::string_view text) {
    std::vector<std::string> tokens;
    auto tok = Load(BpeWriter({"ab", "bc", "aa"}, merges, &tokens));
    std::vector<std::string> pieces;
    for (int32_t id : tok->Encode(text, false)) pieces.push_back(tokens.at(id));
    return pieces;
  };
  EXPECT_EQ(encode({"b c", "a b"}, "abc"), (Words{"a", "bc"}));
  EXPECT_EQ(encode({"a b", "b c"}, "abc"), (Words{"ab", "c"}));
  EXPECT_EQ(encode({"a a"}, "aaa"), (Words{"aa", "a"}));  // same pair twice: leftmost first
  // The space travels as its stand-in 'Ġ' (U+0120) at the start of the word " ab".
  EXPECT_EQ(encode({"a b"}, "x ab"), (Words{"x", "\xC4\xA0", "ab"}));
}

// gpt-oss's harmony tokens, by spelling as llama.cpp treats them: <|return|> and <|call|> end a
// generation and then <|end|> (which ends each message) does not; the message-header tokens and
// <|end|> are matched in text even without parse_special, and decode to their text. Without
// <|return|> and <|call|> (Phi-3's vocabulary), <|end|> stays an end-of-generation token.
TEST(TokenizerSynthetic, HarmonyTokensAsLlamaCppTreatsThem) {
  const std::vector<std::string> harmony = {"<|start|>", "<|message|>", "<|channel|>",
                                            "<|end|>",   "<|return|>",  "<|call|>"};
  std::vector<std::string> tokens;
  GgufWriter w = BpeWriter(harmony, {}, &tokens);
  std::vector<int32_t> types(tokens.size(), 1);
  for (std::size_t i = 256; i < tokens.size(); ++i) types[i] = 3;  // control, as converted
  w.SetInt32Array("tokenizer.ggml.token_type", types);
  auto tok = Load(w);
  auto id = [&](const std::string& text) {
    return static_cast<int32_t>(std::find(tokens.begin(), tokens.end(), text) - tokens.begin());
  };
  EXPECT_TRUE(tok->IsEndOfGeneration(id("<|return|>")));
  EXPECT_TRUE(tok->IsEndOfGeneration(id("<|call|>")));
  EXPECT_FALSE(tok->IsEndOfGeneration(id("<|end|>")));
  const std::string text = "<|start|>assistant<|channel|>final<|message|>hi<|end|>";
  const std::vector<int32_t> ids = tok->Encode(text, /*add_bos=*/false);
  EXPECT_EQ(ids.front(), id("<|start|>"));
  EXPECT_EQ(ids.back(), id("<|end|>"));
  EXPECT_EQ(tok->Decode(ids), text);
  // <|return|> stays a control token: text, not the token, without parse_special.
  EXPECT_GT(tok->Encode("<|return|>", false).size(), 1u);

  GgufWriter phi = BpeWriter({"<|end|>"}, {}, &tokens);
  types.assign(tokens.size(), 1);
  types.back() = 3;
  phi.SetInt32Array("tokenizer.ggml.token_type", types);
  EXPECT_TRUE(Load(phi)->IsEndOfGeneration(static_cast<int32_t>(tokens.size()) - 1));
}

TEST(TokenizerSynthetic, BpeMergesNeverCrossWords) {
  // GPT-2's pre-tokenizer puts letters and digits in different words, so "a1" is never merged.
  std::vector<std::string> tokens;
  auto tok = Load(BpeWriter({"a1"}, {"a 1"}, &tokens));
  const std::vector<int32_t> ids = tok->Encode("a1", false);
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(tokens.at(ids[0]), "a");
  EXPECT_EQ(tokens.at(ids[1]), "1");
}

TEST(TokenizerSynthetic, BpeDefaultsAndLlama3Options) {
  auto gpt2 = Load(BpeWriter({}, {}));
  EXPECT_FALSE(gpt2->add_bos_by_default());
  EXPECT_EQ(gpt2->bos(), -1);  // no <|endoftext|> and no key
  EXPECT_EQ(gpt2->Encode("hi", true).size(), 2u) << "no BOS to add";
  EXPECT_EQ(gpt2->Decode(gpt2->Encode("\x01\n\xFF", false)), "\x01\n\xFF");

  GgufWriter w = BpeWriter({"ab", "abc", "bc"}, {"b c", "a b"});
  w.SetString("tokenizer.ggml.pre", "llama-bpe");
  std::vector<std::string> tokens;
  BpeWriter({"ab", "abc", "bc"}, {"b c", "a b"}, &tokens);
  auto llama3 = Load(w);
  EXPECT_TRUE(llama3->add_bos_by_default());
  // ignore_merges: "abc" is a token, so it is taken whole although the merges stop at "a"+"bc".
  const int32_t abc =
      static_cast<int32_t>(std::find(tokens.begin(), tokens.end(), "abc") - tokens.begin());
  EXPECT_EQ(llama3->Encode("abc", false), std::vector<int32_t>{abc});
  auto gpt2_rules = Load(BpeWriter({"ab", "abc", "bc"}, {"b c", "a b"}));
  EXPECT_EQ(gpt2_rules->Encode("abc", false).size(), 2u);
}

TEST(TokenizerSynthetic, MalformedVocabErrorsNameTheKey) {
  {
    GgufWriter w;
    w.SetString("general.architecture", "llama");
    ExpectLoadError(w, {"tokenizer.ggml.model", "vocab.gguf"});
  }
  {
    GgufWriter w;
    w.SetString("tokenizer.ggml.model", "llama");
    ExpectLoadError(w, {"tokenizer.ggml.tokens", "missing"});
  }
  {
    GgufWriter w = SpmWriter(SpmBase());
    w.SetStringArray("tokenizer.ggml.tokens", {});
    ExpectLoadError(w, {"tokenizer.ggml.tokens", "empty"});
  }
  {
    Vocab v = SpmBase();
    v.scores.pop_back();
    ExpectLoadError(SpmWriter(v), {"tokenizer.ggml.scores", "258", "259"});
  }
  {
    Vocab v = SpmBase();
    v.types.push_back(1);
    ExpectLoadError(SpmWriter(v), {"tokenizer.ggml.token_type", "260"});
  }
  {
    Vocab v = SpmBase();
    v.types[5] = 9;
    ExpectLoadError(SpmWriter(v), {"tokenizer.ggml.token_type[5]", "9"});
  }
  {
    Vocab v = SpmBase();
    v.tokens[10] = "<0xZZ>";
    ExpectLoadError(SpmWriter(v), {"tokenizer.ggml.tokens[10]", "<0xZZ>"});
  }
  {
    GgufWriter w;
    w.SetString("tokenizer.ggml.model", "llama");
    w.SetStringArray("tokenizer.ggml.tokens", SpmBase().tokens);
    ExpectLoadError(w, {"tokenizer.ggml.scores", "missing"});
  }
  {
    GgufWriter w = SpmWriter(SpmBase());
    w.SetUint32("tokenizer.ggml.bos_token_id", 5000);
    ExpectLoadError(w, {"tokenizer.ggml.bos_token_id", "5000"});
  }
  {
    GgufWriter w = SpmWriter(SpmBase());
    w.SetString("tokenizer.ggml.model", "bert");
    ExpectLoadError(w, {"tokenizer.ggml.model", "'bert'"});
  }
  ExpectLoadError(BpeWriter({"ab"}, {"a b", "a zz"}), {"tokenizer.ggml.merges[1]", "'zz'"});
  ExpectLoadError(BpeWriter({}, {"a b"}), {"tokenizer.ggml.merges[0]", "'ab'"});  // result unknown
  ExpectLoadError(BpeWriter({}, {"ab"}), {"tokenizer.ggml.merges[0]", "separated by a space"});
  {
    GgufWriter w = BpeWriter({}, {});
    w.SetString("tokenizer.ggml.pre", "chameleon");
    ExpectLoadError(w, {"tokenizer.ggml.pre", "'chameleon'"});
  }
  {
    GgufWriter w;
    w.SetString("tokenizer.ggml.model", "gpt2");
    w.SetStringArray("tokenizer.ggml.tokens", {"a"});
    ExpectLoadError(w, {"tokenizer.ggml.merges", "missing"});
  }
}

}  // namespace
}  // namespace grove
