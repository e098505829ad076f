// Range checks of numeric options, attached to the options themselves (CLI::Option::check) so that
// a bad value is refused as a usage error before any work, with the option's name, and so that one
// kind of option (a thread count, a probability) has one range in every command.
#pragma once

#include <CLI/CLI.hpp>

namespace grove::cli {

// A thread count: 0 (all hardware threads) up to MaxThreads() (4 x the hardware threads).
CLI::Validator ThreadCount();
// As ThreadCount, without 0 (commands whose count has no "all" meaning).
CLI::Validator PositiveThreadCount();
// A finite number in [lo, hi]; unlike CLI::Range it refuses nan (every comparison with nan is
// false, so a plain range check lets it through) and inf.
CLI::Validator FiniteRange(double lo, double hi);

// Attaches to every option of `app` and its commands that takes a value a check that refuses an
// empty one: `-m ""` or `-n ""` used to mean the default in silence (an unset shell variable
// becomes a different run). Options whose empty value means something (a prompt, a system
// prompt) are left out by name. Called once, after every command is added.
void RefuseEmptyValues(CLI::App& app);

}  // namespace grove::cli
