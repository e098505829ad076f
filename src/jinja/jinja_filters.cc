// Jinja2's filters on text and numbers, and its tests, with Jinja2's defaults (`default` only for
// undefined values unless boolean=true) and Hugging Face's own tojson (json.dumps with
// ensure_ascii=False, no HTML escaping). The filters over sequences are
// jinja_sequence_filters.cc's.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/named.h"
#include "jinja/jinja_budget.h"
#include "jinja/jinja_builtins.h"
#include "jinja/jinja_int.h"
#include "jinja/jinja_json.h"

namespace grove::jinja {

namespace {

const Value kNoneValue = Value::None();

// Python's printf-style `fmt % args` for %s, %r, %d, %i, %f and %%.
std::string PercentFormat(std::string_view fmt, const ValueList& args) {
  std::string out;
  size_t next = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    if (i + 1 >= fmt.size()) ValueFail("format: incomplete format");
    char spec = fmt[++i];
    if (spec == '%') {
      out += '%';
      continue;
    }
    if (next >= args.size()) ValueFail("format: not enough arguments for format string");
    const Value& a = args[next++];
    switch (spec) {
      case 's':
        out += ToStr(a);
        break;
      case 'r':
        out += Repr(a);
        break;
      case 'd':
      case 'i':
        if (!a.is_number()) ValueFail("format: %d format: a number is required");
        out += std::to_string(a.kind == Value::Kind::kFloat ? TruncateToInt(a.number, "format: %d")
                                                            : a.AsInt());
        break;
      case 'f': {
        if (!a.is_number()) ValueFail("format: %f format: a number is required");
        char buf[64];
        std::snprintf(buf, sizeof buf, "%f", a.AsDouble());
        out += buf;
        break;
      }
      default:
        ValueFail("format: unsupported format character '", spec, "'");
    }
    CheckStringRoom(out.size(), "format");
  }
  if (next < args.size()) ValueFail("format: not all arguments converted during string formatting");
  return out;
}

Value ToInt(const Value& v, const Value& fallback) {
  switch (v.kind) {
    case Value::Kind::kInt:
      return v;
    case Value::Kind::kBool:
      return Value::Int(v.boolean);
    case Value::Kind::kFloat:
      return std::isfinite(v.number) ? Value::Int(TruncateToInt(v.number, "int")) : fallback;
    case Value::Kind::kString: {
      std::string s = PyStrip(v.text, nullptr, true, true);
      std::string digits;
      for (char c : s) {
        if (c != '_') digits += c;
      }
      try {
        size_t used = 0;
        int64_t i = std::stoll(digits, &used, 10);
        if (used == digits.size()) return Value::Int(i);
        double d = std::stod(digits, &used);
        if (used == digits.size() && std::isfinite(d)) return Value::Int(TruncateToInt(d, "int"));
      } catch (const std::exception&) {
      }
      return fallback;
    }
    default:
      return fallback;
  }
}

Value ToFloat(const Value& v, const Value& fallback) {
  if (v.is_number()) return Value::Float(v.AsDouble());
  if (v.is_string()) {
    try {
      size_t used = 0;
      std::string s = PyStrip(v.text, nullptr, true, true);
      double d = std::stod(s, &used);
      if (used == s.size()) return Value::Float(d);
    } catch (const std::exception&) {
    }
  }
  return fallback;
}

Value Length(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined:
      return Value::Int(0);
    case Value::Kind::kString:
      return Value::Int(static_cast<int64_t>(CountCodePoints(v.text)));
    case Value::Kind::kList:
      if (v.generator) ValueFail("object of type 'generator' has no len()");
      return Value::Int(static_cast<int64_t>(v.list->size()));
    case Value::Kind::kDict:
      return Value::Int(static_cast<int64_t>(v.dict->items.size()));
    default:
      ValueFail("object of type '", TypeName(v), "' has no len()");
  }
}

