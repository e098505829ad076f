// The sampling options every generating command takes (run, chat, calibrate, tot), registered
// once so that their names, help and ranges agree. The values are checked together, with the
// sampler's own messages, by SamplerParams::Validate when the command runs.
#pragma once

#include <cstdint>

#include <CLI/CLI.hpp>

#include "sample/sampler.h"

namespace grove::cli {

// --temp, --top-k, --top-p, --min-p into `sampling` (defaults: its current values).
void AddSamplingOptions(CLI::App& cmd, SamplerParams& sampling);

// -s/--seed where -1 means "draw one": the seed to use.
uint64_t SeedOrRandom(int64_t seed);

}  // namespace grove::cli
