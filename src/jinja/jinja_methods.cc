// Python's str, dict and list methods that chat templates call, e.g. `content.split('</think>')`,
// `message.get('tool_calls')`, `tools.items()`. The immutable sandbox Hugging Face renders in
// refuses methods that change a list or dict, so grove refuses them too.
#include <algorithm>
#include <charconv>

#include "jinja/jinja_budget.h"
#include "jinja/jinja_builtins.h"

namespace grove::jinja {

namespace {

// Python's str.isspace() for the characters templates meet (ASCII and the \x1c-\x1f separators).
bool IsPySpace(unsigned char c) {
  return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
}

std::string StringArg(const CallArgs& args, size_t i, std::string_view name,
                      std::string_view method) {
  const Value* v = args.Get(i, name);
  if (v == nullptr || !v->is_string()) {
    ValueFail(method, "() argument ", i + 1, " must be str, not ",
              v == nullptr ? "missing" : TypeName(*v));
  }
  return v->text;
}

// A split makes a value per piece, and a long text of separators has a piece per character.
void CheckSplitRoom(size_t pieces) { CheckRoom(pieces * sizeof(Value), "split"); }

// str.split() without a separator: runs of whitespace separate, and leading and trailing
// whitespace give no empty parts.
Value SplitOnWhitespace(std::string_view s, int64_t max_split, bool from_right) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && IsPySpace(static_cast<unsigned char>(s[i]))) ++i;
    if (i == s.size()) break;
    size_t j = i;
    while (j < s.size() && !IsPySpace(static_cast<unsigned char>(s[j]))) ++j;
    words.emplace_back(s.substr(i, j - i));
    CheckSplitRoom(words.size());
    i = j;
  }
  ValueList parts;
  if (max_split >= 0 && static_cast<int64_t>(words.size()) > max_split + 1 && !from_right) {
    // Re-split keeping the remainder whole.
    size_t pos = 0;
    for (int64_t k = 0; k < max_split; ++k) {
      while (IsPySpace(static_cast<unsigned char>(s[pos]))) ++pos;
      size_t end = pos;
      while (!IsPySpace(static_cast<unsigned char>(s[end]))) ++end;
      parts.push_back(Value::String(std::string(s.substr(pos, end - pos))));
      pos = end;
    }
    while (pos < s.size() && IsPySpace(static_cast<unsigned char>(s[pos]))) ++pos;
    parts.push_back(Value::String(std::string(s.substr(pos))));
    return Value::List(std::move(parts));
  }
  for (std::string& w : words) parts.push_back(Value::String(std::move(w)));
  return Value::List(std::move(parts));
}

// str.split(sep) and str.rsplit(sep): at most max_split cuts (all when negative), the remainder
// kept whole at the end (split) or at the start (rsplit).
Value SplitOnSeparator(std::string_view s, const std::string& sep, int64_t max_split,
                       bool from_right) {
  std::vector<std::string> pieces;
  size_t start = 0;
  while (true) {
    size_t at = s.find(sep, start);
    if (at == std::string_view::npos) break;
    pieces.emplace_back(s.substr(start, at - start));
    CheckSplitRoom(pieces.size());
    start = at + sep.size();
  }
  pieces.emplace_back(s.substr(start));
  if (max_split >= 0 && static_cast<int64_t>(pieces.size()) > max_split + 1) {
    std::vector<std::string> limited;
    if (!from_right) {
      limited.assign(pieces.begin(), pieces.begin() + max_split);
      std::string rest = pieces[static_cast<size_t>(max_split)];
      for (size_t k = static_cast<size_t>(max_split) + 1; k < pieces.size(); ++k) {
        rest += sep + pieces[k];
      }
      limited.push_back(std::move(rest));
    } else {
      size_t keep_from = pieces.size() - static_cast<size_t>(max_split);
      std::string rest = pieces[0];
      for (size_t k = 1; k < keep_from; ++k) rest += sep + pieces[k];
      limited.push_back(std::move(rest));
      limited.insert(limited.end(), pieces.begin() + static_cast<long>(keep_from), pieces.end());
    }
    pieces = std::move(limited);
  }
  ValueList parts;
  for (std::string& p : pieces) parts.push_back(Value::String(std::move(p)));
  return Value::List(std::move(parts));
}

