#include "speculate/verify_cost_cache.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "base/bounded_json.h"
#include "base/error.h"
#include "base/fnv1a.h"
#include "base/log.h"
#include "base/replacing_file.h"
#include "base/text_file.h"
#include "base/user_cache_directory.h"
#include "kernels/cpu_features.h"
#include "kernels/kernel_set.h"
#include "speculate/own_file.h"
#include "speculate/verify_cost.h"

#ifndef GROVE_VERSION
#define GROVE_VERSION "unknown"
#endif

namespace grove {
namespace {

constexpr const char* kFormat = "grove-verify-cost-cache";
// Version 2 keeps each size's samples; a version-1 file's points are read as one sample each,
// to be confirmed (such a curve was kept as measured once).
constexpr int kFormatVersion = 2;

int64_t NowSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// What a size's samples say (see CachedVerifyCost): one is taken as it is; of two, the lower (a
// pair that disagrees waits for a third, and the higher one is more likely the one slowed); of
// three, the median.
double Settled(std::vector<double> measured) {
  std::sort(measured.begin(), measured.end());
  return measured.size() >= 3 ? measured[1] : measured.front();
}

}  // namespace

void CachedVerifyCost::SeedSamplesFromPoints() {
  if (!samples.empty() || points.empty()) return;
  const double t1 = points.front().second;
  for (const auto& [n, seconds] : points) samples.push_back({n, {n == 1 ? seconds : seconds / t1}});
}

void CachedVerifyCost::DerivePoints() {
  if (samples.empty()) return;
  points.clear();
  if (samples.front().first != 1) return;  // nothing without t(1)
  // More tokens never cost less: a size is raised to the time of a smaller one, but only of one
  // whose time is confirmed; a time to be confirmed may be one that other work slowed, and would
  // raise every larger size with it (a kept t(6) of 3.9 t(1) hid a t(8) measured again at 1.4).
  const double t1 = Settled(samples.front().second);
  double floor = 0.0;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const auto& [n, measured] = samples[i];
    const double t = std::max(floor, n == 1 ? t1 : t1 * Settled(measured));
    points.emplace_back(n, t);
    if (Confirmed(n)) floor = t;
  }
}

void CachedVerifyCost::AddSample(int32_t n, double sample) {
  SeedSamplesFromPoints();
  auto at = std::lower_bound(samples.begin(), samples.end(), n,
                             [](const auto& size, int32_t m) { return size.first < m; });
  if (at == samples.end() || at->first != n) at = samples.insert(at, {n, {}});
  if (at->second.size() < kMaxSamples) at->second.push_back(sample);
  DerivePoints();
}

bool CachedVerifyCost::Measured(int32_t n) const {
  return std::any_of(points.begin(), points.end(), [&](const auto& p) { return p.first == n; });
}

bool CachedVerifyCost::Confirmed(int32_t n) const {
  for (const auto& [size, times] : samples) {
    if (size != n) continue;
    if (times.size() >= kMaxSamples) return true;
    if (times.size() < 2) return false;
    const auto [low, high] = std::minmax_element(times.begin(), times.end());
    return *high <= kAgreement * *low;
  }
  return false;  // unmeasured, or a point given without samples
}

std::string VerifyCostCache::DefaultDirectory() { return UserCacheDirectory(); }

VerifyCostKey VerifyCostKey::Of(const Model& target) {
  return {.arch = target.config().arch,
          .shape = target.parameters()->ShapeFingerprint(),
          .cpu = CpuModelName(),
          .cpu_features = CpuFeatureString(HostCpuFeatures()),
          .kernels = ActiveKernels().name,
          .kernels_revision = kKernelsRevision,
          .threads = static_cast<int32_t>(target.shared_pool()->size()),
          .batch = target.max_batch(),
          .kv = KvCacheTypeName(target.cache_type()),
          .version = GROVE_VERSION};
}

std::string VerifyCostKey::Text() const {
  return StrCat("model ", arch, " ", shape, " | cpu ", cpu, " (", cpu_features, ") | kernels ",
                kernels, " r", kernels_revision, " | threads ", threads, " | batch ", batch,
                " | kv ", kv, " | grove ", version);
}

std::string VerifyCostCache::PathFor(const std::string& key) const {
  return dir_ + "/verify-" + Fnv1a().Mix(key).Hex() + ".json";
}

