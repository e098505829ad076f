// What the engine has produced, for the suffix drafters of every sequence to draft from
// (speculate/suffix_drafter.h): each finished sequence's output, with the end of its prompt that
// led into it, in one SuffixIndex. Memory is bounded: the oldest outputs are evicted first.
// Drafters of concurrent sequences read it while another sequence's output is added: reads share a
// lock, adding takes it alone (once per finished sequence, never per step).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <shared_mutex>
#include <span>
#include <string>
#include <vector>

#include "speculate/suffix_index.h"

namespace grove {

struct SuffixStoreOptions {
  int32_t max_depth = 16;                          // the longest substring counted (SuffixIndex)
  std::size_t max_bytes = std::size_t{128} << 20;  // evict the oldest outputs beyond this
};

class SuffixStore {
 public:
  explicit SuffixStore(const SuffixStoreOptions& options = {});

  // Keeps `document`, evicting the oldest documents while the store is over its budget; of a
  // document the budget cannot hold alone, the tail it can hold.
  void Add(std::span<const int32_t> document);
  // Forgets every document (a benchmark's repetitions each start from what a fresh server has).
  void Clear();

  // Runs f(const SuffixIndex&) with the store held for reading, and returns what f returns.
  template <class F>
  auto Read(F&& f) const {
    std::shared_lock lock(mutex_);
    return f(index_);
  }

  // Keeps the documents in `path` (replaced only once complete, base/replacing_file.h), oldest
  // first, under `vocabulary` (a fingerprint of the tokenizer the tokens belong to). Throws
  // grove::Error naming the file and the reason, writing nothing, unless CheckReplaceable allows
  // the path.
  void Save(const std::string& path, uint64_t vocabulary) const;
  // Fails (grove::Error naming the file) unless `path` is absent or a store (it begins with a
  // store's magic): a store never replaces another file, a link, a FIFO or a device
  // (speculate/own_file.h). A server checks it at start, before it serves for hours.
  static void CheckReplaceable(const std::string& path);
  // Adds the documents `path` holds (as Add, oldest first) and returns how many. Throws
  // grove::Error, adding nothing, when the file is not a store (read no further than its first
  // bytes), is larger than a store of this budget writes, is damaged or truncated, or holds
  // tokens of another vocabulary (another fingerprint, or ids of n_vocab or more).
  int64_t Load(const std::string& path, uint64_t vocabulary, int32_t n_vocab);

  int32_t max_depth() const { return options_.max_depth; }
  int64_t documents() const;
  // Estimated bytes held (SuffixIndex::kBytesPerNode per node, and the documents' tokens kept
  // for eviction).
  std::size_t bytes() const;

 private:
  std::size_t BytesLocked() const;

  SuffixStoreOptions options_;
  mutable std::shared_mutex mutex_;
  SuffixIndex index_;
  std::deque<std::vector<int32_t>> documents_;  // oldest first
  std::size_t tokens_ = 0;
};

}  // namespace grove
