#include "bundled_models.h"

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <vector>

#include "base/error.h"
#include "speculate/draft_source.h"

namespace grove::cli {
namespace {

std::string PairNames() {
  std::string names;
  for (const BundledPairFiles& p : kBundledPairs)
    names += StrCat(names.empty() ? "" : ", ", p.name);
  return names;
}

std::vector<std::filesystem::path> ModelDirectories() {
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
  return dirs;
}

}  // namespace

const BundledPairFiles& BundledPair(std::string_view name) {
  for (const BundledPairFiles& p : kBundledPairs) {
    if (name == p.name) return p;
  }
  Fail("no bundled pair '", name, "' (there are: ", PairNames(), ")");
}

std::optional<BundledModels> FindBundledModels(std::string_view pair) {
  namespace fs = std::filesystem;
  const BundledPairFiles& files = BundledPair(pair);
  std::error_code ec;
  for (const fs::path& dir : ModelDirectories()) {
    const fs::path target = dir / files.target, draft = dir / files.draft;
    if (fs::is_regular_file(target, ec) && fs::is_regular_file(draft, ec)) {
      BundledModels found{target.lexically_normal().string(), draft.lexically_normal().string()};
      const fs::path greedy = dir / files.greedy_acceptance,
                     sampled = dir / files.sampled_acceptance;
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
  // A mixture (DRAFT.gguf+suffix) starts from its draft model's vector: the controller ranks the
  // model's first choices first until the others prove better.
  if (const std::vector<std::string> members = DraftSource::MixtureMembers(draft);
      members.size() > 1) {
    for (const std::string& member : members) {
      const std::string file = BundledAcceptanceFor(target, member, greedy);
      if (!file.empty()) return file;
    }
    return "";
  }
  for (const BundledPairFiles& pair : kBundledPairs) {
    const std::optional<BundledModels> bundled = FindBundledModels(pair.name);
    if (!bundled) continue;
    std::error_code ec;
    if (fs::equivalent(target, bundled->target, ec) && !ec &&
        fs::equivalent(draft, bundled->draft, ec) && !ec) {
      return bundled->acceptance(greedy);
    }
  }
  return "";
}

bool DefaultToBundledPair(std::string& model, std::string& draft, const std::string& pair,
                          BundledDraft kind) {
  if (!model.empty()) {
    if (!pair.empty())
      Fail("--pair chooses a bundled target; it cannot be combined with -m ", model);
    return false;
  }
  const std::string_view name = pair.empty() ? kDefaultPair : std::string_view(pair);
  const auto bundled = FindBundledModels(name);
  if (!bundled) {
    const BundledPairFiles& files = BundledPair(name);
    Fail("no model given (-m) and the bundled '", name, "' pair (models/", files.target,
         ", models/", files.draft,
         ") was not found; set GROVE_MODELS to its directory or pass -m MODEL.gguf");
  }
  model = bundled->target;
  if (draft.empty()) draft = bundled->draft + (kind == BundledDraft::kMixture ? "+suffix" : "");
  return true;
}

void AddPairOption(CLI::App& cmd, std::string& pair) {
  std::vector<std::string> names;
  for (const BundledPairFiles& p : kBundledPairs) names.emplace_back(p.name);
  cmd.add_option("--pair", pair,
                 StrCat("Bundled pair used when no -m is given: ", PairNames(), " (default ",
                        kDefaultPair, ")"))
      ->check(CLI::IsMember(names));
}

}  // namespace grove::cli
