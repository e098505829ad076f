// Integer arithmetic of templates. Python's integers are unbounded; a template's are 64-bit here,
// and a result that does not fit is an error naming the operation, never a wrapped value, the
// undefined behaviour of signed overflow, or the trap of INT64_MIN / -1. Chat templates count
// messages and format indices; no real one comes near the bound.
#pragma once

#include <cstdint>
#include <string_view>

namespace grove::jinja {

int64_t CheckedAdd(int64_t a, int64_t b);
int64_t CheckedSub(int64_t a, int64_t b);
int64_t CheckedMul(int64_t a, int64_t b);
int64_t CheckedNeg(int64_t a);
// Python's // and % (floor division: the remainder takes the divisor's sign); b != 0.
int64_t FloorDiv(int64_t a, int64_t b);
int64_t FloorMod(int64_t a, int64_t b);
// a ** b for b >= 0.
int64_t CheckedPow(int64_t a, int64_t b);
// len(range(start, stop, step)), step != 0 (up to 2^64 - 1, hence unsigned), and its k-th item,
// start + k step, which lies between start and stop and so fits.
uint64_t RangeLength(int64_t start, int64_t stop, int64_t step);
int64_t RangeItem(int64_t start, int64_t step, uint64_t k);
// int(x) of a finite float: truncation toward zero; `what` names the operation in the error.
int64_t TruncateToInt(double x, std::string_view what);

}  // namespace grove::jinja
