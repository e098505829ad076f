#include "speculate/suffix_store.h"

#include <mutex>

namespace grove {

SuffixStore::SuffixStore(const SuffixStoreOptions& options)
    : options_(options), index_(options.max_depth) {}

std::size_t SuffixStore::BytesLocked() const {
  return static_cast<std::size_t>(index_.live_nodes()) * SuffixIndex::kBytesPerNode +
         tokens_ * sizeof(int32_t);
}

std::size_t SuffixStore::bytes() const {
  std::shared_lock lock(mutex_);
  return BytesLocked();
}

int64_t SuffixStore::documents() const {
  std::shared_lock lock(mutex_);
  return static_cast<int64_t>(documents_.size());
}

void SuffixStore::Add(std::span<const int32_t> document) {
  // At most max_depth new nodes per token: the longest tail that fits an empty store.
  const std::size_t per_token =
      SuffixIndex::kBytesPerNode * static_cast<std::size_t>(options_.max_depth) + sizeof(int32_t);
  const std::size_t fits = options_.max_bytes / per_token;
  if (document.size() > fits) document = document.last(fits);
  if (document.empty()) return;
  std::unique_lock lock(mutex_);
  index_.Add(document);
  documents_.emplace_back(document.begin(), document.end());
  tokens_ += document.size();
  while (BytesLocked() > options_.max_bytes && documents_.size() > 1) {
    index_.Remove(documents_.front());
    tokens_ -= documents_.front().size();
    documents_.pop_front();
  }
}

}  // namespace grove
