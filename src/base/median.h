// The median, one definition for every figure grove reports from repeated measurements
// (benchmarks, the pipeline's runs and link probes): the middle value, or the mean of the two
// middle ones for an even count. A median, unlike a mean, is not moved by one run that the shared
// machine descheduled.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>

namespace grove {

// Reorders `values`; 0 for none.
inline double Median(std::span<double> values) {
  if (values.empty()) return 0.0;
  const std::size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  const double upper = values[mid];
  if (values.size() % 2 == 1) return upper;
  const double lower = *std::max_element(values.begin(), values.begin() + mid);
  return 0.5 * (lower + upper);
}

}  // namespace grove
