#include "speculate/suffix_store.h"

#include <bit>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "base/error.h"
#include "base/replacing_file.h"
#include "base/text_file.h"
#include "speculate/own_file.h"

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
constexpr std::string_view kMagicBytes(kMagic, sizeof(kMagic));
constexpr const char* kWhat = "suffix store";

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

void SuffixStore::CheckReplaceable(const std::string& path) {
  CheckReplaceableOwnFile(path, kWhat, kMagicBytes);
}

void SuffixStore::Save(const std::string& path, uint64_t vocabulary) const {
  static_assert(std::endian::native == std::endian::little, "the store file is little-endian");
  CheckReplaceable(path);
  std::string bytes(kMagicBytes);
  {
    std::shared_lock lock(mutex_);
    Put<uint64_t>(bytes, vocabulary);
    Put<uint64_t>(bytes, documents_.size());
    for (const std::vector<int32_t>& d : documents_) {
      Put<uint32_t>(bytes, static_cast<uint32_t>(d.size()));
      bytes.append(reinterpret_cast<const char*>(d.data()), d.size() * sizeof(int32_t));
    }
  }
  ReplaceTextFile(path, bytes, kWhat);
}

int64_t SuffixStore::Load(const std::string& path, uint64_t vocabulary, int32_t n_vocab) {
  // Another file (a draft model given by mistake) is neither read whole nor replaced at exit.
  if (InspectOwnFile(path, kMagicBytes) == OwnFileState::kForeign) {
    Fail("suffix store '", path,
         "': not a grove suffix store (it is ignored, and left as it is: nothing is saved over "
         "it)");
  }
  const auto damaged = [&](const auto&... why) {
    Fail("suffix store '", path, "': ", why...,
         " (it is ignored, and rewritten when the server stops)");
  };
  // Each token of a document costs the store more than the 8 bytes (length and id) it takes in
  // the file at most, so a store within max_bytes never writes a larger file.
  const std::uintmax_t max_file = sizeof(kMagic) + 16 + 2 * options_.max_bytes;
  std::error_code ec;
  if (const std::uintmax_t size = std::filesystem::file_size(path, ec); !ec && size > max_file)
    damaged(size, " bytes, more than the ", max_file, " a store of this budget writes");
  const std::string bytes = ReadTextFile(path, kWhat);
  std::string_view in(bytes);
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
