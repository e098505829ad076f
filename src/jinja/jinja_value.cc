#include "jinja/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <vector>

#include "base/error.h"

namespace grove::jinja {

const Value* ValueDict::Find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

void ValueDict::Set(std::string key, Value value) {
  for (auto& [k, v] : items) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

namespace {
constexpr char kEscapedStringKey = '\x01';
constexpr char kIntKey = '\x02';
}  // namespace

std::string ValueDict::StringKey(std::string_view text) {
  if (!text.empty() && (text[0] == kEscapedStringKey || text[0] == kIntKey)) {
    return StrCat(std::string_view(&kEscapedStringKey, 1), text);
  }
  return std::string(text);
}

std::string ValueDict::EncodeKey(const Value& key) {
  if (key.is_string()) return StringKey(key.text);
  if (key.kind == Value::Kind::kInt) return kIntKey + std::to_string(key.integer);
  if (key.kind == Value::Kind::kBool) return kIntKey + std::to_string(key.boolean ? 1 : 0);
  ValueFail("unsupported dict key of type '", TypeName(key), "'");
}

Value ValueDict::KeyValue(const std::string& stored) {
  if (!stored.empty() && stored[0] == kIntKey) {
    int64_t i = 0;
    const auto res = std::from_chars(stored.data() + 1, stored.data() + stored.size(), i);
    GROVE_CHECK(res.ec == std::errc() && res.ptr == stored.data() + stored.size(),
                "jinja: a dict key stored as an integer does not read back");
    return Value::Int(i);
  }
  if (!stored.empty() && stored[0] == kEscapedStringKey) return Value::String(stored.substr(1));
  return Value::String(stored);
}

Value Value::Undefined(std::string name) {
  Value v;
  v.text = std::move(name);
  return v;
}
Value Value::None() {
  Value v;
  v.kind = Kind::kNone;
  return v;
}
Value Value::Bool(bool b) {
  Value v;
  v.kind = Kind::kBool;
  v.boolean = b;
  return v;
}
Value Value::Int(int64_t i) {
  Value v;
  v.kind = Kind::kInt;
  v.integer = i;
  return v;
}
Value Value::Float(double f) {
  Value v;
  v.kind = Kind::kFloat;
  v.number = f;
  return v;
}
Value Value::String(std::string s) {
  Value v;
  v.kind = Kind::kString;
  v.text = std::move(s);
  return v;
}
Value Value::List(ValueList items) {
  Value v;
  v.kind = Kind::kList;
  v.list = std::make_shared<ValueList>(std::move(items));
  return v;
}
Value Value::Tuple(ValueList items) {
  Value v = List(std::move(items));
  v.tuple = true;
  return v;
}
Value Value::Dict() {
  Value v;
  v.kind = Kind::kDict;
  v.dict = std::make_shared<ValueDict>();
  return v;
}
Value Value::Func(Function f) {
  Value v;
  v.kind = Kind::kFunction;
  v.function = std::make_shared<Function>(std::move(f));
  return v;
}

double Value::AsDouble() const {
  switch (kind) {
    case Kind::kBool:
      return boolean ? 1 : 0;
    case Kind::kInt:
      return static_cast<double>(integer);
    case Kind::kFloat:
      return number;
    default:
      return 0;
  }
}

const Value* CallArgs::Get(size_t index, std::string_view name) const {
  for (const auto& [k, v] : keywords) {
    if (k == name) return &v;
  }
  return index < positional.size() ? &positional[index] : nullptr;
}

bool Truthy(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return false;
    case Value::Kind::kBool:
      return v.boolean;
    case Value::Kind::kInt:
      return v.integer != 0;
    case Value::Kind::kFloat:
      return v.number != 0;
    case Value::Kind::kString:
      return !v.text.empty();
    case Value::Kind::kList:
      return v.generator || !v.list->empty();
    case Value::Kind::kDict:
      return v.dict->is_namespace || !v.dict->items.empty();
    case Value::Kind::kFunction:
      return true;
  }
  return false;
}

std::string FloatRepr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f < 0 ? "-inf" : "inf";
  // The shortest round-trip digits, then Python's layout: positional for exponents -5 < e < 16.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, f, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  size_t e_pos = sci.find('e');
  int exponent = std::stoi(sci.substr(e_pos + 1));
  std::string mantissa = sci.substr(0, e_pos);
  bool negative = mantissa[0] == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits += c;
  }
  std::string out = negative ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out.append(".").append(digits, 1);
    char exp_buf[16];
    std::snprintf(exp_buf, sizeof exp_buf, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return out + exp_buf;
  }
  if (exponent < 0) {
    return out + "0." + std::string(-exponent - 1, '0') + digits;
  }
  size_t int_len = static_cast<size_t>(exponent) + 1;
  if (digits.size() <= int_len) {
    return out + digits + std::string(int_len - digits.size(), '0') + ".0";
  }
  return out + digits.substr(0, int_len) + "." + digits.substr(int_len);
}

