#include "jinja/jinja_lexer.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include "base/error.h"

namespace grove::jinja {

namespace {

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

int LineAt(std::string_view src, size_t pos) {
  return 1 + static_cast<int>(std::count(src.begin(), src.begin() + static_cast<long>(pos), '\n'));
}

// Appends code point cp (at most U+10FFFF) as UTF-8.
void AppendUtf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

// What a one-character escape \e stands for, or nothing (a hex escape, or none Python knows).
std::optional<char> SimpleEscape(char e) {
  switch (e) {
    case 'n':
      return '\n';
    case 't':
      return '\t';
    case 'r':
      return '\r';
    case '\\':
      return '\\';
    case '\'':
      return '\'';
    case '"':
      return '"';
    case 'a':
      return '\a';
    case 'b':
      return '\b';
    case 'f':
      return '\f';
    case 'v':
      return '\v';
    case '0':
      return '\0';
    default:
      return std::nullopt;
  }
}

// Python's unicode-escape decoding of a string literal's body (Jinja2 reads literals that way).
std::string Unescape(std::string_view body) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (c != '\\' || i + 1 == body.size()) {
      out += c;
      continue;
    }
    char e = body[++i];
    if (const std::optional<char> simple = SimpleEscape(e)) {
      out += *simple;
      continue;
    }
    if (e == '\n') continue;  // a line continuation
    const size_t len = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
    // A hex escape's digits are body[i + 1 .. i + len]; anything else stays as written.
    if (len > 0 && i + len < body.size() &&
        std::all_of(body.begin() + static_cast<long>(i) + 1,
                    body.begin() + static_cast<long>(i + 1 + len),
                    [](char h) { return std::isxdigit(static_cast<unsigned char>(h)); })) {
      const auto cp =
          static_cast<uint32_t>(std::stoul(std::string(body.substr(i + 1, len)), nullptr, 16));
      AppendUtf8(out, std::min<uint32_t>(cp, 0x10ffff));
      i += len;
    } else {
      out += '\\';
      out += e;
    }
  }
  return out;
}

class Lexer {
 public:
  Lexer(std::string_view src, const LexOptions& options) : src_(src), options_(options) {}

  std::vector<Token> Run() {
    size_t pos = 0;
    bool line_starting = true;
    bool strip_next_text = false;  // the previous tag ended with '-'
    while (pos < src_.size()) {
      size_t start = FindTagStart(pos);
      std::string text(src_.substr(pos, start - pos));
      if (strip_next_text) {
        size_t first = 0;
        while (first < text.size() && IsSpace(text[first])) ++first;
        text.erase(0, first);
      }
      if (start == src_.size()) {
        EmitText(std::move(text), pos);
        break;
      }
      char kind = src_[start + 1];  // '{', '%' or '#'
      char modifier = start + 2 < src_.size() ? src_[start + 2] : '\0';
      TrimBeforeTag(text, modifier, kind != '{', line_starting || strip_next_text);
      EmitText(std::move(text), pos);
      size_t inner = start + 2 + ((modifier == '-' || modifier == '+') ? 1 : 0);
      size_t end;  // just past the tag
      bool strip_after = false;
      if (kind == '#') {
        size_t close = src_.find("#}", inner);
        if (close == std::string_view::npos) Fail(LineError(start, "unterminated comment"));
        strip_after = close > inner && src_[close - 1] == '-';
        end = close + 2;
        end = TrimAfterBlock(end, strip_after, close > inner && src_[close - 1] == '+');
      } else if (kind == '{') {
        tokens_.push_back({Token::Kind::kVarBegin, "{{", LineAt(src_, start)});
        end = LexExpression(inner, start, /*block=*/false, &strip_after);
      } else {
        size_t raw_end = 0;
        bool strip_body_start = false;
        if (IsRawTag(inner, &raw_end, &strip_body_start)) {
          end = LexRaw(raw_end, strip_body_start, start, &strip_after);
        } else {
          tokens_.push_back({Token::Kind::kBlockBegin, "{%", LineAt(src_, start)});
          end = LexExpression(inner, start, /*block=*/true, &strip_after);
        }
      }
      line_starting = end > 0 && src_[end - 1] == '\n';
      strip_next_text = strip_after;
      pos = end;
    }
    tokens_.push_back({Token::Kind::kEnd, "", LineAt(src_, src_.size())});
    return std::move(tokens_);
  }

 private:
  std::string LineError(size_t pos, std::string_view what) const {
    return StrCat("chat template line ", LineAt(src_, pos), ": ", what);
  }