Value Split(std::string_view s, const Value& sep, int64_t max_split, bool from_right) {
  if (sep.is_none() || sep.is_undefined()) return SplitOnWhitespace(s, max_split, from_right);
  if (!sep.is_string()) ValueFail("split() separator must be str or None");
  if (sep.text.empty()) ValueFail("empty separator");
  return SplitOnSeparator(s, sep.text, max_split, from_right);
}

bool AffixMatch(std::string_view s, const Value& affix, bool prefix) {
  auto one = [&](const Value& a) {
    if (!a.is_string()) ValueFail(prefix ? "startswith" : "endswith", "() needs str or tuple");
    if (a.text.size() > s.size()) return false;
    return prefix ? s.substr(0, a.text.size()) == a.text
                  : s.substr(s.size() - a.text.size()) == a.text;
  };
  if (affix.is_list()) {
    return std::any_of(affix.list->begin(), affix.list->end(), one);
  }
  return one(affix);
}

// str.format with "{}", "{0}" and "{name}" fields (no format specs) and "{{" / "}}".
std::string BraceFormat(std::string_view fmt, const CallArgs& args) {
  std::string out;
  size_t next_auto = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') ++i;
      out += '}';
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    size_t close = fmt.find('}', i);
    if (close == std::string_view::npos) ValueFail("format: single '{' encountered");
    std::string field(fmt.substr(i + 1, close - i - 1));
    if (field.find_first_of(":!.[") != std::string::npos) {
      ValueFail("unsupported str.format field '{", field, "}'");
    }
    const Value* v = nullptr;
    if (field.empty()) {
      if (next_auto >= args.positional.size()) ValueFail("format: index out of range");
      v = &args.positional[next_auto++];
    } else if (std::all_of(field.begin(), field.end(),
                           [](char d) { return d >= '0' && d <= '9'; })) {
      size_t index = 0;
      auto res = std::from_chars(field.data(), field.data() + field.size(), index);
      if (res.ec != std::errc() || index >= args.positional.size()) {
        ValueFail("format: index out of range");
      }
      v = &args.positional[index];
    } else {
      for (const auto& [k, kv] : args.keywords) {
        if (k == field) v = &kv;
      }
      if (v == nullptr) ValueFail("format: missing key '", field, "'");
    }
    out += ToStr(*v);
    CheckStringRoom(out.size(), "format");
    i = close;
  }
  return out;
}

// str.find, rfind, index and rindex: the code point index of sub, or -1 (index: an error).
Value FindSubstring(const std::string& s, std::string_view name, const CallArgs& args) {
  std::string sub = StringArg(args, 0, "sub", name);
  size_t at = name[0] == 'r' ? s.rfind(sub) : s.find(sub);
  if (at == std::string::npos) {
    if (name == "index" || name == "rindex") ValueFail("substring not found");
    return Value::Int(-1);
  }
  return Value::Int(static_cast<int64_t>(CountCodePoints(std::string_view(s).substr(0, at))));
}

Value CountSubstring(const std::string& s, const CallArgs& args) {
  std::string sub = StringArg(args, 0, "sub", "count");
  if (sub.empty()) return Value::Int(static_cast<int64_t>(CountCodePoints(s)) + 1);
  int64_t n = 0;
  for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
  return Value::Int(n);
}

Value Join(const std::string& separator, const CallArgs& args) {
  const Value* items = args.Get(0, "iterable");
  if (items == nullptr || !items->is_list()) ValueFail("join() needs a list");
  std::string out;
  for (size_t i = 0; i < items->list->size(); ++i) {
    const Value& item = (*items->list)[i];
    if (!item.is_string()) ValueFail("sequence item ", i, ": expected str instance");
    if (i > 0) out += separator;
    out += item.text;
    CheckStringRoom(out.size(), "join");
  }
  return Value::String(std::move(out));
}

