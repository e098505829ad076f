#include "tokenize/tokenizer_vocab.h"

#include <algorithm>
#include <array>
#include <limits>

#include "base/error.h"
#include "io/gguf.h"

namespace grove {
namespace {

constexpr std::string_view kKeyModel = "tokenizer.ggml.model";
constexpr std::string_view kKeyTokens = "tokenizer.ggml.tokens";
constexpr std::string_view kKeyScores = "tokenizer.ggml.scores";
constexpr std::string_view kKeyTokenType = "tokenizer.ggml.token_type";

bool IsByteTokenText(std::string_view text) {
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); };
  return text.size() == 6 && text.substr(0, 3) == "<0x" && hex(text[3]) && hex(text[4]) &&
         text[5] == '>';
}

TokenType TokenTypeFromFile(const GgufFile& gguf, std::size_t index, int64_t value) {
  // 0 is llama.cpp's "undefined"; old conversions wrote it for ordinary tokens.
  if (value == 0) return TokenType::kNormal;
  if (value < 1 || value > 6) {
    Fail("tokenizer: '", gguf.name(), "': ", kKeyTokenType, "[", index, "] = ", value,
         ": expected 1 (normal) .. 6 (byte)");
  }
  return static_cast<TokenType>(value);
}

// A special token id from `key`, or the token spelled `fallback_text` when the key is absent, or
// -1. Some converters write -1 (as a signed integer) for "none".
int32_t ReadSpecialId(const GgufFile& gguf, const TokenizerVocab& vocab, std::string_view key,
                      std::string_view fallback_text) {
  if (!gguf.Has(key)) return fallback_text.empty() ? -1 : vocab.Find(fallback_text);
  const int64_t id = gguf.GetInt(key);
  if (id < 0) return -1;
  if (id >= vocab.n_tokens()) {
    Fail("tokenizer: '", gguf.name(), "': ", key, " = ", id, " is out of range for a vocab of ",
         vocab.n_tokens(), " tokens");
  }
  return static_cast<int32_t>(id);
}

// Each token's type: from the file, else normal (SentencePiece byte tokens by their spelling).
void ReadTokenTypes(const GgufFile& gguf, TokenizerVocab& vocab) {
  const std::size_t n = vocab.texts.size();
  vocab.types.assign(n, TokenType::kNormal);
  if (gguf.Has(kKeyTokenType)) {
    const std::vector<int64_t> types = gguf.GetIntArray(kKeyTokenType);
    if (types.size() != n) {
      Fail("tokenizer: '", gguf.name(), "': ", kKeyTokenType, " has ", types.size(),
           " entries but ", kKeyTokens, " has ", n);
    }
    for (std::size_t i = 0; i < n; ++i) vocab.types[i] = TokenTypeFromFile(gguf, i, types[i]);
  } else if (vocab.model == "llama") {
    // Without types, SentencePiece byte-fallback tokens are still recognisable by their spelling.
    for (std::size_t i = 0; i < n; ++i) {
      if (IsByteTokenText(vocab.texts[i])) vocab.types[i] = TokenType::kByte;
    }
  }
}

// BOS, EOS, UNK and the end-of-generation tokens.
void ReadSpecialTokens(const GgufFile& gguf, TokenizerVocab& vocab) {
  const std::size_t n = vocab.texts.size();
  const bool spm = vocab.model == "llama";
  vocab.bos =
      ReadSpecialId(gguf, vocab, "tokenizer.ggml.bos_token_id", spm ? "<s>" : "<|endoftext|>");
  vocab.eos =
      ReadSpecialId(gguf, vocab, "tokenizer.ggml.eos_token_id", spm ? "</s>" : "<|endoftext|>");
  vocab.unk = ReadSpecialId(gguf, vocab, "tokenizer.ggml.unknown_token_id", "");
  if (!gguf.Has("tokenizer.ggml.unknown_token_id")) {
    auto it = std::find(vocab.types.begin(), vocab.types.end(), TokenType::kUnknown);
    if (it != vocab.types.end()) vocab.unk = static_cast<int32_t>(it - vocab.types.begin());
  }

  // End of generation: EOS, the explicit EOT/EOM ids, and the chat-turn terminators of the families
  // grove runs, by spelling (as llama.cpp does: converters do not always set the ids).
  vocab.is_eog.assign(n, 0);
  auto mark_eog = [&](int32_t id) {
    if (id >= 0) vocab.is_eog[id] = 1;
  };
  mark_eog(vocab.eos);
  mark_eog(ReadSpecialId(gguf, vocab, "tokenizer.ggml.eot_token_id", ""));
  mark_eog(ReadSpecialId(gguf, vocab, "tokenizer.ggml.eom_token_id", ""));
  static constexpr std::array<std::string_view, 9> kEogTexts = {
      "<|eot_id|>", "<|eom_id|>",    "<|end_of_text|>", "<|endoftext|>", "<|im_end|>",
      "<|end|>",    "<end_of_turn>", "<|return|>",      "<|call|>"};
  for (std::string_view text : kEogTexts) mark_eog(vocab.Find(text));
}