  size_t FindTagStart(size_t pos) const {
    while (true) {
      size_t p = src_.find('{', pos);
      if (p == std::string_view::npos || p + 1 >= src_.size()) return src_.size();
      char next = src_[p + 1];
      if (next == '{' || next == '%' || next == '#') return p;
      pos = p + 1;
    }
  }

  void EmitText(std::string text, size_t pos) {
    if (text.empty()) return;
    tokens_.push_back({Token::Kind::kText, std::move(text), LineAt(src_, pos)});
  }

  // The text before a tag: `{%-` strips all its trailing whitespace; before a block or comment
  // tag (not `{%+`), lstrip_blocks strips the spaces and tabs that begin the tag's line, if
  // nothing else does (`line_starting`: the text itself starts a line).
  void TrimBeforeTag(std::string& text, char modifier, bool block_or_comment,
                     bool line_starting) const {
    if (modifier == '-') {
      while (!text.empty() && IsSpace(text.back())) text.pop_back();
    } else if (modifier != '+' && options_.lstrip_blocks && block_or_comment) {
      size_t line_start = text.rfind('\n');
      size_t from = line_start == std::string::npos ? 0 : line_start + 1;
      if (line_start != std::string::npos || line_starting) {
        bool blank = std::all_of(text.begin() + static_cast<long>(from), text.end(),
                                 [](char c) { return c == ' ' || c == '\t'; });
        if (blank) text.erase(from);
      }
    }
  }

  // After a block or comment tag: trim_blocks drops one newline (unless `+%}`), `-%}` is handled
  // by stripping the next text.
  size_t TrimAfterBlock(size_t end, bool strip_after, bool keep) const {
    if (!strip_after && !keep && options_.trim_blocks && end < src_.size() && src_[end] == '\n') {
      return end + 1;
    }
    return end;
  }

  // `{% raw %}` or `{% raw -%}` (Jinja2 takes no `+%}` here): *after is past it, *strip whether
  // the `-` strips the whitespace that begins the body.
  bool IsRawTag(size_t inner, size_t* after, bool* strip) const {
    size_t p = inner;
    while (p < src_.size() && IsSpace(src_[p])) ++p;
    if (src_.substr(p, 3) != "raw") return false;
    p += 3;
    while (p < src_.size() && IsSpace(src_[p])) ++p;
    *strip = p < src_.size() && src_[p] == '-';
    if (*strip) ++p;
    if (src_.substr(p, 2) != "%}") return false;
    *after = p + 2;
    return true;
  }

  // A raw block's body as text, up to `{% endraw %}`, whose modifiers act as a block tag's do:
  // `{%-` and `{%+` on the body's end (else lstrip_blocks), `-%}` and `+%}` on what follows (else
  // trim_blocks).
  size_t LexRaw(size_t body_start, bool strip_body_start, size_t tag_start, bool* strip_after) {
    if (strip_body_start) {
      while (body_start < src_.size() && IsSpace(src_[body_start])) ++body_start;
    }
    // The body starts a line when the opener's `-%}` stripped up to a newline.
    const bool line_starting = strip_body_start && body_start > 0 && src_[body_start - 1] == '\n';
    size_t search = body_start;
    while (true) {
      size_t p = src_.find("{%", search);
      if (p == std::string_view::npos) Fail(LineError(tag_start, "unterminated raw block"));
      size_t q = p + 2;
      const char modifier = q < src_.size() ? src_[q] : '\0';
      if (modifier == '-' || modifier == '+') ++q;
      while (q < src_.size() && IsSpace(src_[q])) ++q;
      if (src_.substr(q, 6) == "endraw") {
        q += 6;
        while (q < src_.size() && IsSpace(src_[q])) ++q;
        const bool strip = q < src_.size() && src_[q] == '-';
        const bool keep = q < src_.size() && src_[q] == '+';
        if (strip || keep) ++q;
        if (src_.substr(q, 2) == "%}") {
          std::string body(src_.substr(body_start, p - body_start));
          TrimBeforeTag(body, modifier, /*block_or_comment=*/true, line_starting);
          EmitText(std::move(body), body_start);
          *strip_after = strip;
          return TrimAfterBlock(q + 2, strip, keep);
        }
      }
      search = p + 2;
    }
  }

