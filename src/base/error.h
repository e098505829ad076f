// Errors and invariant checks.
//
// grove reports recoverable problems (a malformed file, an impossible option, a prompt longer than
// the context) by throwing grove::Error whose message names what is wrong and where, e.g.
//   gguf: tensor 'blk.3.attn_q.weight': expected 2048x2048, got 2048x1024
// Exceptions are used on load and set-up paths only; the token loop never throws on valid state,
// and the library never prints or exits (contract 5). GROVE_CHECK guards internal invariants: a
// failure is a bug in grove and carries file:line.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace grove {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Concatenates any streamable values into one string.
template <typename... Args>
std::string StrCat(Args&&... args) {
  std::ostringstream out;
  (out << ... << std::forward<Args>(args));
  return out.str();
}

template <typename... Args>
[[noreturn]] void Fail(Args&&... args) {
  throw Error(StrCat(std::forward<Args>(args)...));
}

}  // namespace grove

#define GROVE_CHECK(cond, ...)                                            \
  do {                                                                    \
    if (!(cond)) [[unlikely]] {                                           \
      ::grove::Fail("internal check failed at ", __FILE__, ":", __LINE__, \
                    ": " #cond " " __VA_OPT__(, ) __VA_ARGS__);           \
    }                                                                     \
  } while (0)
