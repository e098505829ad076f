// The model pair that ships in models/ (trained by grove itself; see models/README.md), used by
// `grove run` when no model is given.
#pragma once

#include <optional>
#include <string>

namespace grove::cli {

inline constexpr const char* kBundledTarget = "grove-target.gguf";
inline constexpr const char* kBundledDraft = "grove-draft.gguf";

struct BundledModels {
  std::string target;
  std::string draft;
};

// Looks in $GROVE_MODELS, then in models/ of the source tree the binary was built in (walking up
// from the executable), then ./models. Nullopt when none holds both files.
std::optional<BundledModels> FindBundledModels();

}  // namespace grove::cli
