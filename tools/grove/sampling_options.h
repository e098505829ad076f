// The sampling options every generating command takes (run, chat, calibrate, tot), registered
// once so that their names, help and ranges agree. The values are checked together, with the
// sampler's own messages, by SamplerParams::Validate when the command runs.
#pragma once

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "sample/sampler.h"

namespace grove::cli {

// --temp, --top-k, --top-p, --min-p into `sampling` (defaults: its current values).
void AddSamplingOptions(CLI::App& cmd, SamplerParams& sampling);

// "temperature 0.80, top-k 40, top-p 0.95, min-p 0.05" ("temperature 0 (greedy)" at 0), for the
// reports that say how a command sampled.
std::string DescribeSampling(const SamplerParams& sampling);

// -s/--seed where -1 means "draw one": the seed to use.
uint64_t SeedOrRandom(int64_t seed);

}  // namespace grove::cli
