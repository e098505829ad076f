#include "bundled_models.h"

#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <vector>

#include "base/error.h"

namespace grove::cli {

std::optional<BundledModels> FindBundledModels() {
  namespace fs = std::filesystem;
  std::vector<fs::path> dirs;
  if (const char* env = std::getenv("GROVE_MODELS"); env && *env) dirs.emplace_back(env);
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    // build/release/tools/grove/grove -> the source tree four levels up (five tried).
    fs::path dir = exe.parent_path();
    for (int i = 0; i < 5 && !dir.empty() && dir != dir.root_path(); ++i, dir = dir.parent_path()) {
      dirs.push_back(dir / "models");
    }
  }
  dirs.emplace_back("models");
  for (const fs::path& dir : dirs) {
    const fs::path target = dir / kBundledTarget, draft = dir / kBundledDraft;
    if (fs::is_regular_file(target, ec) && fs::is_regular_file(draft, ec)) {
      BundledModels found{target.lexically_normal().string(), draft.lexically_normal().string()};
      const fs::path greedy = dir / kBundledGreedyAcceptance,
                     sampled = dir / kBundledSampledAcceptance;
      if (fs::is_regular_file(greedy, ec))
        found.greedy_acceptance = greedy.lexically_normal().string();
      if (fs::is_regular_file(sampled, ec))
        found.sampled_acceptance = sampled.lexically_normal().string();
      return found;
    }
  }
  return std::nullopt;
}

std::string BundledAcceptanceFor(const std::string& target, const std::string& draft, bool greedy) {
  namespace fs = std::filesystem;
  const std::optional<BundledModels> bundled = FindBundledModels();
  if (!bundled) return "";
  std::error_code ec;
  if (!fs::equivalent(target, bundled->target, ec) || ec ||
      !fs::equivalent(draft, bundled->draft, ec) || ec) {
    return "";
  }
  return bundled->acceptance(greedy);
}

bool DefaultToBundledPair(std::string& model, std::string& draft) {
  if (!model.empty()) return false;
  const auto bundled = FindBundledModels();
  if (!bundled) {
    Fail("no model given (-m) and the bundled models (models/", kBundledTarget, ", models/",
         kBundledDraft,
         ") were not found; set GROVE_MODELS to their directory or pass -m MODEL.gguf");
  }
  model = bundled->target;
  if (draft.empty()) draft = bundled->draft;
  return true;
}

}  // namespace grove::cli
