#include "model/packed_weight_cache.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <tuple>
#include <vector>

#include "base/error.h"
#include "base/fnv1a.h"
#include "base/log.h"
#include "base/replacing_file.h"

namespace grove {
namespace {

// A kept file: a header of kHeaderBytes (the magic, the format version, the key's length, the
// packed bytes' count, the key itself, zeros), then the packed bytes, which therefore start on a
// page boundary of the map.
constexpr char kMagic[8] = {'G', 'R', 'O', 'V', 'E', 'P', 'K', 'W'};
constexpr uint32_t kFormatVersion = 1;
constexpr std::size_t kHeaderBytes = 4096;
constexpr std::size_t kHeaderFixedBytes = sizeof(kMagic) + 4 + 4 + 8;

constexpr const char* kPrefix = "packed-";
constexpr const char* kSuffix = ".bin";
constexpr auto kStale = std::chrono::hours(1);

template <typename T>
T ReadField(const uint8_t* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

}  // namespace

const uint8_t* KeptPackedWeights::data() const { return map_->bytes().data() + kHeaderBytes; }

uint64_t KeptPackedWeights::size() const { return map_->bytes().size() - kHeaderBytes; }

std::string PackedWeightCache::PathFor(const std::string& key) const {
  return dir_ + "/" + kPrefix + Fnv1a().Mix(key).Hex() + kSuffix;
}

std::unique_ptr<KeptPackedWeights> PackedWeightCache::Open(const std::string& key,
                                                           uint64_t bytes) const {
  if (!enabled()) return nullptr;
  const std::string path = PathFor(key);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return nullptr;
  try {
    auto map = std::make_unique<MappedFile>(path);
    const std::span<const uint8_t> file = map->bytes();
    if (file.size() < kHeaderBytes || std::memcmp(file.data(), kMagic, sizeof(kMagic)) != 0)
      Fail("not a packed-weights file");
    const auto version = ReadField<uint32_t>(file.data() + 8);
    const auto key_bytes = ReadField<uint32_t>(file.data() + 12);
    const auto data_bytes = ReadField<uint64_t>(file.data() + 16);
    if (version != kFormatVersion) Fail("format version ", version, ", not ", kFormatVersion);
    if (key_bytes > kHeaderBytes - kHeaderFixedBytes ||
        std::string_view(reinterpret_cast<const char*>(file.data()) + kHeaderFixedBytes,
                         key_bytes) != key)
      Fail("it was packed for another file, build or machine");
    if (data_bytes != bytes || file.size() - kHeaderBytes != bytes)
      Fail("it holds ", file.size() - kHeaderBytes, " packed bytes, not ", bytes);
    // Marks it used: the budget removes the least recently used files first.
    ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);
    return std::make_unique<KeptPackedWeights>(std::move(map));
  } catch (const std::exception& e) {
    Log(LogLevel::kWarn, "ignoring the packed weights '", path, "' (", e.what(),
        "); they will be packed again");
    return nullptr;
  }
}

void PackedWeightCache::Store(const std::string& key, const uint8_t* data, uint64_t bytes) const {
  if (!enabled()) return;
  if (bytes > kMaxFileBytes || bytes > budget_bytes_ ||
      key.size() > kHeaderBytes - kHeaderFixedBytes) {
    Log(LogLevel::kDebug, "packed weights: not kept (", bytes, " bytes, a key of ", key.size(),
        ")");
    return;
  }
  const std::string path = PathFor(key);
  try {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    std::vector<uint8_t> header(kHeaderBytes, 0);
    const auto key_bytes = static_cast<uint32_t>(key.size());
    std::memcpy(header.data(), kMagic, sizeof(kMagic));
    std::memcpy(header.data() + 8, &kFormatVersion, 4);
    std::memcpy(header.data() + 12, &key_bytes, 4);
    std::memcpy(header.data() + 16, &bytes, 8);
    std::memcpy(header.data() + kHeaderFixedBytes, key.data(), key.size());
    ReplacingFile file(path, "packed weights");
    file.Write(header.data(), header.size());
    file.Write(data, bytes);
    file.Commit();
  } catch (const std::exception& e) {
    Log(LogLevel::kDebug, "packed weights: not kept: ", e.what());
    return;
  }
  Evict(path);
}

void PackedWeightCache::Evict(const std::string& keep) const {
  std::vector<std::tuple<std::filesystem::file_time_type, uint64_t, std::filesystem::path>> kept;
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(kPrefix) || !entry.is_regular_file(ec)) continue;
    // What a process killed while writing left (ReplacingFile's temporary), once it is surely
    // not being written any more.
    if (name.ends_with(".partial") &&
        entry.last_write_time(ec) < std::filesystem::file_time_type::clock::now() - kStale) {
      std::filesystem::remove(entry.path(), ec);
      continue;
    }
    if (!name.ends_with(kSuffix)) continue;
    const uint64_t size = entry.file_size(ec);
    if (ec) continue;
    total += size;
    if (entry.path() != keep) kept.emplace_back(entry.last_write_time(ec), size, entry.path());
  }
  std::sort(kept.begin(), kept.end());
  for (const auto& [when, size, path] : kept) {
    if (total <= budget_bytes_) break;
    if (std::filesystem::remove(path, ec)) {
      total -= size;
      Log(LogLevel::kDebug, "packed weights: removed '", path.string(),
          "', the least recently used, to stay within ", budget_bytes_, " bytes");
    }
  }
}

}  // namespace grove
