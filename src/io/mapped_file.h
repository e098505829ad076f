// Read-only memory map of a whole file. Model weights are used in place from the map, so loading a
// model costs page-table set-up, not a copy, and the page cache is shared between processes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace grove {

class MappedFile {
 public:
  // Throws grove::Error naming the path on failure (missing, unreadable, a directory, ...).
  explicit MappedFile(const std::string& path);
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const uint8_t> bytes() const { return {data_, size_}; }

  // Drops this process's mappings of the whole pages inside [p, p + n) (madvise MADV_DONTNEED), for
  // data that was copied out and will not be read again: resident memory falls, the page cache
  // keeps the file, and a later read would simply fault the pages back in. p must lie in the map.
  void ReleasePages(const void* p, std::size_t n) const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace grove
