#include "speculate/verify_cost_cache.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/fnv1a.h"
#include "base/log.h"
#include "base/replacing_file.h"
#include "base/text_file.h"
#include "kernels/cpu_features.h"
#include "kernels/kernel_set.h"
#include "speculate/sequoia.h"

#ifndef GROVE_VERSION
#define GROVE_VERSION "unknown"
#endif

namespace grove {
namespace {

constexpr const char* kFormat = "grove-verify-cost-cache";
constexpr int kFormatVersion = 1;

int64_t NowSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::string VerifyCostCache::DefaultDirectory() {
  if (const char* dir = std::getenv("GROVE_CACHE_DIR")) return dir;  // "" turns caching off
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::string(xdg) + "/grove";
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.cache/grove";
  return "";
}

std::string VerifyCostCache::KeyFor(const Model& target) {
  return StrCat("model ", target.config().arch, " ", target.parameters()->ShapeFingerprint(),
                " | cpu ", CpuModelName(), " (", CpuFeatureString(HostCpuFeatures()),
                ") | kernels ", ActiveKernels().name, " | threads ", target.shared_pool()->size(),
                " | batch ", target.max_batch(), " | grove ", GROVE_VERSION);
}

std::string VerifyCostCache::PathFor(const std::string& key) const {
  return dir_ + "/verify-" + Fnv1a().Mix(key).Hex() + ".json";
}

std::optional<CachedVerifyCost> VerifyCostCache::Load(const Model& target) const {
  if (!enabled()) return std::nullopt;
  const std::string key = KeyFor(target);
  const std::string path = PathFor(key);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  try {
    const nlohmann::json j = nlohmann::json::parse(ReadTextFile(path, "verify cost cache"));
    if (!j.is_object() || j.value("format", "") != kFormat ||
        j.value("version", 0) != kFormatVersion) {
      Fail("not a ", kFormat, " file of version ", kFormatVersion);
    }
    if (j.value("key", "") != key) Fail("it was measured for another model or machine");
    CachedVerifyCost cached{.complete = j.at("complete").get<bool>(),
                            .decode_seconds = j.at("decode_seconds").get<double>()};
    for (const auto& point : j.at("curve")) {
      cached.points.emplace_back(point.at("n").get<int32_t>(),
                                 point.at("seconds_median").get<double>());
    }
    if (!(cached.decode_seconds >= 0) || !std::isfinite(cached.decode_seconds))
      Fail("decode_seconds ", cached.decode_seconds, " is not a time");
    if (!cached.points.empty()) VerifyCostCurve check(cached.points);  // throws if unusable
    if (cached.complete && cached.points.empty()) Fail("a complete curve without points");
    cached.measured_at = j.at("measured_at").get<int64_t>();
    if (NowSeconds() - cached.measured_at > int64_t{kMaxAgeDays} * 24 * 3600) {
      Log(LogLevel::kDebug, "verify cost cache: '", path, "' was measured more than ", kMaxAgeDays,
          " days ago: measuring again");
      return std::nullopt;
    }
    return cached;
  } catch (const std::exception& e) {
    Log(LogLevel::kWarn, "ignoring the cached verify curve '", path, "' (", e.what(),
        "); it will be measured again");
    return std::nullopt;
  }
}

void VerifyCostCache::Store(const Model& target, const CachedVerifyCost& curve) const {
  if (!enabled()) return;
  const std::string key = KeyFor(target);
  const std::string path = PathFor(key);
  nlohmann::json points = nlohmann::json::array();
  for (const auto& [n, seconds] : curve.points)
    points.push_back({{"n", n}, {"seconds_median", seconds}});
  const nlohmann::json j = {
      {"format", kFormat},
      {"version", kFormatVersion},
      {"key", key},
      {"model", target.parameters()->file_name()},
      {"complete", curve.complete},
      {"decode_seconds", curve.decode_seconds},
      {"measured_at", curve.measured_at > 0 ? curve.measured_at : NowSeconds()},
      {"curve", points}};
  try {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    ReplaceTextFile(path, j.dump(1) + "\n", "verify cost cache");
  } catch (const std::exception& e) {
    Log(LogLevel::kDebug, "verify cost cache: not kept: ", e.what());
  }
}

}  // namespace grove
