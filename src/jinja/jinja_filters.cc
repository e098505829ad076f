// Jinja2's filters and tests, with Jinja2's defaults (case-insensitive unique, sort and dictsort;
// `default` only for undefined values unless boolean=true) and Hugging Face's own tojson
// (json.dumps with ensure_ascii=False, no HTML escaping).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "jinja/jinja_builtins.h"
#include "jinja/jinja_int.h"
#include "jinja/jinja_json.h"

namespace grove::jinja {

namespace {

const Value kNoneValue = Value::None();

Value Arg(const CallArgs& args, size_t i, std::string_view name, const Value& fallback) {
  const Value* v = args.Get(i, name);
  return v != nullptr ? *v : fallback;
}

bool ArgBool(const CallArgs& args, size_t i, std::string_view name, bool fallback) {
  const Value* v = args.Get(i, name);
  return v != nullptr ? Truthy(*v) : fallback;
}

ValueList AsSequence(const Value& v, std::string_view filter) {
  ValueList items;
  if (!IterationItems(v, &items)) ValueFail(filter, ": '", TypeName(v), "' object is not iterable");
  return items;
}

// Jinja2's environment.getitem for a dotted attribute path ("function.name").
Value AttributeOf(const Value& item, std::string_view path) {
  Value cur = item;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part(path.substr(start, dot == std::string_view::npos ? dot : dot - start));
    if (cur.is_dict()) {
      const Value* v = cur.dict->Find(ValueDict::StringKey(part));
      cur = v != nullptr ? *v : Value::Undefined(part);
    } else if (cur.is_list() && !part.empty() &&
               std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      size_t i = 0;
      auto res = std::from_chars(part.data(), part.data() + part.size(), i);
      bool ok = res.ec == std::errc() && i < cur.list->size();
      cur = ok ? (*cur.list)[i] : Value::Undefined(part);
    } else {
      if (cur.is_undefined()) ValueFail("'", cur.text, "' is undefined (reading '", part, "')");
      cur = Value::Undefined(part);
    }
    if (dot == std::string_view::npos) return cur;
    start = dot + 1;
  }
}

// The key for case-insensitive ordering.
Value SortKey(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value::String(PyLower(v.text));
  return v;
}

void SortValues(ValueList& items, bool case_sensitive, const std::string* attribute, bool reverse) {
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    Value ka = SortKey(attribute ? AttributeOf(a, *attribute) : a, case_sensitive);
    Value kb = SortKey(attribute ? AttributeOf(b, *attribute) : b, case_sensitive);
    return reverse ? Compare(kb, ka, nullptr) < 0 : Compare(ka, kb, nullptr) < 0;
  });
}

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
      return Value::Int(static_cast<int64_t>(CodePoints(v.text).size()));
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

Value Generator(ValueList items) {
  Value v = Value::List(std::move(items));
  v.generator = true;
  return v;
}

// map, select and friends iterate their input only when it is truthy (Jinja2's `if value:`).
ValueList LazySequence(const Value& v, std::string_view filter) {
  if (!Truthy(v)) return {};
  return AsSequence(v, filter);
}

ValueList FilterByTest(const ValueList& items, const CallArgs& args, size_t test_index,
                       const std::string* attribute, bool keep_when) {
  ValueList out;
  std::string test_name;
  CallArgs test_args;
  if (args.positional.size() > test_index) {
    const Value& t = args.positional[test_index];
    if (!t.is_string()) ValueFail("select: the test name must be a string");
    test_name = t.text;
    test_args.positional.assign(args.positional.begin() + static_cast<long>(test_index) + 1,
                                args.positional.end());
  }
  for (const Value& item : items) {
    Value subject = attribute ? AttributeOf(item, *attribute) : item;
    bool passed = test_name.empty() ? Truthy(subject) : ApplyTest(test_name, subject, test_args);
    if (passed == keep_when) out.push_back(item);
  }
  return out;
}

}  // namespace