namespace {

std::string ReprString(std::string_view s) {
  bool has_single = s.find('\'') != std::string_view::npos;
  bool has_double = s.find('"') != std::string_view::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '\\') {
      out += "\\\\";
    } else if (c == static_cast<unsigned char>(quote)) {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else if (c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(s[i + 1]) <= 0xa0) {
      // U+0080..U+00A0 are not printable: Python writes them as \x escapes.
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(s[i + 1]));
      out += buf;
      ++i;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += quote;
  return out;
}

void AppendJsonString(std::string& out, std::string_view s) {
  out += '"';
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

// Walks of a value into its items (repr, tojson, ==, <) recurse: one nested deeper than
// kMaxNesting, or one that contains itself (a list appended to itself, a namespace set as its own
// attribute), fails with a ValueError instead of overflowing the stack. Python raises
// RecursionError a little beyond its limit of 1000 frames.
constexpr int kMaxNesting = 256;

// One level of such a walk, for as long as it lasts: the values the walks under way on this thread
// are inside of, innermost last (their list or dict, null for others), so that the depth is the
// stack's size and Repr can tell a container it is already inside of (Python prints it as "[...]",
// "{...}").
class WalkLevel {
 public:
  WalkLevel(std::string_view what, const Value& v) {
    if (open_.size() >= kMaxNesting) {
      ValueFail(what, ": a value nested more than ", kMaxNesting,
                " deep (or one that contains itself)");
    }
    const void* items = v.kind == Value::Kind::kList   ? static_cast<const void*>(v.list.get())
                        : v.kind == Value::Kind::kDict ? static_cast<const void*>(v.dict.get())
                                                       : nullptr;
    reentered_ = items != nullptr && std::find(open_.begin(), open_.end(), items) != open_.end();
    open_.push_back(items);
  }
  WalkLevel(const WalkLevel&) = delete;
  WalkLevel& operator=(const WalkLevel&) = delete;
  ~WalkLevel() { open_.pop_back(); }

  // The value is a list or dict that an outer level of the walk is inside of already.
  bool reentered() const { return reentered_; }

 private:
  static thread_local std::vector<const void*> open_;
  bool reentered_ = false;
};

thread_local std::vector<const void*> WalkLevel::open_;

void DumpJsonTo(std::string& out, const Value& v, int indent, int level, std::string_view item_sep,
                std::string_view key_sep) {
  const WalkLevel walk("tojson", v);
  auto newline = [&](int at) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(indent) * static_cast<size_t>(at), ' ');
  };
  switch (v.kind) {
    case Value::Kind::kNone:
      out += "null";
      return;
    case Value::Kind::kBool:
      out += v.boolean ? "true" : "false";
      return;
    case Value::Kind::kInt:
      out += std::to_string(v.integer);
      return;
    case Value::Kind::kFloat:
      if (std::isnan(v.number)) {
        out += "NaN";
      } else if (std::isinf(v.number)) {
        out += v.number < 0 ? "-Infinity" : "Infinity";
      } else {
        out += FloatRepr(v.number);
      }
      return;
    case Value::Kind::kString:
      AppendJsonString(out, v.text);
      return;
    case Value::Kind::kList: {
      if (v.generator) ValueFail("Object of type generator is not JSON serializable");
      if (v.list->empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < v.list->size(); ++i) {
        if (i > 0) out += item_sep;
        newline(level + 1);
        DumpJsonTo(out, (*v.list)[i], indent, level + 1, item_sep, key_sep);
      }
      newline(level);
      out += ']';
      return;
    }
    case Value::Kind::kDict: {
      if (v.dict->items.empty()) {
        out += "{}";
        return;
      }
      out += '{';
      bool first = true;
      for (const auto& [k, item] : v.dict->items) {
        if (!first) out += item_sep;
        first = false;
        newline(level + 1);
        AppendJsonString(out, ToStr(ValueDict::KeyValue(k)));
        out += key_sep;
        DumpJsonTo(out, item, indent, level + 1, item_sep, key_sep);
      }
      newline(level);
      out += '}';
      return;
    }
    case Value::Kind::kUndefined:
    case Value::Kind::kFunction:
      ValueFail("object of type ", TypeName(v), " is not JSON serializable");
  }
}

}  // namespace

