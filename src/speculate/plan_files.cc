#include "speculate/plan_files.h"

#include <algorithm>
#include <ctime>
#include <nlohmann/json.hpp>

#include "base/bounded_json.h"
#include "base/error.h"
#include "base/replacing_file.h"
#include "base/text_file.h"
#include "kernels/cpu_features.h"
#include "kernels/kernel_set.h"
#include "speculate/verify_cost.h"
#include "speculate/verify_cost_cache.h"

#ifndef GROVE_VERSION
#define GROVE_VERSION "unknown"
#endif

namespace grove {
namespace {

// The depth is bounded while parsing (base/bounded_json.h): a plan file nested 100,000 deep would
// overflow the stack in the walks that read it.
nlohmann::json ReadJson(const std::string& path, std::string_view what) {
  return ReadJsonFile(path, what);
}

std::string UtcNow() {
  char text[32];
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

}  // namespace

TokenTree ReadTreeFile(const std::string& path, int32_t max_nodes) {
  nlohmann::json j = ReadJson(path, "tree file");
  if (!j.is_object() || !j.contains("parents") || !j["parents"].is_array()) {
    Fail("tree file '", path, "': expected {\"parents\": [...]}");
  }
  if (j["parents"].size() > static_cast<std::size_t>(std::max(max_nodes, 0))) {
    Fail("tree file '", path, "' has ", j["parents"].size(), " nodes, more than the ", max_nodes,
         " allowed");
  }
  TokenTree shape;
  std::vector<int32_t> n_children(j["parents"].size() + 1, 0);
  for (std::size_t i = 0; i < j["parents"].size(); ++i) {
    const auto& v = j["parents"][i];
    if (!v.is_number_integer()) Fail("tree file '", path, "': parents[", i, "] is not an integer");
    const int64_t parent = v.get<int64_t>();
    if (parent < -1 || parent >= static_cast<int64_t>(i)) {
      Fail("tree file '", path, "': parents[", i, "] = ", parent, " must be -1 or an earlier node");
    }
    const int32_t rank = n_children[parent + 1]++;
    try {
      shape.AddChild(static_cast<int32_t>(parent), kNoToken, 1.0f / (rank + 2));
    } catch (const Error& e) {
      Fail("tree file '", path, "': node ", i, ": ", e.what());
    }
  }
  if (shape.empty()) Fail("tree file '", path, "' has no nodes");
  return shape;
}

AcceptanceFile ReadAcceptanceFile(const std::string& path) {
  nlohmann::json j = ReadJson(path, "acceptance file");
  if (!j.is_object() || !j.contains("acceptance") || !j["acceptance"].is_array()) {
    Fail("acceptance file '", path, "': expected {\"acceptance\": [p_1, p_2, ...]}");
  }
  std::vector<double> p;
  for (const auto& v : j["acceptance"]) {
    if (!v.is_number()) Fail("acceptance file '", path, "': every entry must be a number");
    p.push_back(v.get<double>());
  }
  try {
    ValidateAcceptanceVector(p);
  } catch (const Error& e) {
    Fail("acceptance file '", path, "': ", e.what());
  }
  AcceptanceFile file{.acceptance = std::move(p)};
  if (j.contains("draft_seconds_per_level")) {
    const auto& c = j["draft_seconds_per_level"];
    if (!c.is_number() || c.get<double>() < 0) {
      Fail("acceptance file '", path, "': draft_seconds_per_level must be a number >= 0");
    }
    file.draft_seconds_per_level = c.get<double>();
  }
  return file;
}

VerifyCostCurve ReadVerifyProfile(const std::string& path) {
  nlohmann::json j = ReadJson(path, "verify profile");
  if (!j.is_object() || !j.contains("curve") || !j["curve"].is_array()) {
    Fail("verify profile '", path,
         "': expected {\"curve\": [{\"n\": 1, \"seconds_median\": ...}, ...]}");
  }
  std::vector<std::pair<int32_t, double>> points;
  for (const auto& point : j["curve"]) {
    if (!point.is_object() || !point.contains("n") || !point.contains("seconds_median") ||
        !point["n"].is_number_integer() || !point["seconds_median"].is_number()) {
      Fail("verify profile '", path,
           "': each curve point needs integer n and number seconds_median");
    }
    // Read as int64 first: an n past int32 would wrap (2^32 + 1 read as 1).
    const int64_t n = point["n"].get<int64_t>();
    if (n < 1 || n > kMaxVerifyTokens) {
      Fail("verify profile '", path, "': a curve point's n = ", n, " is not a token count of 1 to ",
           kMaxVerifyTokens);
    }
    points.emplace_back(static_cast<int32_t>(n), point["seconds_median"].get<double>());
  }
  try {
    return VerifyCostCurve(std::move(points));
  } catch (const Error& e) {
    Fail("verify profile '", path, "': ", e.what());
  }
}

TreePlanInputs ReadPlanInputs(const std::string& accept_path, const std::string& profile_path,
                              int32_t max_tokens) {
  TreePlanInputs inputs{.max_tokens = max_tokens};
  if (!accept_path.empty()) {
    AcceptanceFile accept = ReadAcceptanceFile(accept_path);
    inputs.acceptance = std::move(accept.acceptance);
    inputs.draft_seconds_per_level = accept.draft_seconds_per_level;
  }
  if (!profile_path.empty()) {
    inputs.verify_cost = ReadVerifyProfile(profile_path);
  } else {
    inputs.verify_cost_cache =
        std::make_shared<const VerifyCostCache>(VerifyCostCache::DefaultDirectory());
  }
  return inputs;
}

void WriteTreeFile(const std::string& path, const TokenTree& shape) {
  nlohmann::json parents = nlohmann::json::array();
  for (const TreeNode& n : shape.nodes()) parents.push_back(n.parent);
  ReplaceTextFile(path, nlohmann::json{{"parents", parents}}.dump() + "\n", "tree file");
}

void WriteAcceptanceFile(const std::string& path, const AcceptanceFile& file,
                         const AcceptanceProvenance& provenance) {
  const nlohmann::json j = {
      {"acceptance", file.acceptance},
      {"none", provenance.none},
      {"width", provenance.width},
      {"temperature", provenance.sampling.temperature},
      {"top_k", provenance.sampling.top_k},
      {"top_p", provenance.sampling.top_p},
      {"min_p", provenance.sampling.min_p},
      {"steps", provenance.steps},
      {"prompts", provenance.prompts},
      {"target", provenance.target},
      {"draft", provenance.draft},
      {"draft_seconds_per_level", file.draft_seconds_per_level},
      {"method", provenance.method},
  };
  ReplaceTextFile(path, j.dump(2) + "\n", "acceptance file");
}

void WriteVerifyProfile(const std::string& path, const VerifyProfile& profile) {
  GROVE_CHECK(!profile.curve.empty() && profile.curve.front().n == 1,
              "verify profile: the curve must start at n = 1");
  const double t1 = profile.curve.front().seconds_median;
  nlohmann::json curve = nlohmann::json::array();
  for (const VerifyProfilePoint& p : profile.curve) {
    curve.push_back({{"n", p.n},
                     {"seconds_median", p.seconds_median},
                     {"seconds_sd", p.seconds_sd},
                     {"seconds_min", p.seconds_min},
                     {"seconds_max", p.seconds_max},
                     {"ratio", t1 > 0 ? p.seconds_median / t1 : 0.0}});
  }
  const nlohmann::json j = {
      {"format", "grove-hardware-profile"},
      {"version", 1},
      {"created", UtcNow()},
      {"grove_version", GROVE_VERSION},
      {"model", profile.model},
      {"model_path", profile.model_path},
      {"model_types", profile.model_types},
      {"model_size_bytes", profile.model_size_bytes},
      {"weight_bytes", profile.weight_bytes},
      {"threads", profile.threads},
      {"kernels", ActiveKernels().name},
      {"cpu_features", CpuFeatureString(HostCpuFeatures())},
      {"batch_shape", "chain"},
      {"prefix_tokens", profile.prefix_tokens},
      {"repetitions", profile.repetitions},
      {"curve", curve},
      {"decode_gbps", t1 > 0 ? static_cast<double>(profile.weight_bytes) / t1 / 1e9 : 0.0},
      {"bandwidth_gbps",
       profile.bandwidth_gbps ? nlohmann::json(*profile.bandwidth_gbps) : nlohmann::json(nullptr)}};
  ReplaceTextFile(path, j.dump(2) + "\n", "verify profile");
}

}  // namespace grove
