// Python's operators on template values, as Jinja2 applies them (the renderer evaluates the
// operands; these combine them): attribute, item and slice reads, arithmetic, comparison,
// membership, concatenation and repetition.
#include "jinja/jinja_operators.h"

#include <algorithm>
#include <cmath>

#include "jinja/jinja_budget.h"
#include "jinja/jinja_builtins.h"
#include "jinja/jinja_int.h"

namespace grove::jinja {

namespace {

// Python's slice of a sequence of length n: the first index, the bound and the step.
struct SliceBounds {
  int64_t start, stop, step;
};

SliceBounds BoundsOf(int64_t n, const Value& start_v, const Value& stop_v, const Value& step_v) {
  auto get = [](const Value& v, int64_t fallback) {
    if (v.is_undefined() || v.is_none()) return fallback;
    if (!IsIntLike(v)) ValueFail("slice indices must be integers or None");
    return v.AsInt();
  };
  int64_t step = get(step_v, 1);
  if (step == 0) ValueFail("slice step cannot be zero");
  int64_t lower = step < 0 ? -1 : 0;
  int64_t upper = step < 0 ? n - 1 : n;
  auto clamp = [&](int64_t i) {
    if (i < 0) {
      i += n;
      return i < lower ? lower : i;
    }
    return i > upper ? upper : i;
  };
  int64_t start = start_v.is_undefined() || start_v.is_none() ? (step < 0 ? upper : lower)
                                                              : clamp(get(start_v, 0));
  int64_t stop = stop_v.is_undefined() || stop_v.is_none() ? (step < 0 ? lower : upper)
                                                           : clamp(get(stop_v, 0));
  return {start, stop, step};
}

// Python's slice indices for a sequence of length n.
std::vector<size_t> SliceIndices(int64_t n, const Value& start_v, const Value& stop_v,
                                 const Value& step_v) {
  const SliceBounds b = BoundsOf(n, start_v, stop_v, step_v);
  // Counted, not stepped until past stop: start + step can overflow (`xs[4::2**63-1]`).
  std::vector<size_t> out(RangeLength(b.start, b.stop, b.step));
  for (size_t k = 0; k < out.size(); ++k) {
    out[k] = static_cast<size_t>(RangeItem(b.start, b.step, k));
  }
  return out;
}

// A string's code points [start, stop) (step 1, the common `text[:n]`): found by walking the bytes,
// without a view per code point.
std::string SliceText(std::string_view s, const Value& start_v, const Value& stop_v) {
  const SliceBounds b =
      BoundsOf(static_cast<int64_t>(CountCodePoints(s)), start_v, stop_v, Value::None());
  if (b.stop <= b.start) return "";
  size_t begin = 0;
  for (int64_t i = 0; i < b.start; ++i) begin += CodePointBytes(s, begin);
  size_t end = begin;
  for (int64_t i = b.start; i < b.stop; ++i) end += CodePointBytes(s, end);
  return std::string(s.substr(begin, end - begin));
}

Value Repeat(const Value& v, int64_t n, size_t max_bytes) {
  // In bytes for a list too: each copy of a string item copies its text.
  size_t unit = v.is_string() ? v.text.size() : HeldBytes(v);
  // Nothing to repeat, or repeated no times (an empty unit returns at once: `[] * 2**62` hung).
  if (n <= 0 || unit == 0) return v.is_string() ? Value::String("") : Value::List();
  if (static_cast<uint64_t>(n) > max_bytes / unit) {
    ValueFail("repetition: result longer than ", max_bytes, " bytes");
  }
  CheckRoom(static_cast<size_t>(n) * unit, "repetition");
  if (v.is_string()) {
    // Doubled, not appended n times: a short unit repeated millions of times is a few copies.
    const size_t total = static_cast<size_t>(n) * unit;
    std::string out;
    out.reserve(total);
    out = v.text;
    while (out.size() < total) out.append(out, 0, std::min(out.size(), total - out.size()));
    return Value::String(std::move(out));
  }
  ValueList out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), v.list->begin(), v.list->end());
  return Value::List(std::move(out));
}

