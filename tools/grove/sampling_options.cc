#include "sampling_options.h"

#include <random>

#include "base/error.h"
#include "option_checks.h"

namespace grove::cli {

void AddSamplingOptions(CLI::App& cmd, SamplerParams& sampling) {
  cmd.add_option("--temp", sampling.temperature, "Temperature; 0 is greedy")
      ->capture_default_str()
      ->check(FiniteRange(0.0, 2.0));
  cmd.add_option("--top-k", sampling.top_k, "Keep the k most likely tokens; 0 disables")
      ->capture_default_str();
  cmd.add_option("--top-p", sampling.top_p, "Nucleus sampling mass in (0, 1]; 1 disables")
      ->capture_default_str();
  cmd.add_option("--min-p", sampling.min_p,
                 "Drop tokens below min-p x the top probability; 0 disables")
      ->capture_default_str();
}

std::string DescribeSampling(const SamplerParams& sampling) {
  if (sampling.greedy()) return "temperature 0 (greedy)";
  return StrCat("temperature ", sampling.temperature, ", top-k ", sampling.top_k, ", top-p ",
                sampling.top_p, ", min-p ", sampling.min_p);
}

uint64_t SeedOrRandom(int64_t seed) {
  return seed >= 0 ? static_cast<uint64_t>(seed) : std::random_device{}();
}

}  // namespace grove::cli