Value ApplyFilter(std::string_view name, const Value& target, const CallArgs& args,
                  size_t max_bytes) {
  if (name == "trim") {
    return Value::String(PyStrip(ToStr(target), args.Get(0, "chars"), true, true));
  }
  if (name == "length" || name == "count") return Length(target);
  if (name == "string") return target.is_string() ? target : Value::String(ToStr(target));
  if (name == "safe" || name == "escape" || name == "e") {
    Value marked = target.markup || name == "safe" ? Value::String(ToStr(target))
                                                   : Value::String(HtmlEscape(ToStr(target)));
    marked.markup = true;
    return marked;
  }
  if (name == "lower") return Value::String(PyLower(ToStr(target)));
  if (name == "upper") return Value::String(PyUpper(ToStr(target)));
  if (name == "capitalize") return Value::String(PyCapitalize(ToStr(target)));
  if (name == "title") return Value::String(JinjaTitle(ToStr(target)));
  if (name == "default" || name == "d") {
    static const Value kEmpty = Value::String("");
    const Value fallback = Arg(args, 0, "default_value", kEmpty);
    bool boolean = ArgBool(args, 1, "boolean", false);
    if (target.is_undefined() || (boolean && !Truthy(target))) return fallback;
    return target;
  }
  if (name == "int") return ToInt(target, Arg(args, 0, "default", Value::Int(0)));
  if (name == "float") return ToFloat(target, Arg(args, 0, "default", Value::Float(0)));
  if (name == "abs") {
    if (target.kind == Value::Kind::kFloat) return Value::Float(std::fabs(target.number));
    if (target.is_number()) {
      const int64_t i = target.AsInt();
      return Value::Int(i < 0 ? CheckedNeg(i) : i);
    }
    ValueFail("bad operand type for abs(): '", TypeName(target), "'");
  }
  if (name == "round") {
    const Value precision = Arg(args, 0, "precision", Value::Int(0));
    const Value method = Arg(args, 1, "method", Value::String("common"));
    return RoundValue(target, precision.integer, method.text);
  }
  if (name == "list") return Value::List(AsSequence(target, name));
  if (name == "first" || name == "last") {
    if (target.is_list()) {
      if (target.list->empty()) return Value::Undefined(std::string(name));
      return name == "first" ? target.list->front() : target.list->back();
    }
    ValueList items = AsSequence(target, name);
    if (items.empty()) return Value::Undefined(std::string(name));
    return name == "first" ? items.front() : items.back();
  }
  if (name == "reverse") {
    if (target.is_string()) {
      std::vector<std::string_view> chars = CodePoints(target.text);
      std::string out;
      for (size_t i = chars.size(); i-- > 0;) out += chars[i];
      return Value::String(std::move(out));
    }
    ValueList items = AsSequence(target, name);
    std::reverse(items.begin(), items.end());
    return Value::List(std::move(items));
  }
  if (name == "join") {
    static const Value kEmpty = Value::String("");
    std::string sep = ToStr(Arg(args, 0, "d", kEmpty));
    const Value* attribute = args.Get(1, "attribute");
    std::string out;
    bool first = true;
    for (const Value& item : AsSequence(target, name)) {
      if (!first) out += sep;
      first = false;
      out += ToStr(attribute ? AttributeOf(item, ToStr(*attribute)) : item);
      if (out.size() > max_bytes) ValueFail("join: result longer than ", max_bytes, " bytes");
    }
    return Value::String(std::move(out));
  }
  if (name == "unique") {
    bool case_sensitive = ArgBool(args, 0, "case_sensitive", false);
    const Value* attribute = args.Get(1, "attribute");
    ValueList out, seen;
    for (const Value& item : AsSequence(target, name)) {
      Value key = SortKey(attribute ? AttributeOf(item, ToStr(*attribute)) : item, case_sensitive);
      bool dup =
          std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return Equals(s, key); });
      if (dup) continue;
      seen.push_back(std::move(key));
      out.push_back(item);
    }
    return Value::List(std::move(out));
  }
  if (name == "items") {
    if (target.is_undefined()) return Value::List();
    if (!target.is_dict()) ValueFail("items: can only get item pairs from a mapping");
    ValueList out;
    for (const auto& [k, v] : target.dict->items)
      out.push_back(Value::Tuple({ValueDict::KeyValue(k), v}));
    return Value::List(std::move(out));
  }
  if (name == "dictsort") {
    if (!target.is_dict()) ValueFail("dictsort: needs a mapping, got ", TypeName(target));
    bool case_sensitive = ArgBool(args, 0, "case_sensitive", false);
    const Value by = Arg(args, 1, "by", Value::String("key"));
    bool reverse = ArgBool(args, 2, "reverse", false);
    size_t index = by.text == "value" ? 1 : 0;
    ValueList pairs;
    for (const auto& [k, v] : target.dict->items)
      pairs.push_back(Value::Tuple({ValueDict::KeyValue(k), v}));
    std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& a, const Value& b) {
      Value ka = SortKey((*a.list)[index], case_sensitive);
      Value kb = SortKey((*b.list)[index], case_sensitive);
      return reverse ? Compare(kb, ka, nullptr) < 0 : Compare(ka, kb, nullptr) < 0;
    });
    return Value::List(std::move(pairs));
  }
  if (name == "sort") {
    bool reverse = ArgBool(args, 0, "reverse", false);
    bool case_sensitive = ArgBool(args, 1, "case_sensitive", false);
    const Value* attribute = args.Get(2, "attribute");
    std::string attr = attribute ? ToStr(*attribute) : "";
    ValueList items = AsSequence(target, name);
    SortValues(items, case_sensitive, attribute ? &attr : nullptr, reverse);
    return Value::List(std::move(items));
  }
  if (name == "min" || name == "max") {
    bool case_sensitive = ArgBool(args, 0, "case_sensitive", false);
    const Value* attribute = args.Get(1, "attribute");
    std::string attr = attribute ? ToStr(*attribute) : "";
    ValueList items = AsSequence(target, name);
    if (items.empty()) return Value::Undefined(std::string(name));
    SortValues(items, case_sensitive, attribute ? &attr : nullptr, name == "max");
    return items.front();
  }
  if (name == "sum") {
    const Value* attribute = args.Get(0, "attribute");
    Value total = Arg(args, 1, "start", Value::Int(0));
    for (const Value& item : AsSequence(target, name)) {
      Value v = attribute ? AttributeOf(item, ToStr(*attribute)) : item;
      if (!v.is_number() || !total.is_number()) ValueFail("sum: cannot add ", TypeName(v));
      if (v.kind == Value::Kind::kFloat || total.kind == Value::Kind::kFloat) {
        total = Value::Float(total.AsDouble() + v.AsDouble());
      } else {
        total = Value::Int(CheckedAdd(total.AsInt(), v.AsInt()));
      }
    }
    return total;
  }
  if (name == "map") {
    ValueList out;
    const Value* attribute = nullptr;
    for (const auto& [k, v] : args.keywords) {
      if (k == "attribute") attribute = &v;
    }
    if (attribute != nullptr) {
      const Value* fallback = nullptr;
      for (const auto& [k, v] : args.keywords) {
        if (k == "default") fallback = &v;
      }
      for (const Value& item : LazySequence(target, name)) {
        Value v = AttributeOf(item, ToStr(*attribute));
        out.push_back(v.is_undefined() && fallback ? *fallback : v);
      }
      return Generator(std::move(out));
    }
    if (args.positional.empty() || !args.positional[0].is_string()) {
      ValueFail("map: needs a filter name or attribute=");
    }
    CallArgs filter_args;
    filter_args.positional.assign(args.positional.begin() + 1, args.positional.end());
    filter_args.keywords = args.keywords;
    for (const Value& item : LazySequence(target, name)) {
      out.push_back(ApplyFilter(args.positional[0].text, item, filter_args, max_bytes));
    }
    return Generator(std::move(out));
  }
  if (name == "selectattr" || name == "rejectattr") {
    if (args.positional.empty()) ValueFail(name, ": needs an attribute name");
    std::string attribute = ToStr(args.positional[0]);
    return Generator(
        FilterByTest(LazySequence(target, name), args, 1, &attribute, name == "selectattr"));
  }
  if (name == "select" || name == "reject") {
    return Generator(FilterByTest(LazySequence(target, name), args, 0, nullptr, name == "select"));
  }
  if (name == "attr") {
    const Value* key = args.Get(0, "name");
    if (key == nullptr) ValueFail("attr: needs a name");
    return AttributeOf(target, ToStr(*key));
  }
  if (name == "tojson") {
    const Value indent = Arg(args, 1, "indent", kNoneValue);
    const Value separators = Arg(args, 2, "separators", kNoneValue);
    bool sort_keys = ArgBool(args, 3, "sort_keys", false);
    bool ensure_ascii = ArgBool(args, 0, "ensure_ascii", false);
    if (!indent.is_none() && !indent.is_undefined() &&
        static_cast<uint64_t>(std::max<int64_t>(0, indent.integer)) > max_bytes) {
      ValueFail("tojson: indent ", indent.integer, " is longer than ", max_bytes, " bytes");
    }
    int indent_n =
        indent.is_none() || indent.is_undefined() ? -1 : static_cast<int>(indent.integer);
    std::string item_sep = indent_n < 0 ? ", " : ",", key_sep = ": ";
    if (separators.is_list() && separators.list->size() == 2) {
      item_sep = ToStr((*separators.list)[0]);
      key_sep = ToStr((*separators.list)[1]);
    }
    if (sort_keys) ValueFail("tojson: unsupported sort_keys=true");
    std::string json = DumpJson(target, indent_n, item_sep, key_sep);
    return Value::String(ensure_ascii ? EscapeNonAscii(json) : json);
  }
  if (name == "indent") {
    const Value width = Arg(args, 0, "width", Value::Int(4));
    bool first = ArgBool(args, 1, "first", false);
    bool blank = ArgBool(args, 2, "blank", false);
    std::string text = ToStr(target);
    size_t lines = static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) + 1;
    // Divided, not multiplied: lines times a huge width wraps around to a small product.
    if (width.is_number() &&
        static_cast<uint64_t>(std::max<int64_t>(0, width.integer)) > max_bytes / lines) {
      ValueFail("indent: result longer than ", max_bytes, " bytes");
    }
    return Value::String(Indent(text, width, first, blank));
  }
  if (name == "replace") {
    const Value* old = args.Get(0, "old");
    const Value* with = args.Get(1, "new");
    if (old == nullptr || with == nullptr) ValueFail("replace: needs old and new");
    const Value count = Arg(args, 2, "count", kNoneValue);
    std::string out =
        PyReplace(ToStr(target), ToStr(*old), ToStr(*with), count.is_none() ? -1 : count.integer);
    if (out.size() > max_bytes) ValueFail("replace: result longer than ", max_bytes, " bytes");
    return Value::String(std::move(out));
  }
  if (name == "format") {
    if (!args.keywords.empty()) ValueFail("format: unsupported keyword arguments");
    return Value::String(PercentFormat(ToStr(target), args.positional));
  }
  if (name == "wordcount") {
    CallArgs none;
    Value words = CallMethod(Value::String(ToStr(target)), "split", none);
    return Value::Int(static_cast<int64_t>(words.list->size()));
  }
  ValueFail("unsupported filter '", name, "'");
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
