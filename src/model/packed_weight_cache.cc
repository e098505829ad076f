#include "model/packed_weight_cache.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <system_error>
#include <tuple>
#include <vector>

#include "base/checksum.h"
#include "base/error.h"
#include "base/fnv1a.h"
#include "base/log.h"
#include "base/replacing_file.h"
#include "base/thread_pool.h"

namespace grove {
namespace {

// A kept file: a header of kHeaderBytes (the magic, the format version, the key's length, the
// packed bytes' count, their checksum, the key itself, zeros), then the packed bytes. Version 2
// added the checksum; a version 1 file is packed again.
constexpr char kMagic[8] = {'G', 'R', 'O', 'V', 'E', 'P', 'K', 'W'};
constexpr uint32_t kFormatVersion = 2;
constexpr std::size_t kHeaderBytes = PackedWeightCache::kHeaderBytes;
constexpr std::size_t kChecksumAt = sizeof(kMagic) + 4 + 4 + 8;
constexpr std::size_t kHeaderFixedBytes = kChecksumAt + 8;
// What a writer takes at a time: at most one chunk is left to an idle thread when Finish comes.
constexpr std::size_t kWriteChunkBytes = std::size_t{1} << 20;

constexpr const char* kPrefix = "packed-";
constexpr const char* kSuffix = ".bin";
// A temporary (ReplacingFile's) this old was left by a writer that was killed.
constexpr auto kPartialAbandonedAfter = std::chrono::hours(1);

template <typename T>
T ReadField(const uint8_t* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

// What Open reads must be this user's own file, as written by Store: not a link someone planted
// (in a cache directory shared through GROVE_CACHE_DIR: the map refuses to follow one), nor one
// others may change. Checked on the descriptor mapped, so nothing can be swapped in between.
void CheckOwnFile(const FileIdentity& file) {
  if (file.owner != ::geteuid()) Fail("owned by another user");
  if ((file.mode & (S_IWGRP | S_IWOTH)) != 0) Fail("writable by others");
}

uint64_t ChunkCount(uint64_t bytes) { return (bytes + kWriteChunkBytes - 1) / kWriteChunkBytes; }

uint64_t ChunkChecksum(const uint8_t* data, uint64_t bytes, uint64_t chunk) {
  const uint64_t at = chunk * kWriteChunkBytes;
  return Checksum64(data + at, std::min<uint64_t>(kWriteChunkBytes, bytes - at), chunk);
}

}  // namespace

uint64_t PackedBytesChecksum(const uint8_t* data, uint64_t bytes, ThreadPool* pool) {
  std::vector<uint64_t> sums(ChunkCount(bytes));
  auto chunks = [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      sums[c] = ChunkChecksum(data, bytes, static_cast<uint64_t>(c));
    }
  };
  if (pool) {
    pool->ParallelFor(static_cast<int64_t>(sums.size()), chunks);
  } else {
    chunks(0, static_cast<int64_t>(sums.size()));
  }
  uint64_t sum = 0;
  for (uint64_t s : sums) sum += s;
  return sum;
}

const uint8_t* KeptPackedWeights::data() const { return map_->bytes().data() + kHeaderBytes; }

uint64_t KeptPackedWeights::size() const { return map_->bytes().size() - kHeaderBytes; }

bool KeptPackedWeights::ChecksumMatches(ThreadPool& pool) const {
  return PackedBytesChecksum(data(), size(), &pool) == checksum_;
}

std::string PackedWeightsKey(const PackedWeightsKeyFields& f) {
  char layout[17];
  std::snprintf(layout, sizeof(layout), "%016" PRIx64, f.layout);
  return StrCat("gguf ", f.file.device, ":", f.file.inode, " size ", f.file.size, " modified ",
                f.file.modified_ns, " changed ", f.file.changed_ns, " | layers ", f.first_layer,
                "-", f.last_layer, " | kernels ", f.kernels, " | layout ", f.layout_version, " ",
                layout, " | build ", f.build);
}

std::string PackedWeightCache::PathFor(const std::string& key) const {
  return dir_ + "/" + kPrefix + Fnv1a().Mix(key).Hex() + kSuffix;
}

std::unique_ptr<KeptPackedWeights> PackedWeightCache::Open(const std::string& key,
                                                           uint64_t bytes) const {
  if (!enabled()) return nullptr;
  const std::string path = PathFor(key);
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::symlink_status(path, ec))) return nullptr;
  try {
    auto map = std::make_unique<MappedFile>(path, FollowLinks::kNo);
    CheckOwnFile(map->identity());
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
      Fail("it was packed under another key");
    if (data_bytes != bytes || file.size() - kHeaderBytes != bytes)
      Fail("it holds ", file.size() - kHeaderBytes, " packed bytes, not ", bytes);
    // Marks it used: the budget removes the least recently used files first.
    ::utimensat(AT_FDCWD, path.c_str(), nullptr, AT_SYMLINK_NOFOLLOW);
    return std::make_unique<KeptPackedWeights>(std::move(map),
                                               ReadField<uint64_t>(file.data() + kChecksumAt));
  } catch (const std::exception& e) {
    Log(LogLevel::kWarn, "ignoring the packed weights '", path, "' (", e.what(),
        "); they will be packed again");
    return nullptr;
  }
}

bool PackedWeightCache::Store(const std::string& key, const uint8_t* data, uint64_t bytes) const {
  return PackedWeightWriter(*this, key, data, bytes, /*background=*/false).Finish();
}

