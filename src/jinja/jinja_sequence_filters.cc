// Jinja2's filters over sequences (lists, dicts, strings as characters): ordering and
// deduplication case-insensitive by default, as Jinja2's are, and map, select and friends giving
// generators, as Jinja2's do.
#include <algorithm>
#include <charconv>

#include "base/named.h"
#include "jinja/jinja_budget.h"
#include "jinja/jinja_builtins.h"
#include "jinja/jinja_int.h"

namespace grove::jinja {

namespace {

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

Value FilterList(const FilterCall& c) { return Value::List(AsSequence(c.target, c.name)); }

Value FilterFirstOrLast(const FilterCall& c) {
  const bool first = c.name == "first";
  if (c.target.is_list()) {
    if (c.target.list->empty()) return Value::Undefined(std::string(c.name));
    return first ? c.target.list->front() : c.target.list->back();
  }
  ValueList items = AsSequence(c.target, c.name);
  if (items.empty()) return Value::Undefined(std::string(c.name));
  return first ? items.front() : items.back();
}

Value FilterReverse(const FilterCall& c) {
  if (c.target.is_string()) {
    std::vector<std::string_view> chars = CodePoints(c.target.text);
    std::string out;
    for (size_t i = chars.size(); i-- > 0;) out += chars[i];
    return Value::String(std::move(out));
  }
  ValueList items = AsSequence(c.target, c.name);
  std::reverse(items.begin(), items.end());
  return Value::List(std::move(items));
}

Value FilterJoin(const FilterCall& c) {
  static const Value kEmpty = Value::String("");
  std::string sep = ToStr(Arg(c.args, 0, "d", kEmpty));
  const Value* attribute = c.args.Get(1, "attribute");
  std::string out;
  bool first = true;
  for (const Value& item : AsSequence(c.target, c.name)) {
    if (!first) out += sep;
    first = false;
    out += ToStr(attribute ? AttributeOf(item, ToStr(*attribute)) : item);
    if (out.size() > c.max_bytes) ValueFail("join: result longer than ", c.max_bytes, " bytes");
    CheckRoom(out.size(), "join");
  }
  return Value::String(std::move(out));
}

Value FilterUnique(const FilterCall& c) {
  bool case_sensitive = ArgBool(c.args, 0, "case_sensitive", false);
  const Value* attribute = c.args.Get(1, "attribute");
  ValueList out, seen;
  for (const Value& item : AsSequence(c.target, c.name)) {
    Value key = SortKey(attribute ? AttributeOf(item, ToStr(*attribute)) : item, case_sensitive);
    bool dup =
        std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return Equals(s, key); });
    if (dup) continue;
    seen.push_back(std::move(key));
    out.push_back(item);
  }
  return Value::List(std::move(out));
}

// A dict's (key, value) pairs, as Python's dict.items() gives them.
ValueList ItemPairs(const ValueDict& dict) {
  ValueList out;
  for (const auto& [k, v] : dict.items) out.push_back(Value::Tuple({ValueDict::KeyValue(k), v}));
  return out;
}

Value FilterItems(const FilterCall& c) {
  if (c.target.is_undefined()) return Value::List();
  if (!c.target.is_dict()) ValueFail("items: can only get item pairs from a mapping");
  return Value::List(ItemPairs(*c.target.dict));
}

Value FilterDictsort(const FilterCall& c) {
  if (!c.target.is_dict()) ValueFail("dictsort: needs a mapping, got ", TypeName(c.target));
  bool case_sensitive = ArgBool(c.args, 0, "case_sensitive", false);
  const Value by = Arg(c.args, 1, "by", Value::String("key"));
  bool reverse = ArgBool(c.args, 2, "reverse", false);
  size_t index = by.text == "value" ? 1 : 0;
  ValueList pairs = ItemPairs(*c.target.dict);
  std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& a, const Value& b) {
    Value ka = SortKey((*a.list)[index], case_sensitive);
    Value kb = SortKey((*b.list)[index], case_sensitive);
    return reverse ? Compare(kb, ka, nullptr) < 0 : Compare(ka, kb, nullptr) < 0;
  });
  return Value::List(std::move(pairs));
}

