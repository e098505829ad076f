#include "jinja/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <memory>
#include <new>
#include <type_traits>
#include <vector>

#include "base/error.h"
#include "jinja/jinja_budget.h"
#include "jinja/jinja_walk.h"

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

namespace {

// Lists and dicts are freed without recursion, as CPython's "trashcan" frees deeply nested
// containers: within its step budget a template can nest a list about 200,000 deep (`{% set ns.x =
// [ns.x] %}` in a loop), and freeing that one level per frame overflowed the stack. When the last
// reference to a list or dict goes, the lists and dicts among its items that go with it are moved
// onto a stack of this thread's, which the outermost free empties one by one.
class Trashcan {
 public:
  // Called as `items` is destroyed: the containers it alone holds are moved out to be freed later.
  template <typename Items>
  static void Take(Items& items) {
    // Most lists and dicts hold none that go with them: nothing to move, no thread state read.
    if (std::none_of(items.begin(), items.end(), [](auto& item) { return GoesWith(Item(item)); })) {
      return;
    }
    Trashcan* const can_ptr = ForThisThread();
    if (can_ptr == nullptr) return;  // the thread is ending: freed where they are
    Trashcan& can = *can_ptr;
    for (auto& item : items) can.Keep(Item(item));
    if (can.emptying_) return;  // an outer Take is freeing; it frees these too
    can.emptying_ = true;
    while (!can.lists_.empty() || !can.dicts_.empty()) {
      // Each reset frees one container, whose own Take (emptying_ set) only moves items here.
      if (!can.lists_.empty()) {
        std::shared_ptr<ValueList> last = std::move(can.lists_.back());
        can.lists_.pop_back();
      } else {
        std::shared_ptr<ValueDict> last = std::move(can.dicts_.back());
        can.dicts_.pop_back();
      }
    }
    can.emptying_ = false;
  }

 private:
  ~Trashcan() { gone_ = true; }
  // Null once this thread's trashcan is destroyed (a value freed by a static destructor after
  // the thread-local ones ran).
  static Trashcan* ForThisThread() {
    if (gone_) return nullptr;
    static thread_local Trashcan can;
    return &can;
  }
  static Value& Item(Value& v) { return v; }
  // A list or dict that only this item holds: it is freed with the item.
  static bool GoesWith(const Value& v) {
    return (v.kind == Value::Kind::kList && v.list.use_count() == 1) ||
           (v.kind == Value::Kind::kDict && v.dict.use_count() == 1);
  }
  static Value& Item(std::pair<std::string, Value>& kv) { return kv.second; }

  void Keep(Value& v) {
    // Without room to keep it (no memory), the item is freed where it is, recursively.
    if (!GoesWith(v)) return;
    try {
      if (v.list != nullptr) lists_.push_back(std::move(v.list));
      if (v.dict != nullptr) dicts_.push_back(std::move(v.dict));
    } catch (const std::bad_alloc&) {
    }
  }

  std::vector<std::shared_ptr<ValueList>> lists_;
  std::vector<std::shared_ptr<ValueDict>> dicts_;
  bool emptying_ = false;
  static thread_local bool gone_;
};
thread_local bool Trashcan::gone_ = false;

// std::allocator, except that destroying a list or dict goes through the trashcan; allocate_shared
// keeps the one allocation make_shared makes.
template <typename T>
struct TrashcanAllocator {
  using value_type = T;
  TrashcanAllocator() = default;
  template <typename U>
  explicit TrashcanAllocator(const TrashcanAllocator<U>&) {}
  T* allocate(size_t n) { return std::allocator<T>().allocate(n); }
  void deallocate(T* p, size_t n) { std::allocator<T>().deallocate(p, n); }
  template <typename U>
  void destroy(U* p) {
    if constexpr (std::is_same_v<U, ValueList>) {
      Trashcan::Take(*p);
    } else if constexpr (std::is_same_v<U, ValueDict>) {
      Trashcan::Take(p->items);
    }
    p->~U();
  }
  template <typename U>
  bool operator==(const TrashcanAllocator<U>&) const {
    return true;
  }
};

}  // namespace

// Every other member keeps its default (Value is an aggregate).
Value Value::Undefined(std::string name) { return {.text = std::move(name)}; }
Value Value::None() { return {.kind = Kind::kNone}; }
Value Value::Bool(bool b) { return {.kind = Kind::kBool, .boolean = b}; }
Value Value::Int(int64_t i) { return {.kind = Kind::kInt, .integer = i}; }
Value Value::Float(double f) { return {.kind = Kind::kFloat, .number = f}; }
Value Value::String(std::string s) { return {.kind = Kind::kString, .text = std::move(s)}; }
Value Value::List(ValueList items) {
  return {
      .kind = Kind::kList,
      .list = std::allocate_shared<ValueList>(TrashcanAllocator<ValueList>(), std::move(items))};
}
Value Value::Tuple(ValueList items) {
  Value v = List(std::move(items));
  v.tuple = true;
  return v;
}
Value Value::Dict() {
  return {.kind = Kind::kDict,
          .dict = std::allocate_shared<ValueDict>(TrashcanAllocator<ValueDict>())};
}
Value Value::Func(Function f) {
  return {.kind = Kind::kFunction, .function = std::make_shared<Function>(std::move(f))};
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

thread_local std::vector<const void*> WalkLevel::open_;

WalkLevel::WalkLevel(std::string_view what, const Value& v) {
  // A walk of values that share their items (`[x, x]` nested 40 deep) visits exponentially many:
  // each level counts towards the render's deadline.
  TickRender();
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

size_t HeldBytes(const Value& v) {
  size_t bytes = 0;
  if (v.is_list()) {
    for (const Value& item : *v.list) bytes += sizeof(Value) + item.text.size();
  } else if (v.is_dict()) {
    for (const auto& [k, item] : v.dict->items) {
      bytes += sizeof(std::pair<std::string, Value>) + k.size() + item.text.size();
    }
  }
  return bytes;
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
    case Value::Kind::kString: {
      // A value per character: a 16 MiB string would be 2 GB of them.
      const std::vector<std::string_view> chars = CodePoints(v.text);
      CheckRoom(chars.size() * sizeof(Value), "iterating a string");
      out->reserve(chars.size());
      for (std::string_view c : chars) out->push_back(Value::String(std::string(c)));
      return true;
    }
    default:
      return false;
  }
}

size_t CodePointBytes(std::string_view s, size_t i) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 1;
  return i + len > s.size() ? 1 : len;
}

size_t CountCodePoints(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); i += CodePointBytes(s, i)) ++n;
  return n;
}

std::vector<std::string_view> CodePoints(std::string_view s) {
  std::vector<std::string_view> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t len = CodePointBytes(s, i);
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
