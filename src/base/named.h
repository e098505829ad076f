// A name for each value, in one table that both directions read: printing an enum value, parsing
// the word a command line or file gives for it (an unknown word is refused listing the known
// ones), and dispatching on a name (a template's filter, a method). One table instead of a switch
// for the names and a loop over every value for the parse, which said the same thing twice.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "base/error.h"

namespace grove {

template <typename T>
struct Named {
  T value;
  std::string_view name;
};

// The name `table` gives `value`, or `absent`.
template <typename T, size_t N>
constexpr std::string_view NameOf(const Named<T> (&table)[N], const T& value,
                                  std::string_view absent = "?") {
  for (const Named<T>& entry : table) {
    if (entry.value == value) return entry.name;
  }
  return absent;
}

// The value called `name` (the first entry of that name), or nothing.
template <typename T, size_t N>
constexpr std::optional<T> FindNamed(const Named<T> (&table)[N], std::string_view name) {
  for (const Named<T>& entry : table) {
    if (entry.name == name) return entry.value;
  }
  return std::nullopt;
}

// The names in table order, joined by `separator` ("serial-ar, serial-sd, seed").
template <typename T, size_t N>
std::string JoinNames(const Named<T> (&table)[N], std::string_view separator = ", ") {
  std::string out;
  for (const Named<T>& entry : table) {
    if (!out.empty()) out += separator;
    out += entry.name;
  }
  return out;
}

// The value called `name`; anything else fails naming `what` and the known names:
//   unknown scheduling policy 'fast' (known: serial-ar, serial-sd, seed, batched)
template <typename T, size_t N>
T ParseNamed(const Named<T> (&table)[N], std::string_view name, std::string_view what) {
  if (std::optional<T> value = FindNamed(table, name)) return *value;
  Fail("unknown ", what, " '", name, "' (known: ", JoinNames(table), ")");
}

}  // namespace grove