  // Tokens of one tag's expression, up to and including its end marker; returns the position
  // just past it.
  size_t LexExpression(size_t p, size_t tag_start, bool block, bool* strip_after) {
    int depth = 0;  // open brackets: a '}' inside a dict literal does not end the tag
    while (true) {
      while (p < src_.size() && IsSpace(src_[p])) ++p;
      if (p >= src_.size()) {
        Fail(LineError(tag_start, block ? "unterminated '{%' tag" : "unterminated '{{' tag"));
      }
      const int line = LineAt(src_, p);
      const char c = src_[p];
      if (depth == 0) {
        if (std::optional<size_t> end = LexEndMarker(p, line, block, strip_after)) return *end;
      }
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        p = LexName(p, line);
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        p = LexNumber(p, line);
      } else if (c == '\'' || c == '"') {
        p = LexString(p, line);
      } else {
        p = LexOperator(p, line, &depth);
      }
    }
  }

  // The tag's end marker (`%}` or `}}`, with a `-` or `+` before it) at p: its token, and the
  // position after it (and the whitespace a `-` strips); nothing if p holds something else.
  std::optional<size_t> LexEndMarker(size_t p, int line, bool block, bool* strip_after) {
    std::string_view rest = src_.substr(p);
    std::string_view end_marker = block ? "%}" : "}}";
    bool minus = rest.size() >= 3 && rest[0] == '-' && rest.substr(1, 2) == end_marker;
    bool plus = rest.size() >= 3 && rest[0] == '+' && rest.substr(1, 2) == end_marker;
    if (!minus && !plus && rest.substr(0, 2) != end_marker) return std::nullopt;
    size_t end = p + 2 + (minus || plus ? 1 : 0);
    tokens_.push_back(
        {block ? Token::Kind::kBlockEnd : Token::Kind::kVarEnd, std::string(end_marker), line});
    *strip_after = minus;
    return block ? TrimAfterBlock(end, minus, plus) : end;
  }

  size_t LexName(size_t p, int line) {
    size_t q = p;
    while (q < src_.size() &&
           (std::isalnum(static_cast<unsigned char>(src_[q])) || src_[q] == '_')) {
      ++q;
    }
    tokens_.push_back({Token::Kind::kName, std::string(src_.substr(p, q - p)), line});
    return q;
  }

  // An integer or a float (`1.5`, `1e3`), with Python's `_` digit separators dropped.
  size_t LexNumber(size_t p, int line) {
    size_t q = p;
    bool is_float = false;
    auto digits = [&] {
      while (q < src_.size() &&
             (std::isdigit(static_cast<unsigned char>(src_[q])) || src_[q] == '_')) {
        ++q;
      }
    };
    digits();
    if (q + 1 < src_.size() && src_[q] == '.' &&
        std::isdigit(static_cast<unsigned char>(src_[q + 1]))) {
      is_float = true;
      ++q;
      digits();
    }
    if (q < src_.size() && (src_[q] == 'e' || src_[q] == 'E')) {
      size_t r = q + 1;
      if (r < src_.size() && (src_[r] == '+' || src_[r] == '-')) ++r;
      if (r < src_.size() && std::isdigit(static_cast<unsigned char>(src_[r]))) {
        is_float = true;
        q = r;
        digits();
      }
    }
    std::string number;
    for (char d : src_.substr(p, q - p)) {
      if (d != '_') number += d;
    }
    tokens_.push_back({is_float ? Token::Kind::kFloat : Token::Kind::kInt, number, line});
    return q;
  }

  size_t LexString(size_t p, int line) {
    const char quote = src_[p];
    size_t q = p + 1;
    while (q < src_.size() && src_[q] != quote) {
      if (src_[q] == '\\') ++q;
      ++q;
    }
    if (q >= src_.size()) Fail(LineError(p, "unterminated string literal"));
    tokens_.push_back({Token::Kind::kString, Unescape(src_.substr(p + 1, q - p - 1)), line});
    return q + 1;
  }

  // The longest operator at p; brackets change *depth.
  size_t LexOperator(size_t p, int line, int* depth) {
    static constexpr std::string_view kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*",
                                                "/",  "%",  "~",  "<",  ">",  "(",  ")", "[", "]",
                                                "{",  "}",  ",",  ".",  ":",  "|",  "=", ";"};
    std::string_view rest = src_.substr(p);
    std::string_view op;
    for (std::string_view candidate : kOps) {
      if (rest.substr(0, candidate.size()) == candidate) {
        op = candidate;
        break;
      }
    }
    if (op.empty()) Fail(LineError(p, StrCat("unexpected character '", src_[p], "'")));
    if (op == "(" || op == "[" || op == "{") ++*depth;
    if ((op == ")" || op == "]" || op == "}") && *depth > 0) --*depth;
    tokens_.push_back({Token::Kind::kOp, std::string(op), line});
    return p + op.size();
  }

  std::string_view src_;
  LexOptions options_;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> Lex(std::string_view source, const LexOptions& options) {
  if (!options.keep_trailing_newline && !source.empty() && source.back() == '\n') {
    source.remove_suffix(1);
  }
  return Lexer(source, options).Run();
}

}  // namespace grove::jinja
