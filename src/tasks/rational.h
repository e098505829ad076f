// Exact rational numbers, the arithmetic of the Game of 24 (tasks/game24.h): intermediate results
// such as 3/4 must compare equal exactly, which floating point cannot promise.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace grove {

// An exact rational, always normalised (den > 0, gcd(num, den) == 1).
struct Rational {
  int64_t num = 0;
  int64_t den = 1;

  static Rational Make(int64_t num, int64_t den);  // den != 0
  bool is_natural() const { return den == 1 && num >= 0; }
  friend bool operator==(const Rational&, const Rational&) = default;
  friend bool operator<(const Rational& a, const Rational& b) {
    // 128-bit products: exact for every pair of normalised rationals.
    return static_cast<__int128>(a.num) * b.den < static_cast<__int128>(b.num) * a.den;
  }
};
std::string FormatRational(const Rational& r);  // "5", "-2", "5/3"

// a op b for op in + - * /. nullopt for any other op, for division by zero, and for a result whose
// numerator or denominator would not fit in 64 bits, so that text read from a model (huge numbers,
// "x / 0") can be evaluated without undefined behaviour.
std::optional<Rational> ApplyRational(const Rational& a, char op, const Rational& b);

}  // namespace grove