// str.splitlines() for \n, \r and \r\n.
Value SplitLines(const std::string& s) {
  ValueList lines;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\n' || s[i] == '\r') {
      lines.push_back(Value::String(s.substr(start, i - start)));
      CheckRoom(lines.size() * sizeof(Value), "splitlines");
      if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
      start = i + 1;
    }
  }
  if (start < s.size()) lines.push_back(Value::String(s.substr(start)));
  return Value::List(std::move(lines));
}

// str.isdigit(), isspace(), isalpha(), isalnum(): true for a non-empty string of such characters.
template <typename Pred>
Value AllCharacters(const std::string& s, Pred pred) {
  return Value::Bool(!s.empty() && std::all_of(s.begin(), s.end(), [&](char c) {
    return pred(static_cast<unsigned char>(c));
  }));
}

Value StringMethod(const std::string& s, std::string_view name, const CallArgs& args) {
  static const Value kNone = Value::None();
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const Value* chars = args.Get(0, "chars");
    return Value::String(PyStrip(s, chars, name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    const Value max = Arg(args, 1, "maxsplit", Value::Int(-1));
    return Split(s, Arg(args, 0, "sep", kNone), max.integer, name == "rsplit");
  }
  if (name == "startswith" || name == "endswith") {
    const Value* affix = args.Get(0, "prefix");
    if (affix == nullptr) ValueFail(name, "() takes at least 1 argument");
    return Value::Bool(AffixMatch(s, *affix, name == "startswith"));
  }
  if (name == "upper") return Value::String(PyUpper(s));
  if (name == "lower") return Value::String(PyLower(s));
  if (name == "title") return Value::String(PyTitle(s));
  if (name == "capitalize") return Value::String(PyCapitalize(s));
  if (name == "replace") {
    const Value count = Arg(args, 2, "count", Value::Int(-1));
    return Value::String(PyReplace(s, StringArg(args, 0, "old", name),
                                   StringArg(args, 1, "new", name), count.integer));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    return FindSubstring(s, name, args);
  }
  if (name == "count") return CountSubstring(s, args);
  if (name == "join") return Join(s, args);
  if (name == "splitlines") return SplitLines(s);
  if (name == "isdigit")
    return AllCharacters(s, [](unsigned char c) { return c >= '0' && c <= '9'; });
  if (name == "isspace") return AllCharacters(s, IsPySpace);
  if (name == "isalpha")
    return AllCharacters(s, [](unsigned char c) { return std::isalpha(c) != 0; });
  if (name == "isalnum")
    return AllCharacters(s, [](unsigned char c) { return std::isalnum(c) != 0; });
  if (name == "format") return Value::String(BraceFormat(s, args));
  ValueFail("unsupported method 'str.", name, "'");
}

Value DictMethod(const Value& d, std::string_view name, const CallArgs& args) {
  static const Value kNone = Value::None();
  if (name == "items") {
    ValueList out;
    for (const auto& [k, v] : d.dict->items)
      out.push_back(Value::Tuple({ValueDict::KeyValue(k), v}));
    return Value::List(std::move(out));
  }
  if (name == "keys") {
    ValueList out;
    for (const auto& [k, v] : d.dict->items) out.push_back(ValueDict::KeyValue(k));
    return Value::List(std::move(out));
  }
  if (name == "values") {
    ValueList out;
    for (const auto& [k, v] : d.dict->items) out.push_back(v);
    return Value::List(std::move(out));
  }
  if (name == "get") {
    const Value* key = args.Get(0, "key");
    if (key == nullptr) ValueFail("get() takes at least 1 argument");
    const Value fallback = Arg(args, 1, "default", kNone);
    if (!key->is_string() && key->kind != Value::Kind::kInt) return fallback;
    const Value* v = d.dict->Find(ValueDict::EncodeKey(*key));
    return v != nullptr ? *v : fallback;
  }
  if (name == "copy") {
    Value copy = Value::Dict();
    copy.dict->items = d.dict->items;
    return copy;
  }
  if (name == "update" || name == "pop" || name == "setdefault" || name == "clear" ||
      name == "popitem") {
    ValueFail("access to attribute '", name, "' of 'dict' object is unsafe (immutable sandbox)");
  }
  ValueFail("unsupported method 'dict.", name, "'");
}

Value ListMethod(const Value& l, std::string_view name, const CallArgs& args) {
  if (name == "count" || name == "index") {
    const Value* item = args.Get(0, "value");
    if (item == nullptr) ValueFail(name, "() takes exactly one argument");
    int64_t n = 0;
    for (size_t i = 0; i < l.list->size(); ++i) {
      if (!Equals((*l.list)[i], *item)) continue;
      if (name == "index") return Value::Int(static_cast<int64_t>(i));
      ++n;
    }
    if (name == "index") ValueFail("value is not in list");
    return Value::Int(n);
  }
  if (name == "copy") return Value::List(*l.list);
  if (name == "append" || name == "extend" || name == "pop" || name == "insert" ||
      name == "remove" || name == "clear" || name == "sort" || name == "reverse") {
    ValueFail("access to attribute '", name, "' of 'list' object is unsafe (immutable sandbox)");
  }
  ValueFail("unsupported method 'list.", name, "'");
}

}  // namespace

