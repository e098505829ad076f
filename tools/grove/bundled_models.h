// The model pairs that ship in models/ (trained by grove itself; see models/README.md), used by
// `grove run`, `serve` and `tot` when no model is given.
//
// - "base" (the default): a 43 M-parameter target whose weights (45 MB) stream from memory at
//   every token, the regime of the models people run, where verifying several tokens costs little
//   more than one; and its distilled draft.
// - "small": a 12 M-parameter target that fits in the last-level cache (its forward pass is
//   compute-bound) and its draft; fast to load and run, for tests and quick checks.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace CLI {
class App;
}

namespace grove::cli {

struct BundledPairFiles {
  const char* name;
  const char* target;
  const char* draft;
  const char* greedy_acceptance;   // grove calibrate at temperature 0
  const char* sampled_acceptance;  // grove calibrate at temperature 1
};

inline constexpr BundledPairFiles kBundledPairs[] = {
    {"base", "grove-base-target.gguf", "grove-base-draft.gguf", "grove-base.greedy.accept.json",
     "grove-base.sampled.accept.json"},
    {"small", "grove-target.gguf", "grove-draft.gguf", "grove-pair.greedy.accept.json",
     "grove-pair.sampled.accept.json"},
};
inline constexpr std::string_view kDefaultPair = "base";

struct BundledModels {
  std::string target;
  std::string draft;
  // The pair's measured acceptance vectors (grove calibrate), the auto planner's starting point:
  // at temperature 0, and sampling at temperature 1. Empty when absent.
  std::string greedy_acceptance;
  std::string sampled_acceptance;

  const std::string& acceptance(bool greedy) const {
    return greedy ? greedy_acceptance : sampled_acceptance;
  }
};

// The files of a pair by name; throws grove::Error naming the pairs there are.
const BundledPairFiles& BundledPair(std::string_view name);

// Looks in $GROVE_MODELS, then in models/ of the source tree the binary was built in (walking up
// from the executable), then ./models. Nullopt when none holds both files of the pair.
std::optional<BundledModels> FindBundledModels(std::string_view pair = kDefaultPair);

// What drafts for a bundled pair when the user names no draft: its draft model, or the draft
// model mixed with suffix drafting ("DRAFT.gguf+suffix", speculate/drafter_mixture.h), which run,
// chat, serve and tot default to (in tot-bench 0.98-1.05x the draft model alone, models/README.md).
// pipe keeps the draft model: its stages run a draft model's forward.
enum class BundledDraft { kModel, kMixture };

// No model given (`model` empty): the pair's target (empty `pair`: the default pair), and its draft
// unless `draft` names one. Throws grove::Error when the pair is not found, or when a pair is
// named together with a model. True when it filled them in.
bool DefaultToBundledPair(std::string& model, std::string& draft, const std::string& pair = "",
                          BundledDraft kind = BundledDraft::kModel);

// A bundled pair's acceptance vector for this sampling when target and draft are that pair's
// files (a user's own pair has none; a mixture DRAFT+suffix: its member's); empty otherwise.
std::string BundledAcceptanceFor(const std::string& target, const std::string& draft, bool greedy);

// `--pair NAME`: which bundled pair to use when no -m is given.
void AddPairOption(CLI::App& cmd, std::string& pair);

}  // namespace grove::cli
