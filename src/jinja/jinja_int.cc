#include "jinja/jinja_int.h"

#include <cmath>
#include <limits>

#include "jinja/jinja_value.h"

namespace grove::jinja {
namespace {

[[noreturn]] void Overflow(std::string_view what) {
  ValueFail("integer overflow in ", what,
            ": the result does not fit in 64 bits (grove's template integers are 64-bit)");
}

}  // namespace

int64_t CheckedAdd(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) Overflow("+");
  return r;
}

int64_t CheckedSub(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_sub_overflow(a, b, &r)) Overflow("-");
  return r;
}

int64_t CheckedMul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) Overflow("*");
  return r;
}

int64_t CheckedNeg(int64_t a) {
  if (a == std::numeric_limits<int64_t>::min()) Overflow("unary -");
  return -a;
}

int64_t FloorDiv(int64_t a, int64_t b) {
  if (a == std::numeric_limits<int64_t>::min() && b == -1) Overflow("//");
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t FloorMod(int64_t a, int64_t b) {
  if (b == -1) return 0;  // also INT64_MIN % -1, which traps in hardware
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

int64_t CheckedPow(int64_t a, int64_t b) {
  // |a| <= 1 never grows, whatever b; any other base overflows within 63 factors.
  if (a == 0) return b == 0 ? 1 : 0;
  if (a == 1) return 1;
  if (a == -1) return b % 2 == 0 ? 1 : -1;
  int64_t r = 1;
  for (int64_t i = 0; i < b; ++i) {
    if (__builtin_mul_overflow(r, a, &r)) Overflow("**");
  }
  return r;
}

uint64_t RangeLength(int64_t start, int64_t stop, int64_t step) {
  // In 128 bits: stop - start and -step do not fit in 64 at the extremes.
  const __int128 span =
      step > 0 ? static_cast<__int128>(stop) - start : static_cast<__int128>(start) - stop;
  const __int128 stride = step > 0 ? static_cast<__int128>(step) : -static_cast<__int128>(step);
  return span <= 0 ? 0 : static_cast<uint64_t>((span - 1) / stride + 1);
}

int64_t RangeItem(int64_t start, int64_t step, uint64_t k) {
  return static_cast<int64_t>(start + static_cast<__int128>(k) * step);
}

int64_t TruncateToInt(double x, std::string_view what) {
  // 2^63 is exact in a double; every double in (-2^63 - 1, 2^63) truncates into int64_t.
  constexpr double kBound = 9223372036854775808.0;
  if (!(std::trunc(x) < kBound && std::trunc(x) >= -kBound)) {
    ValueFail(what, ": ", x, " does not fit in a 64-bit integer");
  }
  return static_cast<int64_t>(x);
}

}  // namespace grove::jinja
