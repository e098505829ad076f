#include "speculate/suffix_store.h"

#include <bit>
#include <cstring>
#include <mutex>

#include "base/error.h"
#include "base/replacing_file.h"
#include "base/text_file.h"

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

void SuffixStore::Clear() {
  std::unique_lock lock(mutex_);
  index_.Clear();
  documents_.clear();
  tokens_ = 0;
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

namespace {

// The file: kMagic, then little-endian u64 vocabulary fingerprint, u64 document count, and per
// document a u32 length and that many i32 tokens.
constexpr char kMagic[8] = {'G', 'R', 'V', 'S', 'U', 'F', 'X', '1'};

template <class T>
void Put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

template <class T>
bool Take(std::string_view& in, T* v) {
  if (in.size() < sizeof(T)) return false;
  std::memcpy(v, in.data(), sizeof(T));
  in.remove_prefix(sizeof(T));
  return true;
}

}  // namespace

void SuffixStore::Save(const std::string& path, uint64_t vocabulary) const {
  static_assert(std::endian::native == std::endian::little, "the store file is little-endian");
  std::string bytes(kMagic, sizeof(kMagic));
  {
    std::shared_lock lock(mutex_);
    Put<uint64_t>(bytes, vocabulary);
    Put<uint64_t>(bytes, documents_.size());
    for (const std::vector<int32_t>& d : documents_) {
      Put<uint32_t>(bytes, static_cast<uint32_t>(d.size()));
      bytes.append(reinterpret_cast<const char*>(d.data()), d.size() * sizeof(int32_t));
    }
  }
  ReplaceTextFile(path, bytes, "suffix store");
}

int64_t SuffixStore::Load(const std::string& path, uint64_t vocabulary, int32_t n_vocab) {
  const std::string bytes = ReadTextFile(path, "suffix store");
  std::string_view in(bytes);
  const auto damaged = [&](const char* why) {
    Fail("suffix store ", path, ": ", why, " (it is ignored, and rewritten when the server stops)");
  };
  if (in.size() < sizeof(kMagic) || std::memcmp(in.data(), kMagic, sizeof(kMagic)) != 0)
    damaged("not a grove suffix store");
  in.remove_prefix(sizeof(kMagic));
  uint64_t file_vocabulary = 0, count = 0;
  if (!Take(in, &file_vocabulary) || !Take(in, &count)) damaged("truncated header");
  if (file_vocabulary != vocabulary) damaged("made with another vocabulary");
  std::vector<std::vector<int32_t>> documents;
  for (uint64_t i = 0; i < count; ++i) {
    uint32_t length = 0;
    if (!Take(in, &length) || in.size() < static_cast<std::size_t>(length) * sizeof(int32_t))
      damaged("truncated");
    std::vector<int32_t>& d = documents.emplace_back(length);
    std::memcpy(d.data(), in.data(), d.size() * sizeof(int32_t));
    in.remove_prefix(d.size() * sizeof(int32_t));
    for (int32_t t : d) {
      if (t < 0 || t >= n_vocab) damaged("a token id outside the vocabulary");
    }
  }
  if (!in.empty()) damaged("bytes after the last document");
  for (const std::vector<int32_t>& d : documents) Add(d);
  return static_cast<int64_t>(documents.size());
}

}  // namespace grove