std::string Repr(const Value& v) {
  const WalkLevel walk("repr", v);
  if (walk.reentered()) {
    if (v.kind == Value::Kind::kList) return v.tuple ? "(...)" : "[...]";
    return v.dict->is_namespace ? "<Namespace {...}>" : "{...}";
  }
  switch (v.kind) {
    case Value::Kind::kString:
      return ReprString(v.text);
    case Value::Kind::kList: {
      if (v.generator) return "<generator object>";
      std::string out = v.tuple ? "(" : "[";
      for (size_t i = 0; i < v.list->size(); ++i) {
        if (i > 0) out += ", ";
        out += Repr((*v.list)[i]);
      }
      if (v.tuple && v.list->size() == 1) out += ",";
      return out + (v.tuple ? ")" : "]");
    }
    case Value::Kind::kDict: {
      std::string out = v.dict->is_namespace ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [k, item] : v.dict->items) {
        if (!first) out += ", ";
        first = false;
        out += Repr(ValueDict::KeyValue(k)) + ": " + Repr(item);
      }
      return out + (v.dict->is_namespace ? "}>" : "}");
    }
    default:
      return ToStr(v);
  }
}

std::string ToStr(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined:
      return "";
    case Value::Kind::kNone:
      return "None";
    case Value::Kind::kBool:
      return v.boolean ? "True" : "False";
    case Value::Kind::kInt:
      return std::to_string(v.integer);
    case Value::Kind::kFloat:
      return FloatRepr(v.number);
    case Value::Kind::kString:
      return v.text;
    case Value::Kind::kFunction:
      return "<function>";
    case Value::Kind::kList:
    case Value::Kind::kDict:
      return Repr(v);
  }
  return "";
}

std::string_view TypeName(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined:
      return "Undefined";
    case Value::Kind::kNone:
      return "NoneType";
    case Value::Kind::kBool:
      return "bool";
    case Value::Kind::kInt:
      return "int";
    case Value::Kind::kFloat:
      return "float";
    case Value::Kind::kString:
      return "str";
    case Value::Kind::kList:
      return "list";
    case Value::Kind::kDict:
      return "dict";
    case Value::Kind::kFunction:
      return "function";
  }
  return "?";
}

bool Equals(const Value& a, const Value& b) {
  const WalkLevel walk("==", a);
  if (a.is_number() && b.is_number()) {
    if (a.kind == Value::Kind::kFloat || b.kind == Value::Kind::kFloat) {
      return a.AsDouble() == b.AsDouble();
    }
    int64_t x = a.kind == Value::Kind::kBool ? a.boolean : a.integer;
    int64_t y = b.kind == Value::Kind::kBool ? b.boolean : b.integer;
    return x == y;
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.text == b.text;
    case Value::Kind::kList:
      if (a.list == b.list) return true;  // as Python compares an item with itself: by identity
      if (a.list->size() != b.list->size()) return false;
      for (size_t i = 0; i < a.list->size(); ++i) {
        if (!Equals((*a.list)[i], (*b.list)[i])) return false;
      }
      return true;
    case Value::Kind::kDict:
      if (a.dict == b.dict) return true;
      if (a.dict->is_namespace || b.dict->is_namespace) return false;
      if (a.dict->items.size() != b.dict->items.size()) return false;
      for (const auto& [k, item] : a.dict->items) {
        const Value* other = b.dict->Find(k);
        if (other == nullptr || !Equals(item, *other)) return false;
      }
      return true;
    case Value::Kind::kFunction:
      return a.function == b.function;
    default:
      return false;
  }
}

