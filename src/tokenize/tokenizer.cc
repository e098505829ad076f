#include "tokenize/tokenizer.h"

#include <unicode/utf8.h>

#include "base/error.h"
#include "base/fnv1a.h"
#include "io/gguf.h"
#include "tokenize/tokenizer_vocab.h"

namespace grove {
namespace {

// A run of the input: ordinary text (token < 0) or the text of one special token.
struct Fragment {
  std::size_t begin = 0;
  std::size_t end = 0;
  int32_t token = -1;
};

// Splits every occurrence of the special token `id` out of the text fragments (left to right, not
// overlapping), leaving special-token fragments as they are.
void SplitOut(std::string_view text, int32_t id, std::string_view needle,
              std::vector<Fragment>* fragments) {
  std::vector<Fragment> split;
  split.reserve(fragments->size() + 2);
  for (const Fragment& f : *fragments) {
    if (f.token >= 0) {
      split.push_back(f);
      continue;
    }
    // A match may not run past the end of the fragment.
    const std::string_view bounded = text.substr(0, f.end);
    std::size_t pos = f.begin;
    for (std::size_t hit; (hit = bounded.find(needle, pos)) != std::string_view::npos;
         pos = hit + needle.size()) {
      if (hit > pos) split.push_back({pos, hit, -1});
      split.push_back({hit, hit + needle.size(), id});
    }
    if (pos < f.end) split.push_back({pos, f.end, -1});
  }
  fragments->swap(split);
}

// Appends the longest prefix of `bytes` that is complete UTF-8 to `out` and erases it from `bytes`,
// writing ill-formed sequences as U+FFFD. A well-formed but unfinished sequence at the end stays in
// `bytes` unless `final`.
void TakeCompleteUtf8(std::string* bytes, bool final, std::string* out) {
  const auto* s = reinterpret_cast<const uint8_t*>(bytes->data());
  const auto length = static_cast<int64_t>(bytes->size());
  int64_t i = 0;
  while (i < length) {
    const int64_t start = i;
    UChar32 c;
    U8_NEXT(s, i, length, c);
    if (c >= 0) {
      out->append(*bytes, start, i - start);
      continue;
    }
    // U8_NEXT consumed the maximal well-formed prefix. If that prefix reaches the end and is
    // shorter than its lead byte announces, the next token may finish it.
    const bool unfinished =
        i == length && U8_IS_LEAD(s[start]) && i - start < 1 + U8_COUNT_TRAIL_BYTES(s[start]);
    if (unfinished && !final) {
      bytes->erase(0, start);
      return;
    }
    out->append("\xEF\xBF\xBD");  // U+FFFD REPLACEMENT CHARACTER
  }
  bytes->clear();
}

// The bytes token `id` adds to decoded text. At the start of text (`*at_start`), a tokenizer with a
// space prefix drops one leading space from the first piece of text if a normal token produced it.
std::string_view PieceAt(const TokenizerVocab& vocab, int32_t id, bool* at_start) {
  std::string_view piece = vocab.pieces[id];
  if (*at_start && !piece.empty()) {
    if (vocab.types[id] == TokenType::kNormal && piece.front() == ' ') piece.remove_prefix(1);
    *at_start = false;
  }
  return piece;
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::FromGguf(const GgufFile& gguf) {
  std::unique_ptr<TokenizerVocab> vocab = LoadTokenizerVocab(gguf);
  std::unique_ptr<TokenizerModel> model =
      vocab->model == "llama" ? MakeSpmModel(gguf, vocab.get()) : MakeBpeModel(gguf, vocab.get());
  GROVE_CHECK(vocab->pieces.size() == vocab->texts.size());
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(vocab), std::move(model)));
}

Tokenizer::Tokenizer(std::unique_ptr<TokenizerVocab> vocab, std::unique_ptr<TokenizerModel> model)
    : vocab_(std::move(vocab)), model_(std::move(model)) {}

Tokenizer::~Tokenizer() = default;

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool add_bos,
                                       bool parse_special) const {
  std::vector<int32_t> out;
  if (add_bos && vocab_->bos >= 0) out.push_back(vocab_->bos);
  if (text.empty()) return out;

  // llama.cpp's order: each special token, longest first, is split out of what is still plain text.
  // User-defined tokens are split out even without parse_special (HF's non-special added tokens).
  std::vector<Fragment> fragments = {{0, text.size(), -1}};
  for (int32_t id : vocab_->special_by_length) {
    if (!parse_special && vocab_->types[id] != TokenType::kUserDefined) continue;
    const std::string_view needle = vocab_->texts[id];
    // The common case, settled with one scan and no copies.
    if (text.find(needle) == std::string_view::npos) continue;
    SplitOut(text, id, needle, &fragments);
  }

  bool after_special = true;
  for (const Fragment& f : fragments) {
    if (f.token >= 0) {
      out.push_back(f.token);
      after_special = true;
    } else {
      model_->Encode(text.substr(f.begin, f.end - f.begin), after_special, &out);
      after_special = false;
    }
  }
  return out;
}

