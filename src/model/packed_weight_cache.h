// Packed matrices kept between runs. Packing a model's matrices into row groups (quant/packed.h)
// reads the whole file, writes as many bytes again into fresh memory that the kernel first zeroes,
// and checks every block's scale: 15-17 of the 19 ms a run of the bundled 45 MB target spent
// loading, paid by every `grove run` however few tokens it makes. A kept file is mapped instead:
// no packing, no zeroing, no check, and processes that run the same model share its pages.
//
// A kept file belongs to one version of one model file (device, inode, size and modification time:
// a file rewritten or replaced is packed again), one set of layers, one kernel level and one grove
// version. The caller also checks the first and last group of every matrix against a fresh pack of
// the file's rows (PackedMatrixOf), so a layout changed without a version change, or a file
// changed in place without a new modification time, is caught where it shows. Written whole under
// a temporary name and renamed (ReplacingFile), so no run maps a half-written file.
//
// Costs, stated: the disk space of the packed bytes (at most kMaxFileBytes a file, kBudgetBytes
// together, the least recently used removed first), and pages of 4 KiB where the packed buffer had
// huge ones (about 3% of a decoding step's time on the bundled target, against 15 ms of load).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "io/mapped_file.h"

namespace grove {

// A kept file, mapped read-only: `bytes` of packed matrices at data().
class KeptPackedWeights {
 public:
  explicit KeptPackedWeights(std::unique_ptr<MappedFile> map) : map_(std::move(map)) {}
  const uint8_t* data() const;
  uint64_t size() const;
  const std::string& path() const { return map_->path(); }

 private:
  std::unique_ptr<MappedFile> map_;
};

class PackedWeightCache {
 public:
  static constexpr uint64_t kBudgetBytes = uint64_t{4} << 30;
  static constexpr uint64_t kMaxFileBytes = uint64_t{2} << 30;

  // dir "": a cache that keeps nothing (see UserCacheDirectory). budget_bytes: what the kept files
  // may hold together (tests make it small).
  explicit PackedWeightCache(std::string dir, uint64_t budget_bytes = kBudgetBytes)
      : dir_(std::move(dir)), budget_bytes_(budget_bytes) {}

  bool enabled() const { return !dir_.empty(); }
  std::string PathFor(const std::string& key) const;

  // The file kept for key when it holds exactly `bytes` packed bytes for that key; null when there
  // is none (a damaged or foreign file: one warning, and Store replaces it). Marks the file as
  // used, for the budget's order.
  std::unique_ptr<KeptPackedWeights> Open(const std::string& key, uint64_t bytes) const;
  // Keeps `bytes` at data for key, then removes the least recently used other files while the
  // kept files exceed the budget. Never throws: a directory that cannot be made or written, or a
  // file larger than kMaxFileBytes, is a debug line and nothing kept.
  void Store(const std::string& key, const uint8_t* data, uint64_t bytes) const;

 private:
  void Evict(const std::string& keep) const;

  std::string dir_;
  uint64_t budget_bytes_;
};

}  // namespace grove