namespace {

// One point of a file's curve into `cached`: its n and median and, from version 2 on, its samples.
void ReadPoint(const nlohmann::json& point, int version, CachedVerifyCost& cached) {
  // A float converted to an integer out of range is undefined; a damaged file is refused.
  const nlohmann::json& n = point.at("n");
  if (!n.is_number_integer() || n.get<int64_t>() < 1 ||
      n.get<int64_t>() > std::numeric_limits<int32_t>::max())
    Fail("a curve point's n is not a token count");
  cached.points.emplace_back(n.get<int32_t>(), point.at("seconds_median").get<double>());
  if (version < 2) return;
  std::vector<double> measured = point.at("samples").get<std::vector<double>>();
  if (measured.empty() || measured.size() > CachedVerifyCost::kMaxSamples)
    Fail("size ", cached.points.back().first, " has ", measured.size(), " samples");
  for (double x : measured) {
    if (!(x > 0) || !std::isfinite(x)) Fail("a sample of ", x, " is not a time or ratio");
  }
  cached.samples.emplace_back(cached.points.back().first, std::move(measured));
}

// The curve a file `j` keeps for `key`; throws grove::Error naming what is wrong with it.
CachedVerifyCost ParseCurve(const nlohmann::json& j, const std::string& key) {
  const int version = j.is_object() ? j.value("version", 0) : 0;
  if (!j.is_object() || j.value("format", "") != kFormat || version < 1 ||
      version > kFormatVersion) {
    Fail("not a ", kFormat, " file of version 1 to ", kFormatVersion);
  }
  if (j.value("key", "") != key) Fail("it was measured for another model or machine");
  CachedVerifyCost cached{.complete = version >= 2 && j.at("complete").get<bool>(),
                          .decode_seconds = j.at("decode_seconds").get<double>()};
  for (const auto& point : j.at("curve")) ReadPoint(point, version, cached);
  if (version >= 2) {
    // The points are written for readers; what counts is the samples, and both must agree.
    const std::vector<std::pair<int32_t, double>> written = cached.points;
    cached.DerivePoints();
    for (std::size_t i = 0; i < written.size(); ++i) {
      if (i >= cached.points.size() ||
          std::abs(written[i].second - cached.points[i].second) > 1e-6 * written[i].second)
        Fail("size ", written[i].first, "'s time disagrees with its samples");
    }
  }
  if (!(cached.decode_seconds >= 0) || !std::isfinite(cached.decode_seconds))
    Fail("decode_seconds ", cached.decode_seconds, " is not a time");
  if (!cached.points.empty()) VerifyCostCurve check(cached.points);  // throws if unusable
  if (cached.complete && cached.points.empty()) Fail("a complete curve without points");
  if (!j.at("measured_at").is_number_integer()) Fail("measured_at is not a time in seconds");
  cached.measured_at = j.at("measured_at").get<int64_t>();
  return cached;
}

}  // namespace

std::optional<CachedVerifyCost> VerifyCostCache::Load(const Model& target) const {
  if (!enabled()) return std::nullopt;
  const std::string key = KeyFor(target);
  const std::string path = PathFor(key);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  try {
    CachedVerifyCost cached = ParseCurve(ReadJsonFile(path, "verify cost cache"), key);
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
  // Points given without samples (a profile, a version-1 file) are written as one sample each.
  CachedVerifyCost sampled = curve;
  sampled.SeedSamplesFromPoints();
  nlohmann::json points = nlohmann::json::array();
  for (std::size_t i = 0; i < sampled.points.size(); ++i) {
    GROVE_CHECK(sampled.samples[i].first == sampled.points[i].first,
                "verify cost cache: samples and points of different sizes");
    points.push_back({{"n", sampled.points[i].first},
                      {"seconds_median", sampled.points[i].second},
                      {"samples", sampled.samples[i].second}});
  }
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
    // A file of its name in the cache directory is the cache's, damaged or not; a link, FIFO or
    // device put there is not, and is left as it is.
    CheckReplaceableOwnFile(path, "verify cost cache", "");
    ReplaceTextFile(path, j.dump(1) + "\n", "verify cost cache");
  } catch (const std::exception& e) {
    Log(LogLevel::kDebug, "verify cost cache: not kept: ", e.what());
  }
}

}  // namespace grove