std::string Tokenizer::Decode(std::span<const int32_t> tokens) const {
  std::size_t size = 0;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    CheckId(tokens[i], static_cast<int64_t>(i));
    size += vocab_->pieces[tokens[i]].size();
  }
  std::string out;
  out.reserve(size);
  bool at_start = model_->strips_leading_space();
  for (int32_t id : tokens) out.append(PieceAt(*vocab_, id, &at_start));
  return out;
}

void Tokenizer::CheckId(int32_t id, int64_t position) const {
  if (id < 0 || id >= n_vocab()) {
    Fail("tokenizer: token id ", id,
         position >= 0 ? StrCat(" at position ", position) : std::string(),
         " is out of range (the vocab has ", n_vocab(), " tokens)");
  }
}

std::string Tokenizer::TokenText(int32_t id) const {
  CheckId(id);
  return vocab_->texts[id];
}

std::string_view Tokenizer::TokenPiece(int32_t id) const {
  CheckId(id);
  return vocab_->pieces[id];
}

TokenType Tokenizer::token_type(int32_t id) const {
  CheckId(id);
  return vocab_->types[id];
}

int32_t Tokenizer::n_vocab() const { return vocab_->n_tokens(); }

uint64_t Tokenizer::Fingerprint() const {
  Fnv1a h;
  const int32_t n = n_vocab();
  h.Mix(&n, sizeof(n));
  for (int32_t id = 0; id < n; ++id) {
    const std::string text = TokenText(id);
    const uint32_t size = static_cast<uint32_t>(text.size());
    h.Mix(&size, sizeof(size)).Mix(text);
  }
  return h.value();
}
int32_t Tokenizer::bos() const { return vocab_->bos; }
int32_t Tokenizer::eos() const { return vocab_->eos; }
int32_t Tokenizer::unk() const { return vocab_->unk; }
bool Tokenizer::add_bos_by_default() const { return vocab_->add_bos; }
std::string_view Tokenizer::model_name() const { return vocab_->model; }

bool Tokenizer::IsEndOfGeneration(int32_t id) const {
  return id >= 0 && id < n_vocab() && vocab_->is_eog[id] != 0;
}

TokenStreamDecoder::TokenStreamDecoder(const Tokenizer& tok, bool strip_leading_space)
    : tok_(tok),
      strip_leading_space_(strip_leading_space && tok.model_->strips_leading_space()),
      at_start_(strip_leading_space_) {}

std::string TokenStreamDecoder::Push(int32_t token) {
  tok_.CheckId(token);
  pending_.append(PieceAt(*tok_.vocab_, token, &at_start_));
  std::string out;
  TakeCompleteUtf8(&pending_, /*final=*/false, &out);
  return out;
}

std::string TokenStreamDecoder::Flush() {
  std::string out;
  TakeCompleteUtf8(&pending_, /*final=*/true, &out);
  at_start_ = strip_leading_space_;
  return out;
}

}  // namespace grove
