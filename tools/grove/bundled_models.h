// The model pair that ships in models/ (trained by grove itself; see models/README.md), used by
// `grove run` when no model is given.
#pragma once

#include <optional>
#include <string>

namespace grove::cli {

inline constexpr const char* kBundledTarget = "grove-target.gguf";
inline constexpr const char* kBundledDraft = "grove-draft.gguf";
inline constexpr const char* kBundledGreedyAcceptance = "grove-pair.greedy.accept.json";
inline constexpr const char* kBundledSampledAcceptance = "grove-pair.sampled.accept.json";

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

// Looks in $GROVE_MODELS, then in models/ of the source tree the binary was built in (walking up
// from the executable), then ./models. Nullopt when none holds both files.
std::optional<BundledModels> FindBundledModels();

// No model given (`model` empty): the bundled target, and the bundled draft unless `draft` names
// one. Throws grove::Error when the bundled models are not found. True when it filled them in.
bool DefaultToBundledPair(std::string& model, std::string& draft);

// The bundled pair's acceptance vector for this sampling when target and draft are the bundled
// files (a user's own pair has none); empty otherwise.
std::string BundledAcceptanceFor(const std::string& target, const std::string& draft, bool greedy);

}  // namespace grove::cli