int Compare(const Value& a, const Value& b, bool* ok) {
  const WalkLevel walk("<", a);
  if (ok != nullptr) *ok = true;
  if (a.is_number() && b.is_number()) {
    if (a.kind != Value::Kind::kFloat && b.kind != Value::Kind::kFloat) {
      int64_t x = a.kind == Value::Kind::kBool ? a.boolean : a.integer;
      int64_t y = b.kind == Value::Kind::kBool ? b.boolean : b.integer;
      return x < y ? -1 : x > y ? 1 : 0;
    }
    double x = a.AsDouble(), y = b.AsDouble();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    int c = a.text.compare(b.text);  // UTF-8 byte order is code point order
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.is_list() && b.is_list()) {
    size_t n = std::min(a.list->size(), b.list->size());
    for (size_t i = 0; i < n; ++i) {
      if (Equals((*a.list)[i], (*b.list)[i])) continue;
      return Compare((*a.list)[i], (*b.list)[i], ok);
    }
    return a.list->size() < b.list->size() ? -1 : a.list->size() > b.list->size() ? 1 : 0;
  }
  if (ok != nullptr) {
    *ok = false;
    return 0;
  }
  ValueFail("'<' not supported between instances of '", TypeName(a), "' and '", TypeName(b), "'");
}

Value FromJson(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
    case nlohmann::ordered_json::value_t::discarded:
      return Value::None();
    case nlohmann::ordered_json::value_t::boolean:
      return Value::Bool(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value::Int(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      if (u <= static_cast<uint64_t>(INT64_MAX)) return Value::Int(static_cast<int64_t>(u));
      return Value::Float(static_cast<double>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Value::Float(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value::String(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      ValueList items;
      items.reserve(j.size());
      for (const auto& item : j) items.push_back(FromJson(item));
      return Value::List(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Value d = Value::Dict();
      for (const auto& [k, item] : j.items())
        d.dict->items.emplace_back(ValueDict::StringKey(k), FromJson(item));
      return d;
    }
    case nlohmann::ordered_json::value_t::binary:
      ValueFail("binary JSON values are not supported");
  }
  return Value::None();
}

std::string DumpJson(const Value& v, int indent, std::string_view item_sep,
                     std::string_view key_sep) {
  std::string out;
  DumpJsonTo(out, v, indent, 0, item_sep, key_sep);
  return out;
}

bool IterationItems(const Value& v, ValueList* out) {
  out->clear();
  switch (v.kind) {
    case Value::Kind::kUndefined:
      return true;
    case Value::Kind::kList:
      *out = *v.list;
      return true;
    case Value::Kind::kDict:
      for (const auto& [k, item] : v.dict->items) out->push_back(ValueDict::KeyValue(k));
      return true;
    case Value::Kind::kString:
      for (std::string_view c : CodePoints(v.text)) out->push_back(Value::String(std::string(c)));
      return true;
    default:
      return false;
  }
}

std::vector<std::string_view> CodePoints(std::string_view s) {
  std::vector<std::string_view> out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80           ? 1
                 : (c >> 5) == 0x6  ? 2
                 : (c >> 4) == 0xe  ? 3
                 : (c >> 3) == 0x1e ? 4
                                    : 1;
    if (i + len > s.size()) len = 1;
    out.push_back(s.substr(i, len));
    i += len;
  }
  return out;
}

bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c >> 5) == 0x6) {
      len = 2;
      cp = c & 0x1f;
    } else if ((c >> 4) == 0xe) {
      len = 3;
      cp = c & 0x0f;
    } else if ((c >> 3) == 0x1e) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc >> 6) != 0x2) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8.
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) {
      return false;
    }
    i += len;
  }
  return true;
}

}  // namespace grove::jinja
