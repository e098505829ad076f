// Read-only memory map of a whole file. Model weights are used in place from the map, so loading a
// model costs page-table set-up, not a copy, and the page cache is shared between processes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace grove {

// Which file a map holds, as the file system tells one file (and one version of it) from another:
// a file replaced has another inode, one rewritten in place another status-change time (which,
// unlike the modification time, no user can set back: `cp -p` or `rsync -t` onto a file keep
// its size and modification time).
struct FileIdentity {
  uint64_t device = 0;
  uint64_t inode = 0;
  uint64_t size = 0;
  int64_t modified_ns = 0;
  int64_t changed_ns = 0;
  // Who owns it and its permission bits, for callers that read only their own files.
  uint32_t owner = 0;
  uint32_t mode = 0;
};

// How MappedFile opens a path.
enum class FollowLinks { kYes, kNo };

// What backs the bytes: the file's pages (shared with the page cache and every process that maps
// it), or a copy read into this process's own memory at open, for a file that may be rewritten in
// place while it is in use (a served drafter, replaced by a training run): a mapped file cut short
// under a reader kills it (SIGBUS) and one rewritten changes what it reads; a copy keeps the bytes
// it was opened with.
enum class FileBacking { kMapped, kCopied };

class MappedFile {
 public:
  // Throws grove::Error naming the path on failure (missing, unreadable, a directory, ...; with
  // FollowLinks::kNo, a symbolic link).
  explicit MappedFile(const std::string& path, FollowLinks follow = FollowLinks::kYes,
                      FileBacking backing = FileBacking::kMapped);
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const uint8_t> bytes() const { return {data_, size_}; }

  // Drops this process's mappings of the whole pages inside [p, p + n) (madvise MADV_DONTNEED), for
  // data that was copied out and will not be read again: resident memory falls, the page cache
  // keeps the file, and a later read would simply fault the pages back in (of a kCopied file: read
  // zeros). p must lie in the map.
  void ReleasePages(const void* p, std::size_t n) const;
  const std::string& path() const { return path_; }
  // The file as it was when opened (fstat of the descriptor mapped).
  const FileIdentity& identity() const { return identity_; }

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
  FileIdentity identity_;
};

}  // namespace grove