std::string Indent(const std::string& s, const Value& width, bool first, bool blank) {
  std::string indention =
      width.is_string()
          ? width.text
          : std::string(static_cast<size_t>(std::max<int64_t>(0, width.integer)), ' ');
  // Jinja2 appends a newline and splits into lines, so a trailing newline is dropped.
  std::vector<std::string> lines;
  std::string text = s + "\n";
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n') {
      lines.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) {
      out += '\n';
      if (blank || !lines[i].empty()) out += indention;
    }
    out += lines[i];
  }
  if (first) out = indention + out;
  return out;
}

// Jinja2's `title` filter: a word starts after whitespace or one of -({[< .
std::string JinjaTitle(std::string_view s) {
  std::string out;
  bool word_start = true;
  for (char c : s) {
    bool boundary = c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' ||
                    c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    if (boundary) {
      out += c;
      word_start = true;
    } else if (word_start) {
      out += PyUpper(std::string(1, c));
      word_start = false;
    } else {
      out += PyLower(std::string(1, c));
    }
  }
  return out;
}

Value RoundValue(const Value& v, int64_t precision, const std::string& method) {
  if (!v.is_number()) ValueFail("round: '", TypeName(v), "' is not a number");
  double x = v.AsDouble();
  double scale = std::pow(10.0, static_cast<double>(precision));
  double r;
  if (method == "ceil") {
    r = std::ceil(x * scale) / scale;
  } else if (method == "floor") {
    r = std::floor(x * scale) / scale;
  } else {
    r = std::nearbyint(x * scale) / scale;  // Python's round: half to even
  }
  if (v.kind != Value::Kind::kFloat && method == "common")
    return Value::Int(static_cast<int64_t>(r));
  return Value::Float(r);
}

// json.dumps(ensure_ascii=True): every non-ASCII code point as \uXXXX (UTF-16 pairs above
// U+FFFF). Only strings hold non-ASCII text, so escaping the finished JSON is the same.
std::string EscapeNonAscii(std::string_view json) {
  std::string out;
  for (std::string_view c : CodePoints(json)) {
    if (c.size() == 1) {
      out += c;
      continue;
    }
    uint32_t cp = static_cast<unsigned char>(c[0]) & (c.size() == 2   ? 0x1f
                                                      : c.size() == 3 ? 0x0f
                                                                      : 0x07);
    for (size_t i = 1; i < c.size(); ++i)
      cp = (cp << 6) | (static_cast<unsigned char>(c[i]) & 0x3f);
    char buf[16];
    if (cp >= 0x10000) {
      cp -= 0x10000;
      std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
    } else {
      std::snprintf(buf, sizeof buf, "\\u%04x", cp);
    }
    out += buf;
  }
  return out;
}

Value FilterTrim(const FilterCall& c) {
  return Value::String(PyStrip(ToStr(c.target), c.args.Get(0, "chars"), true, true));
}

Value FilterLength(const FilterCall& c) { return Length(c.target); }

Value FilterString(const FilterCall& c) {
  return c.target.is_string() ? c.target : Value::String(ToStr(c.target));
}

// `safe` marks the text as Markup; `escape` escapes it first, unless it is Markup already.
Value FilterSafeOrEscape(const FilterCall& c) {
  Value marked = c.target.markup || c.name == "safe" ? Value::String(ToStr(c.target))
                                                     : Value::String(HtmlEscape(ToStr(c.target)));
  marked.markup = true;
  return marked;
}

Value FilterLower(const FilterCall& c) { return Value::String(PyLower(ToStr(c.target))); }
Value FilterUpper(const FilterCall& c) { return Value::String(PyUpper(ToStr(c.target))); }
Value FilterCapitalize(const FilterCall& c) { return Value::String(PyCapitalize(ToStr(c.target))); }
Value FilterTitle(const FilterCall& c) { return Value::String(JinjaTitle(ToStr(c.target))); }

Value FilterDefault(const FilterCall& c) {
  static const Value kEmpty = Value::String("");
  const Value fallback = Arg(c.args, 0, "default_value", kEmpty);
  bool boolean = ArgBool(c.args, 1, "boolean", false);
  if (c.target.is_undefined() || (boolean && !Truthy(c.target))) return fallback;
  return c.target;
}

