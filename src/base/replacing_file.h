// Writing a file that replaces `path` only when it is complete: the bytes go to a new file of a
// unique name beside it (`path.XXXXXX.partial`, created with O_EXCL, so no file or link that
// someone put there is ever opened, followed or deleted), which Commit() renames over `path`. Until
// then `path` is untouched; a ReplacingFile destroyed without Commit() removes its temporary file.
// The file gets mode 0644 less the umask, as a file made by open(2) would.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace grove {

class ReplacingFile {
 public:
  // `what` names the file in errors ("verify cost cache", "GGUF output"). Throws grove::Error.
  ReplacingFile(std::string path, std::string_view what);
  ReplacingFile(const ReplacingFile&) = delete;
  ReplacingFile& operator=(const ReplacingFile&) = delete;
  ~ReplacingFile();

  const std::string& path() const { return path_; }
  const std::string& temporary_path() const { return tmp_; }
  // Buffered writes; a failure is remembered and reported by Commit().
  void Write(const void* data, std::size_t n);
  void Write(std::string_view text) { Write(text.data(), text.size()); }
  // Writes at a byte offset, unbuffered (pwrite): threads may write distinct ranges at once. Not
  // to be mixed with Write. A failure is remembered and reported by Commit().
  void WriteAt(const void* data, std::size_t n, uint64_t offset);
  // Flushes, closes and renames over path(); with `durable`, first waits until the data is on the
  // disk (fdatasync), so that a crash cannot leave path() whole-sized with blocks never written.
  // Throws grove::Error naming what failed (the temporary file is then gone).
  void Commit(bool durable = false);

 private:
  std::string path_;
  std::string what_;
  std::string tmp_;
  std::FILE* file_ = nullptr;
  std::atomic<int> error_{0};  // errno of the first failed write
};

// The whole of `text` as the new contents of `path` (a ReplacingFile).
void ReplaceTextFile(const std::string& path, std::string_view text, std::string_view what);

}  // namespace grove
