// Values from JSON (the messages and tools a request carries) and to JSON (the tojson filter,
// as Python's json.dumps writes it).
#include "jinja/jinja_json.h"

#include <cmath>
#include <cstdio>

#include "base/bounded_json.h"
#include "base/error.h"
#include "jinja/jinja_budget.h"
#include "jinja/jinja_walk.h"

namespace grove::jinja {

namespace {

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

// json.dumps's layout: indent < 0 is one line (indent=None), else a newline and indent spaces a
// level before each item.
struct JsonLayout {
  int indent;
  std::string_view item_sep;
  std::string_view key_sep;

  void Newline(std::string& out, int level) const {
    if (indent < 0) return;
    const size_t spaces = static_cast<size_t>(indent) * static_cast<size_t>(level);
    CheckStringRoom(out.size() + spaces, "tojson");
    out += '\n';
    out.append(spaces, ' ');
  }
};

void DumpJsonTo(std::string& out, const Value& v, const JsonLayout& layout, int level);

void DumpJsonNumber(std::string& out, double number) {
  if (std::isnan(number)) {
    out += "NaN";
  } else if (std::isinf(number)) {
    out += number < 0 ? "-Infinity" : "Infinity";
  } else {
    out += FloatRepr(number);
  }
}

void DumpJsonList(std::string& out, const Value& v, const JsonLayout& layout, int level) {
  if (v.generator) ValueFail("Object of type generator is not JSON serializable");
  if (v.list->empty()) {
    out += "[]";
    return;
  }
  out += '[';
  for (size_t i = 0; i < v.list->size(); ++i) {
    if (i > 0) out += layout.item_sep;
    layout.Newline(out, level + 1);
    DumpJsonTo(out, (*v.list)[i], layout, level + 1);
    // Values can share items (`[x, x]` nested 40 deep): the text can outgrow any value.
    CheckStringRoom(out.size(), "tojson");
  }
  layout.Newline(out, level);
  out += ']';
}

void DumpJsonDict(std::string& out, const ValueDict& dict, const JsonLayout& layout, int level) {
  if (dict.items.empty()) {
    out += "{}";
    return;
  }
  out += '{';
  bool first = true;
  for (const auto& [k, item] : dict.items) {
    if (!first) out += layout.item_sep;
    first = false;
    layout.Newline(out, level + 1);
    AppendJsonString(out, ToStr(ValueDict::KeyValue(k)));
    out += layout.key_sep;
    DumpJsonTo(out, item, layout, level + 1);
    CheckStringRoom(out.size(), "tojson");
  }
  layout.Newline(out, level);
  out += '}';
}

void DumpJsonTo(std::string& out, const Value& v, const JsonLayout& layout, int level) {
  const WalkLevel walk("tojson", v);
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
      DumpJsonNumber(out, v.number);
      return;
    case Value::Kind::kString:
      AppendJsonString(out, v.text);
      return;
    case Value::Kind::kList:
      DumpJsonList(out, v, layout, level);
      return;
    case Value::Kind::kDict:
      DumpJsonDict(out, *v.dict, layout, level);
      return;
    case Value::Kind::kUndefined:
    case Value::Kind::kFunction:
      ValueFail("object of type ", TypeName(v), " is not JSON serializable");
  }
}

Value FromJsonAt(const nlohmann::ordered_json& j, int depth) {
  if ((j.is_array() || j.is_object()) && depth >= kMaxJsonDepth) {
    Fail("a JSON value nested deeper than ", kMaxJsonDepth, " levels");
  }
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
      for (const auto& item : j) items.push_back(FromJsonAt(item, depth + 1));
      return Value::List(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Value d = Value::Dict();
      for (const auto& [k, item] : j.items())
        d.dict->items.emplace_back(ValueDict::StringKey(k), FromJsonAt(item, depth + 1));
      return d;
    }
    case nlohmann::ordered_json::value_t::binary:
      ValueFail("binary JSON values are not supported");
  }
  return Value::None();
}

}  // namespace

Value FromJson(const nlohmann::ordered_json& j) { return FromJsonAt(j, 0); }

std::string DumpJson(const Value& v, int indent, std::string_view item_sep,
                     std::string_view key_sep) {
  std::string out;
  DumpJsonTo(out, v, JsonLayout{indent, item_sep, key_sep}, 0);
  return out;
}

}  // namespace grove::jinja