Value FilterInt(const FilterCall& c) {
  return ToInt(c.target, Arg(c.args, 0, "default", Value::Int(0)));
}
Value FilterFloat(const FilterCall& c) {
  return ToFloat(c.target, Arg(c.args, 0, "default", Value::Float(0)));
}

Value FilterAbs(const FilterCall& c) {
  if (c.target.kind == Value::Kind::kFloat) return Value::Float(std::fabs(c.target.number));
  if (c.target.is_number()) {
    const int64_t i = c.target.AsInt();
    return Value::Int(i < 0 ? CheckedNeg(i) : i);
  }
  ValueFail("bad operand type for abs(): '", TypeName(c.target), "'");
}

Value FilterRound(const FilterCall& c) {
  const Value precision = Arg(c.args, 0, "precision", Value::Int(0));
  const Value method = Arg(c.args, 1, "method", Value::String("common"));
  return RoundValue(c.target, precision.integer, method.text);
}

Value FilterToJson(const FilterCall& c) {
  const Value indent = Arg(c.args, 1, "indent", kNoneValue);
  const Value separators = Arg(c.args, 2, "separators", kNoneValue);
  bool sort_keys = ArgBool(c.args, 3, "sort_keys", false);
  bool ensure_ascii = ArgBool(c.args, 0, "ensure_ascii", false);
  if (!indent.is_none() && !indent.is_undefined() &&
      static_cast<uint64_t>(std::max<int64_t>(0, indent.integer)) > c.max_bytes) {
    ValueFail("tojson: indent ", indent.integer, " is longer than ", c.max_bytes, " bytes");
  }
  int indent_n = indent.is_none() || indent.is_undefined() ? -1 : static_cast<int>(indent.integer);
  std::string item_sep = indent_n < 0 ? ", " : ",", key_sep = ": ";
  if (separators.is_list() && separators.list->size() == 2) {
    item_sep = ToStr((*separators.list)[0]);
    key_sep = ToStr((*separators.list)[1]);
  }
  if (sort_keys) ValueFail("tojson: unsupported sort_keys=true");
  std::string json = DumpJson(c.target, indent_n, item_sep, key_sep);
  return Value::String(ensure_ascii ? EscapeNonAscii(json) : json);
}

Value FilterIndent(const FilterCall& c) {
  const Value width = Arg(c.args, 0, "width", Value::Int(4));
  bool first = ArgBool(c.args, 1, "first", false);
  bool blank = ArgBool(c.args, 2, "blank", false);
  std::string text = ToStr(c.target);
  size_t lines = static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) + 1;
  // One line's indentation as Indent makes it: a string width as written, else that many spaces.
  const uint64_t width_bytes = width.is_string()
                                   ? width.text.size()
                                   : static_cast<uint64_t>(std::max<int64_t>(0, width.integer));
  // Divided, not multiplied: lines times a huge width wraps around to a small product.
  if (width_bytes > c.max_bytes / lines) {
    ValueFail("indent: result longer than ", c.max_bytes, " bytes");
  }
  CheckRoom(text.size() + width_bytes * lines, "indent");
  return Value::String(Indent(text, width, first, blank));
}

Value FilterReplace(const FilterCall& c) {
  const Value* old = c.args.Get(0, "old");
  const Value* with = c.args.Get(1, "new");
  if (old == nullptr || with == nullptr) ValueFail("replace: needs old and new");
  const Value count = Arg(c.args, 2, "count", kNoneValue);
  std::string out =
      PyReplace(ToStr(c.target), ToStr(*old), ToStr(*with), count.is_none() ? -1 : count.integer);
  if (out.size() > c.max_bytes) ValueFail("replace: result longer than ", c.max_bytes, " bytes");
  return Value::String(std::move(out));
}

Value FilterFormat(const FilterCall& c) {
  if (!c.args.keywords.empty()) ValueFail("format: unsupported keyword arguments");
  return Value::String(PercentFormat(ToStr(c.target), c.args.positional));
}

Value FilterWordcount(const FilterCall& c) {
  CallArgs none;
  Value words = CallMethod(Value::String(ToStr(c.target)), "split", none);
  return Value::Int(static_cast<int64_t>(words.list->size()));
}

