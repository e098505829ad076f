// Walks of a value into its items (repr, tojson, ==, <), shared by jinja_value.cc, jinja_repr.cc
// and jinja_json.cc.
#pragma once

#include <string_view>
#include <vector>

#include "jinja/jinja_value.h"

namespace grove::jinja {

// Walks of a value into its items (repr, tojson, ==, <) recurse: one nested deeper than
// kMaxNesting, or one that contains itself (a list appended to itself, a namespace set as its own
// attribute), fails with a ValueError instead of overflowing the stack. Python raises
// RecursionError a little beyond its limit of 1000 frames.
inline constexpr int kMaxNesting = 256;

// One level of such a walk, for as long as it lasts: the values the walks under way on this thread
// are inside of, innermost last (their list or dict, null for others), so that the depth is the
// stack's size and Repr can tell a container it is already inside of (Python prints it as "[...]",
// "{...}").
class WalkLevel {
 public:
  WalkLevel(std::string_view what, const Value& v);
  WalkLevel(const WalkLevel&) = delete;
  WalkLevel& operator=(const WalkLevel&) = delete;
  ~WalkLevel() { open_.pop_back(); }

  // The value is a list or dict that an outer level of the walk is inside of already.
  bool reentered() const { return reentered_; }

 private:
  static thread_local std::vector<const void*> open_;
  bool reentered_ = false;
};

}  // namespace grove::jinja
