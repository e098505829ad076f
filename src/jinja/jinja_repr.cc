// How Python prints values: str() (Jinja2's output conversion), repr() and the float repr.
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "jinja/jinja_budget.h"
#include "jinja/jinja_value.h"
#include "jinja/jinja_walk.h"

namespace grove::jinja {

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
        // Values can share items (`[x, x]` nested 40 deep): the text can outgrow any value.
        CheckStringRoom(out.size(), "repr");
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
        CheckStringRoom(out.size(), "repr");
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

}  // namespace grove::jinja