constexpr Named<Filter> kTextFilters[] = {
    {FilterTrim, "trim"},         {FilterLength, "length"},
    {FilterLength, "count"},      {FilterString, "string"},
    {FilterSafeOrEscape, "safe"}, {FilterSafeOrEscape, "escape"},
    {FilterSafeOrEscape, "e"},    {FilterLower, "lower"},
    {FilterUpper, "upper"},       {FilterCapitalize, "capitalize"},
    {FilterTitle, "title"},       {FilterDefault, "default"},
    {FilterDefault, "d"},         {FilterInt, "int"},
    {FilterFloat, "float"},       {FilterAbs, "abs"},
    {FilterRound, "round"},       {FilterToJson, "tojson"},
    {FilterIndent, "indent"},     {FilterReplace, "replace"},
    {FilterFormat, "format"},     {FilterWordcount, "wordcount"},
};

}  // namespace

Value ApplyFilter(std::string_view name, const Value& target, const CallArgs& args,
                  size_t max_bytes) {
  std::optional<Filter> filter = FindNamed(kTextFilters, name);
  if (!filter) filter = FindSequenceFilter(name);
  if (!filter) ValueFail("unsupported filter '", name, "'");
  return (*filter)(FilterCall{name, target, args, max_bytes});
}

bool ApplyTest(std::string_view name, const Value& v, const CallArgs& args) {
  auto other = [&]() -> const Value& {
    if (args.positional.empty()) ValueFail("test '", name, "' needs an argument");
    return args.positional[0];
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.kind == Value::Kind::kBool;
  if (name == "true") return v.kind == Value::Kind::kBool && v.boolean;
  if (name == "false") return v.kind == Value::Kind::kBool && !v.boolean;
  if (name == "integer") return v.kind == Value::Kind::kInt;
  if (name == "float") return v.kind == Value::Kind::kFloat;
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  if (name == "iterable") return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
  if (name == "sequence") return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
  if (name == "callable") return v.kind == Value::Kind::kFunction;
  if (name == "lower") return v.is_string() && PyLower(v.text) == v.text;
  if (name == "upper") return v.is_string() && PyUpper(v.text) == v.text;
  if (name == "escaped") return false;
  if (name == "even" || name == "odd" || name == "divisibleby") {
    if (v.kind != Value::Kind::kInt) ValueFail("test '", name, "' needs an integer");
    int64_t d = name == "divisibleby" ? other().integer : 2;
    if (d == 0) ValueFail("divisibleby: division by zero");
    int64_t r = v.integer % d;
    return name == "odd" ? r != 0 : r == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") return Equals(v, other());
  if (name == "ne" || name == "!=") return !Equals(v, other());
  if (name == "sameas") {
    const Value& o = other();
    if (v.kind != o.kind) return false;
    if (v.is_none() || v.is_undefined()) return true;
    if (v.kind == Value::Kind::kBool) return v.boolean == o.boolean;
    if (v.is_list()) return v.list == o.list;
    if (v.is_dict()) return v.dict == o.dict;
    return Equals(v, o);
  }
  if (name == "lt" || name == "lessthan" || name == "<") return Compare(v, other(), nullptr) < 0;
  if (name == "le" || name == "<=") return Compare(v, other(), nullptr) <= 0;
  if (name == "gt" || name == "greaterthan" || name == ">") return Compare(v, other(), nullptr) > 0;
  if (name == "ge" || name == ">=") return Compare(v, other(), nullptr) >= 0;
  if (name == "in") {
    const Value& seq = other();
    if (seq.is_string()) return v.is_string() && seq.text.find(v.text) != std::string::npos;
    if (seq.is_dict())
      return v.is_string() && seq.dict->Find(ValueDict::StringKey(v.text)) != nullptr;
    if (seq.is_list()) {
      return std::any_of(seq.list->begin(), seq.list->end(),
                         [&](const Value& item) { return Equals(item, v); });
    }
    ValueFail("test 'in': '", TypeName(seq), "' is not a container");
  }
  ValueFail("unsupported test '", name, "'");
}

}  // namespace grove::jinja
