// Summary statistics of repeated timings. Benchmarks report the spread beside the centre so a
// reader can tell a real difference from machine noise; llama-bench reports mean ± sample standard
// deviation, and the verify curve uses the median, which one descheduled run on a shared machine
// cannot move.
#pragma once

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "base/median.h"

namespace grove::cli {

struct SampleStats {
  double mean = 0;
  double sd = 0;  // sample standard deviation (n - 1); 0 for a single sample
  double median = 0;
  double min = 0;
  double max = 0;
};

inline SampleStats Summarize(std::vector<double> samples) {
  SampleStats s;
  if (samples.empty()) return s;
  const double n = static_cast<double>(samples.size());
  s.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / n;
  double sq = 0;
  for (double x : samples) sq += (x - s.mean) * (x - s.mean);
  s.sd = samples.size() > 1 ? std::sqrt(sq / (n - 1)) : 0.0;
  const auto [min, max] = std::minmax_element(samples.begin(), samples.end());
  s.min = *min;
  s.max = *max;
  s.median = Median(samples);
  return s;
}

}  // namespace grove::cli
