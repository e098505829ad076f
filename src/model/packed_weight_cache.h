// Packed matrices kept between runs. Packing a model's matrices into row groups (quant/packed.h)
// reads the whole file, writes as many bytes again into fresh memory that the kernel first zeroes,
// and checks every block's scale: 13 of the 17 ms a run of the bundled 45 MB target spent loading,
// paid by every `grove run` however few tokens it makes. A kept file is mapped instead: no
// packing, no zeroing, no check, and processes that run the same model share its pages.
//
// A kept file belongs to one version of one model file (device, inode, size, modification and
// status-change times: a file rewritten or replaced is packed again), one set of layers, one
// kernel level, one packed layout (kPackedLayoutVersion) and one build of grove (its build ID).
// The caller also checks the first and last group of every matrix against a fresh pack of the
// file's rows (PackedMatrixOf). Kept files are written whole under a temporary name and renamed
// (ReplacingFile), so no run maps a half-written file, and only files that are this user's own,
// not links, and writable by no one else are read.
//
// Costs, stated: the disk space of the packed bytes (at most kMaxFileBytes a file, kBudgetBytes
// together, the least recently used removed first); pages of 4 KiB where the packed buffer had
// huge ones (decoding the bundled target measured no slower); and the first run's write, done
// beside it where a core is free (PackedWeightWriter).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "base/replacing_file.h"
#include "io/mapped_file.h"

namespace grove {

class ThreadPool;

// What a kept file is keyed by: every input a different pack would follow from. The file's
// owner and mode are not among them (they decide whether it is read, not what it holds).
struct PackedWeightsKeyFields {
  FileIdentity file;  // device, inode, size, modification and status-change times
  int32_t first_layer = 0;
  int32_t last_layer = 0;
  std::string_view kernels;    // the active kernel level's name
  int32_t layout_version = 0;  // quant/packed.h's kPackedLayoutVersion
  uint64_t layout = 0;         // a hash of every packed matrix's offset, type and shape
  std::string_view build;      // the executable's build ID
};
std::string PackedWeightsKey(const PackedWeightsKeyFields& fields);

// A kept file, mapped read-only: size() packed bytes at data(), 4096-byte aligned.
class KeptPackedWeights {
 public:
  KeptPackedWeights(std::unique_ptr<MappedFile> map, uint64_t checksum)
      : map_(std::move(map)), checksum_(checksum) {}
  const uint8_t* data() const;
  uint64_t size() const;
  const std::string& path() const { return map_->path(); }
  // Whether the packed bytes are those the writer checksummed (PackedBytesChecksum): a bit
  // flipped or a block zeroed anywhere in the file, which the checks of its header and of every
  // matrix's first and last group do not see, changes it. Reads every byte, split over the pool
  // (about 13 GB/s a core here: 3.5 ms for the bundled 45 MB target on one).
  bool ChecksumMatches(ThreadPool& pool) const;

 private:
  std::unique_ptr<MappedFile> map_;
  uint64_t checksum_;
};

// The checksum a kept file's header carries for `bytes` packed bytes: the sum of each 1 MiB chunk's
// Checksum64 seeded with the chunk's index, so that chunks written in any order, by any thread,
// add up to it, and chunks swapped do not.
uint64_t PackedBytesChecksum(const uint8_t* data, uint64_t bytes, ThreadPool* pool = nullptr);

class PackedWeightCache {
 public:
  static constexpr uint64_t kBudgetBytes = uint64_t{4} << 30;
  static constexpr uint64_t kMaxFileBytes = uint64_t{1} << 30;
  // A kept file's header (magic, version, key) fills its first kHeaderBytes; the packed bytes
  // follow.
  static constexpr uint64_t kHeaderBytes = 4096;

  // dir "": a cache that keeps nothing (see UserCacheDirectory). budget_bytes: what the kept files
  // may hold together (tests make it small).
  explicit PackedWeightCache(std::string dir, uint64_t budget_bytes = kBudgetBytes)
      : dir_(std::move(dir)), budget_bytes_(budget_bytes) {}

  bool enabled() const { return !dir_.empty(); }
  const std::string& directory() const { return dir_; }
  uint64_t budget_bytes() const { return budget_bytes_; }
  std::string PathFor(const std::string& key) const;

  // The file kept for key when it holds exactly `bytes` packed bytes for that key; null when there
  // is none (a damaged, foreign or unsafe file: one warning, and Store replaces it). Marks the
  // file as used, for the budget's order.
  std::unique_ptr<KeptPackedWeights> Open(const std::string& key, uint64_t bytes) const;
  // Keeps `bytes` at data for key (a PackedWeightWriter that writes it all here). Returns whether
  // the file was kept; never throws: a directory that cannot be made or written, or a file larger
  // than kMaxFileBytes, is a debug line and nothing kept.
  bool Store(const std::string& key, const uint8_t* data, uint64_t bytes) const;
  // Removes the least recently used kept files but `keep` while the kept files, and temporaries
  // being written, exceed the budget; and temporaries that writers killed long ago left.
  void Evict(const std::string& keep) const;

 private:
  std::string dir_;
  uint64_t budget_bytes_;
};

// Keeping packed weights beside the model's work: a first run of the bundled target wrote 45 MB,
// 10-25 ms, most of a short run's decoding. A thread at the lowest CPU priority (SCHED_IDLE: it
// takes no core a forward wants) writes the file in chunks; whoever writes the last chunk makes it
// durable and renames it into place. Finish writes the chunks the thread has not taken, at the
// caller's priority, and waits only for the chunk it is writing (an unprivileged thread cannot
// raise its priority again, and an idle thread may wait long on a busy machine). Never throws: a
// failure is a debug line and nothing kept.
class PackedWeightWriter {
 public:
  // data must outlive the writer. background false: nothing is written before Finish.
  PackedWeightWriter(PackedWeightCache cache, std::string key, const uint8_t* data, uint64_t bytes,
                     bool background = true);
  PackedWeightWriter(const PackedWeightWriter&) = delete;
  PackedWeightWriter& operator=(const PackedWeightWriter&) = delete;
  ~PackedWeightWriter() { Finish(); }

  // Completes the write; returns whether the file was kept.
  bool Finish();
  // Stops writing after the chunk under way and keeps nothing (unless that chunk was the last):
  // for a model whose owner will not load it again soon, so that closing it does not write what
  // is left on the closing thread (a server's scheduler, after a drafter swap). Finish then writes
  // nothing more.
  void Abandon();

 private:
  void WriteChunks();
  void Commit();  // by the writer of the last chunk

  PackedWeightCache cache_;
  std::string path_;
  const uint8_t* data_;
  uint64_t bytes_;
  std::optional<ReplacingFile> file_;        // empty: nothing to keep
  std::atomic<uint64_t> next_chunk_{0};      // the next chunk to claim
  std::atomic<uint64_t> chunks_written_{0};  // chunks on their way to the disk
  std::atomic<uint64_t> checksum_{0};        // of the chunks written (PackedBytesChecksum)
  std::thread thread_;
  bool finished_ = false;
  bool kept_ = false;  // set by Commit; read by Finish after the thread has ended
};

}  // namespace grove