std::string PyStrip(std::string_view s, const Value* chars, bool left, bool right) {
  auto strip_char = [&](unsigned char c) {
    if (chars == nullptr || chars->is_none() || chars->is_undefined()) return IsPySpace(c);
    if (!chars->is_string()) ValueFail("strip arg must be None or str");
    return chars->text.find(static_cast<char>(c)) != std::string::npos;
  };
  size_t begin = 0, end = s.size();
  if (left) {
    while (begin < end && strip_char(static_cast<unsigned char>(s[begin]))) ++begin;
  }
  if (right) {
    while (end > begin && strip_char(static_cast<unsigned char>(s[end - 1]))) --end;
  }
  return std::string(s.substr(begin, end - begin));
}

std::string PyLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::string PyUpper(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return out;
}

std::string PyCapitalize(std::string_view s) {
  std::string out = PyLower(s);
  if (!out.empty() && out[0] >= 'a' && out[0] <= 'z') out[0] = static_cast<char>(out[0] - 32);
  return out;
}

// str.title(): a letter after a non-letter starts a word.
std::string PyTitle(std::string_view s) {
  std::string out(s);
  bool prev_letter = false;
  for (char& c : out) {
    bool lower = c >= 'a' && c <= 'z', upper = c >= 'A' && c <= 'Z';
    if (lower && !prev_letter) c = static_cast<char>(c - 32);
    if (upper && prev_letter) c = static_cast<char>(c + 32);
    prev_letter = lower || upper || (static_cast<unsigned char>(c) >= 0x80);
  }
  return out;
}

std::string PyReplace(std::string_view s, std::string_view old, std::string_view with,
                      int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts `with` between every character (and at both ends).
    std::vector<std::string_view> chars = CodePoints(s);
    int64_t done = 0;
    for (std::string_view c : chars) {
      if (count < 0 || done < count) {
        out += with;
        ++done;
      }
      out += c;
      CheckStringRoom(out.size(), "replace");
    }
    if (count < 0 || done < count) out += with;
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t at = s.find(old, start);
    if (at == std::string_view::npos) break;
    out += s.substr(start, at - start);
    out += with;
    CheckStringRoom(out.size(), "replace");
    start = at + old.size();
    ++done;
  }
  out += s.substr(start);
  return out;
}

Value CallMethod(const Value& target, std::string_view name, const CallArgs& args) {
  switch (target.kind) {
    case Value::Kind::kString:
      return StringMethod(target.text, name, args);
    case Value::Kind::kDict:
      return DictMethod(target, name, args);
    case Value::Kind::kList:
      return ListMethod(target, name, args);
    default:
      ValueFail("'", TypeName(target), "' object has no attribute '", name, "'");
  }
}

}  // namespace grove::jinja
