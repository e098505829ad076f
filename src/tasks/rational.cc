#include "tasks/rational.h"

#include <limits>
#include <numeric>

#include "base/error.h"

namespace grove {
namespace {

__int128 Abs(__int128 x) { return x < 0 ? -x : x; }

__int128 Gcd(__int128 a, __int128 b) {
  a = Abs(a);
  b = Abs(b);
  while (b != 0) {
    const __int128 t = a % b;
    a = b;
    b = t;
  }
  return a;
}

// num / den normalised, or nullopt when den is 0 or a part does not fit in int64 (the most negative
// int64 is excluded too, so that negating a part never overflows).
std::optional<Rational> Normalise(__int128 num, __int128 den) {
  if (den == 0) return std::nullopt;
  if (den < 0) num = -num, den = -den;
  const __int128 g = Gcd(num, den);
  num /= g;
  den /= g;
  constexpr __int128 kMax = std::numeric_limits<int64_t>::max();
  if (Abs(num) > kMax || den > kMax) return std::nullopt;
  return Rational{static_cast<int64_t>(num), static_cast<int64_t>(den)};
}

}  // namespace

Rational Rational::Make(int64_t num, int64_t den) {
  GROVE_CHECK(den != 0);
  if (den < 0) num = -num, den = -den;
  const int64_t g = std::gcd(num < 0 ? -num : num, den);
  return {num / g, den / g};
}

std::string FormatRational(const Rational& r) {
  return r.den == 1 ? std::to_string(r.num) : StrCat(r.num, "/", r.den);
}

std::optional<Rational> ApplyRational(const Rational& a, char op, const Rational& b) {
  const __int128 an = a.num, ad = a.den, bn = b.num, bd = b.den;
  switch (op) {
    case '+':
      return Normalise(an * bd + bn * ad, ad * bd);
    case '-':
      return Normalise(an * bd - bn * ad, ad * bd);
    case '*':
      return Normalise(an * bn, ad * bd);
    case '/':
      return Normalise(an * bd, ad * bn);  // nullopt when b is 0
    default:
      return std::nullopt;
  }
}

}  // namespace grove