Value Arithmetic(std::string_view op, const Value& a, const Value& b) {
  bool ints = IsIntLike(a) && IsIntLike(b);
  if (ints) {
    int64_t x = a.AsInt(), y = b.AsInt();
    if (op == "+") return Value::Int(CheckedAdd(x, y));
    if (op == "-") return Value::Int(CheckedSub(x, y));
    if (op == "*") return Value::Int(CheckedMul(x, y));
    if (op == "/") {
      if (y == 0) ValueFail("division by zero");
      return Value::Float(static_cast<double>(x) / static_cast<double>(y));
    }
    if (op == "//" || op == "%") {
      if (y == 0) ValueFail("integer division or modulo by zero");
      return Value::Int(op == "//" ? FloorDiv(x, y) : FloorMod(x, y));
    }
    if (op == "**") {
      if (y >= 0) return Value::Int(CheckedPow(x, y));
      return Value::Float(std::pow(static_cast<double>(x), static_cast<double>(y)));
    }
  }
  double x = a.AsDouble(), y = b.AsDouble();
  if (op == "+") return Value::Float(x + y);
  if (op == "-") return Value::Float(x - y);
  if (op == "*") return Value::Float(x * y);
  if (op == "/") {
    if (y == 0) ValueFail("float division by zero");
    return Value::Float(x / y);
  }
  if (op == "//") {
    if (y == 0) ValueFail("float floor division by zero");
    return Value::Float(std::floor(x / y));
  }
  if (op == "%") {
    if (y == 0) ValueFail("float modulo");
    double r = std::fmod(x, y);
    if (r != 0 && ((r < 0) != (y < 0))) r += y;
    return Value::Float(r);
  }
  if (op == "**") return Value::Float(std::pow(x, y));
  ValueFail("unsupported operator ", op);
}

bool Contains(const Value& container, const Value& item) {
  switch (container.kind) {
    case Value::Kind::kString:
      if (!item.is_string()) {
        ValueFail("'in <string>' requires string as left operand, not ", TypeName(item));
      }
      return container.text.find(item.text) != std::string::npos;
    case Value::Kind::kList:
      for (const Value& v : *container.list) {
        if (Equals(v, item)) return true;
      }
      return false;
    case Value::Kind::kDict:
      return (item.is_string() || IsIntLike(item)) &&
             container.dict->Find(ValueDict::EncodeKey(item)) != nullptr;
    case Value::Kind::kUndefined:
      return false;
    default:
      ValueFail("argument of type '", TypeName(container), "' is not iterable");
  }
}

// `a ~ b`: both printed, then joined.
Value Concatenate(const Value& a, const Value& b, size_t max_bytes) {
  std::string text = ToStr(a);
  const std::string right = ToStr(b);
  if (text.size() + right.size() > max_bytes) {
    ValueFail("~: result longer than ", max_bytes, " bytes");
  }
  CheckRoom(text.size() + right.size(), "~");
  text += right;
  return Value::String(std::move(text));
}

}  // namespace

bool IsIntLike(const Value& v) {
  return v.kind == Value::Kind::kInt || v.kind == Value::Kind::kBool;
}

Value GetAttr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) {
    ValueFail("'", obj.text.empty() ? "value" : obj.text, "' is undefined (reading '", name, "')");
  }
  if (obj.is_dict()) {
    if (const Value* v = obj.dict->Find(name)) return *v;
  }
  return Value::Undefined(name);
}

