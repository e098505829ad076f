#include "base/replacing_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "base/error.h"
#include "base/text_file.h"

namespace grove {
namespace {

// The file-creation mask, read without changing it (umask(2) can only set it, and setting it even
// for a moment races with other threads creating files): Linux reports it in /proc/self/status.
mode_t ProcessUmask() {
  std::string status;
  try {
    status = ReadTextFile("/proc/self/status", "process status");
  } catch (const Error&) {
    return 022;
  }
  const std::size_t at = status.find("Umask:");
  if (at == std::string::npos) return 022;
  return static_cast<mode_t>(std::strtoul(status.c_str() + at + 6, nullptr, 8));
}

}  // namespace

ReplacingFile::ReplacingFile(std::string path, std::string_view what)
    : path_(std::move(path)), what_(what), tmp_(path_ + ".XXXXXX.partial") {
  // mkstemps: O_CREAT | O_EXCL on a fresh name (mode 0600), so nothing planted there is opened.
  const int fd = ::mkstemps(tmp_.data(), static_cast<int>(std::strlen(".partial")));
  if (fd < 0) Fail("cannot write ", what_, " '", path_, "': ", std::strerror(errno));
  if (::fchmod(fd, 0644 & ~ProcessUmask()) != 0 || (file_ = ::fdopen(fd, "wb")) == nullptr) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmp_.c_str());
    Fail("cannot write ", what_, " '", path_, "': ", std::strerror(err));
  }
}

ReplacingFile::~ReplacingFile() {
  if (file_ != nullptr) {
    std::fclose(file_);
    ::unlink(tmp_.c_str());
  }
}

void ReplacingFile::Write(const void* data, std::size_t n) {
  if (error_ == 0 && n > 0 && std::fwrite(data, 1, n, file_) != n)
    error_ = errno != 0 ? errno : EIO;
}

void ReplacingFile::WriteAt(const void* data, std::size_t n, uint64_t offset) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0 && error_ == 0) {
    const ssize_t written = ::pwrite(::fileno(file_), p, n, static_cast<off_t>(offset));
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) {
      int expected = 0;
      error_.compare_exchange_strong(expected, written < 0 ? errno : EIO);
      return;
    }
    p += written;
    n -= static_cast<std::size_t>(written);
    offset += static_cast<uint64_t>(written);
  }
}

void ReplacingFile::Commit(bool durable) {
  GROVE_CHECK(file_ != nullptr, "replacing file '", path_, "': committed twice");
  if (error_ == 0 && std::fflush(file_) != 0) error_ = errno;
  if (error_ == 0 && durable && ::fdatasync(::fileno(file_)) != 0) error_ = errno;
  if (std::fclose(file_) != 0 && error_ == 0) error_ = errno;
  file_ = nullptr;
  if (error_ == 0 && std::rename(tmp_.c_str(), path_.c_str()) != 0) error_ = errno;
  if (error_ != 0) {
    ::unlink(tmp_.c_str());
    Fail("cannot write ", what_, " '", path_, "': ", std::strerror(error_.load()));
  }
}

void ReplaceTextFile(const std::string& path, std::string_view text, std::string_view what) {
  ReplacingFile file(path, what);
  file.Write(text);
  file.Commit();
}

}  // namespace grove