// gpt-oss's harmony tokens, by spelling in any vocabulary, as llama.cpp treats them whatever the
// file says (its vocabulary loader; after the end-of-generation tokens, which the second rule
// reads):
// - the tokens that frame a message's header are user-defined: always matched in text and
//   rendered, so that a reply's channel and the server's parsing of it see them;
// - a message ends with <|end|>, the answer with <|return|> (a tool call with <|call|>): where all
//   three end a generation, <|end|> does not, and is user-defined too.
void ApplyHarmonyTokenRules(TokenizerVocab& vocab) {
  auto make_user_defined = [&](int32_t id) {
    vocab.types[static_cast<std::size_t>(id)] = TokenType::kUserDefined;
  };
  for (std::string_view text : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}) {
    if (const int32_t id = vocab.Find(text); id >= 0) make_user_defined(id);
  }
  const int32_t end = vocab.Find("<|end|>");
  const int32_t ret = vocab.Find("<|return|>");
  const int32_t call = vocab.Find("<|call|>");
  if (end >= 0 && ret >= 0 && call >= 0 && vocab.is_eog[end] && vocab.is_eog[ret] &&
      vocab.is_eog[call]) {
    vocab.is_eog[end] = 0;
    make_user_defined(end);
  }
}

// The tokens matched as whole strings before tokenizing (control, unknown, user-defined), longest
// first.
void ListSpecialTokens(TokenizerVocab& vocab) {
  const std::size_t n = vocab.texts.size();
  for (std::size_t i = 0; i < n; ++i) {
    const TokenType type = vocab.types[i];
    if ((type == TokenType::kControl || type == TokenType::kUnknown ||
         type == TokenType::kUserDefined) &&
        !vocab.texts[i].empty()) {
      vocab.special_by_length.push_back(static_cast<int32_t>(i));
    }
  }
  std::stable_sort(
      vocab.special_by_length.begin(), vocab.special_by_length.end(),
      [&](int32_t a, int32_t b) { return vocab.texts[a].size() > vocab.texts[b].size(); });
}

}  // namespace

std::unique_ptr<TokenizerVocab> LoadTokenizerVocab(const GgufFile& gguf) {
  auto vocab = std::make_unique<TokenizerVocab>();
  const std::string& file = gguf.name();

  if (!gguf.Has(kKeyModel)) Fail("tokenizer: '", file, "': missing ", kKeyModel, " (no tokenizer)");
  vocab->model = gguf.GetString(kKeyModel);
  if (vocab->model != "llama" && vocab->model != "gpt2") {
    Fail("tokenizer: '", file, "': ", kKeyModel, " = '", vocab->model,
         "' is not supported (supported: 'llama' for SentencePiece, 'gpt2' for byte-level BPE)");
  }

  if (!gguf.Has(kKeyTokens)) Fail("tokenizer: '", file, "': missing ", kKeyTokens);
  const std::span<const std::string> tokens = gguf.GetStringArray(kKeyTokens);
  if (tokens.empty()) Fail("tokenizer: '", file, "': ", kKeyTokens, " is empty");
  if (tokens.size() > static_cast<std::size_t>(std::numeric_limits<int32_t>::max())) {
    Fail("tokenizer: '", file, "': ", kKeyTokens, " has ", tokens.size(),
         " entries, more than token ids (int32) can address");
  }
  vocab->texts.assign(tokens.begin(), tokens.end());
  const std::size_t n = vocab->texts.size();

  if (gguf.Has(kKeyScores)) {
    vocab->scores = gguf.GetFloatArray(kKeyScores);
    if (vocab->scores.size() != n) {
      Fail("tokenizer: '", file, "': ", kKeyScores, " has ", vocab->scores.size(), " entries but ",
           kKeyTokens, " has ", n);
    }
  }

  ReadTokenTypes(gguf, *vocab);

  vocab->ids.Build(vocab->texts);

  ReadSpecialTokens(gguf, *vocab);
  ApplyHarmonyTokenRules(*vocab);
  ListSpecialTokens(*vocab);

  return vocab;
}

void TokenTextIndex::Build(const std::vector<std::string>& texts) {
  std::size_t size = 16;
  while (size < 2 * texts.size()) size *= 2;
  slots_.assign(size, -1);
  mask_ = size - 1;
  for (std::size_t id = 0; id < texts.size(); ++id) {
    std::size_t i = std::hash<std::string_view>{}(texts[id]) & mask_;
    while (slots_[i] >= 0 && texts[static_cast<std::size_t>(slots_[i])] != texts[id]) {
      i = (i + 1) & mask_;
    }
    slots_[i] = static_cast<int32_t>(id);  // a repeated text: the later id replaces the earlier
  }
}

int32_t TokenTextIndex::Find(std::string_view text, const std::vector<std::string>& texts) const {
  if (slots_.empty()) return -1;
  for (std::size_t i = std::hash<std::string_view>{}(text)&mask_;; i = (i + 1) & mask_) {
    const int32_t id = slots_[i];
    if (id < 0 || texts[static_cast<std::size_t>(id)] == text) return id;
  }
}

}  // namespace grove