Value GetItem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) {
    ValueFail("'", obj.text.empty() ? "value" : obj.text, "' is undefined (reading [", Repr(key),
              "])");
  }
  if (obj.is_dict() && (key.is_string() || IsIntLike(key))) {
    if (const Value* v = obj.dict->Find(ValueDict::EncodeKey(key))) return *v;
    return Value::Undefined(key.is_string() ? key.text : "item");
  }
  if (obj.generator) ValueFail("'generator' object is not subscriptable");
  if ((obj.is_list() || obj.is_string()) && IsIntLike(key)) {
    int64_t i = key.AsInt();
    if (obj.is_list()) {
      int64_t n = static_cast<int64_t>(obj.list->size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::Undefined("item");
      return (*obj.list)[static_cast<size_t>(i)];
    }
    std::vector<std::string_view> chars = CodePoints(obj.text);
    int64_t n = static_cast<int64_t>(chars.size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value::Undefined("item");
    return Value::String(std::string(chars[static_cast<size_t>(i)]));
  }
  return Value::Undefined(key.is_string() ? key.text : "item");
}

Value Slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_list()) {
    ValueList out;
    for (size_t i : SliceIndices(static_cast<int64_t>(obj.list->size()), start, stop, step)) {
      out.push_back((*obj.list)[i]);
    }
    return Value::List(std::move(out));
  }
  if (obj.is_string()) {
    if (step.is_undefined() || step.is_none() || (IsIntLike(step) && step.AsInt() == 1)) {
      return Value::String(SliceText(obj.text, start, stop));
    }
    std::vector<std::string_view> chars = CodePoints(obj.text);
    std::string out;
    for (size_t i : SliceIndices(static_cast<int64_t>(chars.size()), start, stop, step)) {
      out += chars[i];
    }
    return Value::String(std::move(out));
  }
  if (obj.is_undefined()) ValueFail("'", obj.text, "' is undefined (slicing it)");
  ValueFail("'", TypeName(obj), "' object is not subscriptable");
}

Value BinaryOperation(std::string_view op, const Value& a, const Value& b, size_t max_bytes) {
  if (op == "~") return Concatenate(a, b, max_bytes);
  if (op == "==") return Value::Bool(Equals(a, b));
  if (op == "!=") return Value::Bool(!Equals(a, b));
  if (op == "<") return Value::Bool(Compare(a, b, nullptr) < 0);
  if (op == ">") return Value::Bool(Compare(a, b, nullptr) > 0);
  if (op == "<=") return Value::Bool(Compare(a, b, nullptr) <= 0);
  if (op == ">=") return Value::Bool(Compare(a, b, nullptr) >= 0);
  if (op == "in" || op == "not in") return Value::Bool(Contains(b, a) == (op == "in"));
  if (a.is_undefined() || b.is_undefined()) {
    const Value& u = a.is_undefined() ? a : b;
    ValueFail("'", u.text, "' is undefined (operator ", op, ")");
  }
  if (a.is_number() && b.is_number()) return Arithmetic(op, a, b);
  if (op == "+" && a.is_string() && b.is_string()) {
    if (a.text.size() + b.text.size() > max_bytes) {
      ValueFail("+: result longer than ", max_bytes, " bytes");
    }
    CheckRoom(a.text.size() + b.text.size(), "+");
    if (a.markup || b.markup) {  // Markup + str escapes the plain side
      Value sum = Value::String((a.markup ? a.text : HtmlEscape(a.text)) +
                                (b.markup ? b.text : HtmlEscape(b.text)));
      sum.markup = true;
      return sum;
    }
    return Value::String(a.text + b.text);
  }
  if (op == "+" && a.is_list() && b.is_list()) {
    CheckRoom(HeldBytes(a) + HeldBytes(b), "+");
    ValueList items = *a.list;
    items.insert(items.end(), b.list->begin(), b.list->end());
    return Value::List(std::move(items));
  }
  if (op == "*" && (a.is_string() || a.is_list()) && IsIntLike(b))
    return Repeat(a, b.AsInt(), max_bytes);
  if (op == "*" && (b.is_string() || b.is_list()) && IsIntLike(a))
    return Repeat(b, a.AsInt(), max_bytes);
  if (op == "%" && a.is_string()) {
    CallArgs args;
    if (b.is_list()) {
      args.positional = *b.list;
    } else {
      args.positional.push_back(b);
    }
    return ApplyFilter("format", a, args, max_bytes);
  }
  ValueFail("operator ", op, " cannot combine '", TypeName(a), "' and '", TypeName(b), "'");
}

Value UnaryOperation(std::string_view op, const Value& v) {
  if (op == "not") return Value::Bool(!Truthy(v));
  if (v.kind == Value::Kind::kFloat) return Value::Float(op == "-" ? -v.number : v.number);
  if (IsIntLike(v)) return Value::Int(op == "-" ? CheckedNeg(v.AsInt()) : v.AsInt());
  ValueFail("bad operand type for unary ", op, ": '", TypeName(v), "'");
}

}  // namespace grove::jinja