Value FilterSort(const FilterCall& c) {
  bool reverse = ArgBool(c.args, 0, "reverse", false);
  bool case_sensitive = ArgBool(c.args, 1, "case_sensitive", false);
  const Value* attribute = c.args.Get(2, "attribute");
  std::string attr = attribute ? ToStr(*attribute) : "";
  ValueList items = AsSequence(c.target, c.name);
  SortValues(items, case_sensitive, attribute ? &attr : nullptr, reverse);
  return Value::List(std::move(items));
}

Value FilterMinOrMax(const FilterCall& c) {
  bool case_sensitive = ArgBool(c.args, 0, "case_sensitive", false);
  const Value* attribute = c.args.Get(1, "attribute");
  std::string attr = attribute ? ToStr(*attribute) : "";
  ValueList items = AsSequence(c.target, c.name);
  if (items.empty()) return Value::Undefined(std::string(c.name));
  SortValues(items, case_sensitive, attribute ? &attr : nullptr, c.name == "max");
  return items.front();
}

Value FilterSum(const FilterCall& c) {
  const Value* attribute = c.args.Get(0, "attribute");
  Value total = Arg(c.args, 1, "start", Value::Int(0));
  for (const Value& item : AsSequence(c.target, c.name)) {
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

// The keyword argument `name`, or null (map reads only keywords: its positional ones are a
// filter's).
const Value* Keyword(const CallArgs& args, std::string_view name) {
  const Value* found = nullptr;
  for (const auto& [k, v] : args.keywords) {
    if (k == name) found = &v;
  }
  return found;
}

// `map(attribute=...)` reads an attribute of each item; `map('filter', args)` applies a filter.
Value FilterMap(const FilterCall& c) {
  ValueList out;
  if (const Value* attribute = Keyword(c.args, "attribute")) {
    const Value* fallback = Keyword(c.args, "default");
    for (const Value& item : LazySequence(c.target, c.name)) {
      Value v = AttributeOf(item, ToStr(*attribute));
      out.push_back(v.is_undefined() && fallback ? *fallback : v);
    }
    return Generator(std::move(out));
  }
  if (c.args.positional.empty() || !c.args.positional[0].is_string()) {
    ValueFail("map: needs a filter name or attribute=");
  }
  CallArgs filter_args;
  filter_args.positional.assign(c.args.positional.begin() + 1, c.args.positional.end());
  filter_args.keywords = c.args.keywords;
  for (const Value& item : LazySequence(c.target, c.name)) {
    out.push_back(ApplyFilter(c.args.positional[0].text, item, filter_args, c.max_bytes));
  }
  return Generator(std::move(out));
}

Value FilterSelectAttr(const FilterCall& c) {
  if (c.args.positional.empty()) ValueFail(c.name, ": needs an attribute name");
  std::string attribute = ToStr(c.args.positional[0]);
  return Generator(
      FilterByTest(LazySequence(c.target, c.name), c.args, 1, &attribute, c.name == "selectattr"));
}

Value FilterSelect(const FilterCall& c) {
  return Generator(
      FilterByTest(LazySequence(c.target, c.name), c.args, 0, nullptr, c.name == "select"));
}

Value FilterAttr(const FilterCall& c) {
  const Value* key = c.args.Get(0, "name");
  if (key == nullptr) ValueFail("attr: needs a name");
  return AttributeOf(c.target, ToStr(*key));
}

constexpr Named<Filter> kSequenceFilters[] = {
    {FilterList, "list"},
    {FilterFirstOrLast, "first"},
    {FilterFirstOrLast, "last"},
    {FilterReverse, "reverse"},
    {FilterJoin, "join"},
    {FilterUnique, "unique"},
    {FilterItems, "items"},
    {FilterDictsort, "dictsort"},
    {FilterSort, "sort"},
    {FilterMinOrMax, "min"},
    {FilterMinOrMax, "max"},
    {FilterSum, "sum"},
    {FilterMap, "map"},
    {FilterSelectAttr, "selectattr"},
    {FilterSelectAttr, "rejectattr"},
    {FilterSelect, "select"},
    {FilterSelect, "reject"},
    {FilterAttr, "attr"},
};

}  // namespace

std::optional<Filter> FindSequenceFilter(std::string_view name) {
  return FindNamed(kSequenceFilters, name);
}

}  // namespace grove::jinja
