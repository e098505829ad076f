// The values a chat template computes with, and the Python semantics they follow.
//
// Hugging Face renders chat templates with Python's Jinja2, so a byte-exact prompt needs Python's
// rules: dicts keep insertion order, `{{ 1.0 }}` prints "1.0", None/True/False print capitalised,
// 1 == 1.0 == True, strings index and slice by code point, lists print as their repr
// (`['a', 1]`). An undefined name is a value too (Jinja2's Undefined): it prints as "", iterates
// as empty and is falsy, but using it in arithmetic or reading its attributes fails.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace grove::jinja {

struct Value;
struct CallArgs;

// A failure inside a value operation (a filter, a method, arithmetic); the renderer turns it into
// grove::Error naming the template line. `raised` marks the template's own raise_exception.
class ValueError : public std::runtime_error {
 public:
  explicit ValueError(const std::string& what, bool raised = false)
      : std::runtime_error(what), raised(raised) {}
  bool raised;
};

template <typename... Args>
[[noreturn]] void ValueFail(Args&&... args) {
  std::ostringstream out;
  (out << ... << std::forward<Args>(args));
  throw ValueError(out.str());
}
using ValueList = std::vector<Value>;
using Function = std::function<Value(CallArgs&)>;

// A dict: insertion-ordered (Python 3.7+), string keys only (JSON's and the templates' own).
struct ValueDict {
  std::vector<std::pair<std::string, Value>> items;
  bool is_namespace = false;  // `namespace(...)`: the one object `set ns.x = ...` may change

  // `key` is a stored key: a name (an identifier, stored as written), StringKey's or EncodeKey's.
  const Value* Find(std::string_view key) const;
  // Keys that are not strings (`{512: 128}`) are stored as '\x02' and their digits; a string
  // that starts with '\x01' or '\x02' (only data can: a JSON key, a template's literal) is
  // stored behind a '\x01', so that no string reads back as an integer. KeyValue gives the key
  // back as it was.
  static std::string StringKey(std::string_view text);
  static std::string EncodeKey(const Value& key);
  static Value KeyValue(const std::string& stored);
  void Set(std::string key, Value value);
};

struct Value {
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kFunction };

  Kind kind = Kind::kUndefined;
  bool boolean = false;
  int64_t integer = 0;
  double number = 0;
  std::string text;  // kString's value; kUndefined: the name that was not defined (for errors)
  std::shared_ptr<ValueList> list;
  std::shared_ptr<ValueDict> dict;
  std::shared_ptr<Function> function;
  // A list that Jinja2 would hand over as a generator (the result of map, select, selectattr...):
  // it iterates the same, but has no length and is not JSON.
  bool generator = false;
  // A string marked safe (`|safe`, `|escape`): Python's markupsafe.Markup, which HTML-escapes
  // plain strings added to it (`"x"|safe + "<"` is "x&lt;").
  bool markup = false;
  // A list that Python holds as a tuple (`(1, 2)`, the pairs of items()): printed with parentheses.
  bool tuple = false;

  static Value Undefined(std::string name = {});
  static Value None();
  static Value Bool(bool b);
  static Value Int(int64_t i);
  static Value Float(double f);
  static Value String(std::string s);
  static Value List(ValueList items = {});
  static Value Tuple(ValueList items);
  static Value Dict();
  static Value Func(Function f);

  bool is_undefined() const { return kind == Kind::kUndefined; }
  bool is_none() const { return kind == Kind::kNone; }
  bool is_string() const { return kind == Kind::kString; }
  bool is_list() const { return kind == Kind::kList; }
  bool is_dict() const { return kind == Kind::kDict; }
  bool is_number() const {
    return kind == Kind::kInt || kind == Kind::kFloat || kind == Kind::kBool;
  }
  double AsDouble() const;
  // An int's value, or a bool's 0/1 (Python's bool is an int); only for those two kinds.
  int64_t AsInt() const { return kind == Kind::kBool ? boolean : integer; }
};

// The arguments of a call: positional, then keyword in the order written.
struct CallArgs {
  ValueList positional;
  std::vector<std::pair<std::string, Value>> keywords;
  int line = 0;

  // The argument at `index` or named `name` (consumed neither way); Undefined when absent.
  const Value* Get(size_t index, std::string_view name) const;
};

// Python's truth value.
bool Truthy(const Value& v);
// Python's str(v) (Jinja2's output conversion): "None", "True", "1.0", "['a', 1]".
std::string ToStr(const Value& v);
// Python's repr(v): strings quoted as Python quotes them.
std::string Repr(const Value& v);
// Python's float repr: the shortest text that reads back to the same double.
std::string FloatRepr(double f);
// A short type name for errors ("string", "list", "dict object"...).
std::string_view TypeName(const Value& v);

// The bytes a list or dict holds itself: its items and the text of the strings among them (a list
// or dict among them is shared, not copied, when the list is copied). 0 for other values.
size_t HeldBytes(const Value& v);

// What iterating v gives, as a for loop or a filter iterates: a list's items, a dict's keys, a
// string's characters, nothing for undefined. False for a value that is not iterable.
bool IterationItems(const Value& v, ValueList* out);

// Python's ==.
bool Equals(const Value& a, const Value& b);
// Python's <, <=... for numbers and strings; an error (ValueError) for other pairs
// unless `ok` is given, in which case *ok is set false.
int Compare(const Value& a, const Value& b, bool* ok);

// UTF-8 helpers: strings index, slice and count by code point, as Python's str does.
std::vector<std::string_view> CodePoints(std::string_view s);
// The bytes of the code point at byte i < s.size() (1 for a byte that starts none), and how many
// code points s has: as CodePoints counts them, without a view per code point.
size_t CodePointBytes(std::string_view s, size_t i);
size_t CountCodePoints(std::string_view s);
bool IsValidUtf8(std::string_view s);

}  // namespace grove::jinja