void PackedWeightCache::Evict(const std::string& keep) const {
  using Clock = std::filesystem::file_time_type::clock;
  std::vector<std::tuple<std::filesystem::file_time_type, uint64_t, std::filesystem::path>> kept;
  uint64_t total = 0;
  std::error_code walk;  // ends the walk; each entry's own failures only skip the entry
  for (auto it = std::filesystem::directory_iterator(dir_, walk);
       !walk && it != std::filesystem::directory_iterator(); it.increment(walk)) {
    const std::filesystem::directory_entry& entry = *it;
    const std::string name = entry.path().filename().string();
    // Kept files and temporaries only: a link (planted, pointing anywhere) counts for nothing.
    std::error_code ec;
    if (!name.starts_with(kPrefix) || !std::filesystem::is_regular_file(entry.symlink_status(ec)) ||
        ec)
      continue;
    const uint64_t size = entry.file_size(ec);
    if (ec) continue;
    const std::filesystem::file_time_type used = entry.last_write_time(ec);
    if (ec) continue;
    if (name.ends_with(".partial")) {
      // Another process's write under way counts against the budget; one killed long ago goes.
      if (used < Clock::now() - kPartialAbandonedAfter) {
        std::filesystem::remove(entry.path(), ec);
      } else {
        total += size;
      }
      continue;
    }
    if (!name.ends_with(kSuffix)) continue;
    total += size;
    if (entry.path() != keep) kept.emplace_back(used, size, entry.path());
  }
  std::sort(kept.begin(), kept.end());
  for (const auto& [when, size, path] : kept) {
    if (total <= budget_bytes_) break;
    if (std::error_code ec; std::filesystem::remove(path, ec)) {
      total -= size;
      Log(LogLevel::kDebug, "packed weights: removed '", path.string(),
          "', the least recently used, to stay within ", budget_bytes_, " bytes");
    }
  }
}

PackedWeightWriter::PackedWeightWriter(PackedWeightCache cache, std::string key,
                                       const uint8_t* data, uint64_t bytes, bool background)
    : cache_(std::move(cache)), path_(cache_.PathFor(key)), data_(data), bytes_(bytes) {
  if (!cache_.enabled()) return;
  if (bytes > PackedWeightCache::kMaxFileBytes || bytes + kHeaderBytes > cache_.budget_bytes() ||
      key.size() > kHeaderBytes - kHeaderFixedBytes) {
    Log(LogLevel::kDebug, "packed weights: not kept (", bytes, " bytes, a key of ", key.size(),
        ")");
    return;
  }
  try {
    std::error_code ec;
    std::filesystem::create_directories(cache_.directory(), ec);
    std::vector<uint8_t> header(kHeaderBytes, 0);
    const auto key_bytes = static_cast<uint32_t>(key.size());
    std::memcpy(header.data(), kMagic, sizeof(kMagic));
    std::memcpy(header.data() + 8, &kFormatVersion, 4);
    std::memcpy(header.data() + 12, &key_bytes, 4);
    std::memcpy(header.data() + 16, &bytes, 8);
    std::memcpy(header.data() + kHeaderFixedBytes, key.data(), key.size());
    file_.emplace(path_, "packed weights");
    file_->WriteAt(header.data(), header.size(), 0);
  } catch (const std::exception& e) {
    Log(LogLevel::kDebug, "packed weights: not kept: ", e.what());
    file_.reset();
    return;
  }
  if (!background) return;
  try {
    thread_ = std::thread([this] {
      const sched_param idle{};
      ::pthread_setschedparam(::pthread_self(), SCHED_IDLE, &idle);
      WriteChunks();
    });
  } catch (const std::system_error& e) {  // no thread to be had: Finish writes it all
    Log(LogLevel::kDebug, "packed weights: written at the end (", e.what(), ")");
  }
}

void PackedWeightWriter::WriteChunks() {
  const uint64_t chunks = ChunkCount(bytes_);
  for (;;) {
    const uint64_t chunk = next_chunk_.fetch_add(1);
    if (chunk >= chunks) return;
    const uint64_t at = chunk * kWriteChunkBytes;
    file_->WriteAt(data_ + at, std::min<uint64_t>(kWriteChunkBytes, bytes_ - at),
                   kHeaderBytes + at);
    checksum_.fetch_add(ChunkChecksum(data_, bytes_, chunk));
    // Whoever writes the last chunk keeps the file: at once, not when the model is closed (a
    // server's would otherwise wait until it stops). Every chunk's checksum was added before its
    // count (fetch_add orders them), so the sum is whole here.
    if (chunks_written_.fetch_add(1) + 1 == chunks) Commit();
  }
}

void PackedWeightWriter::Commit() {
  try {
    const uint64_t checksum = checksum_.load();
    file_->WriteAt(&checksum, sizeof(checksum), kChecksumAt);
    // On the disk before it is renamed into place: a crash must not leave a whole-sized file with
    // unwritten (zero) blocks, which the checks of a kept file (its size, header, and every
    // matrix's first and last group) would not all see.
    file_->Commit(/*durable=*/true);
    kept_ = true;
    cache_.Evict(path_);
  } catch (const std::exception& e) {
    Log(LogLevel::kDebug, "packed weights: not kept: ", e.what());
  }
}

void PackedWeightWriter::Abandon() {
  if (finished_) return;
  finished_ = true;
  if (!file_) return;
  // Every chunk claimed: the thread returns after the one it is writing.
  next_chunk_.store(std::numeric_limits<uint64_t>::max() / 2);
  if (thread_.joinable()) thread_.join();
  file_.reset();  // not committed: its temporary is removed
}

bool PackedWeightWriter::Finish() {
  if (finished_) return kept_;
  finished_ = true;
  if (!file_) return false;
  WriteChunks();
  if (thread_.joinable()) thread_.join();
  file_.reset();  // a file not committed (a failed write) removes its temporary
  return kept_;
}

}  // namespace grove
