#include "base/text_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "base/error.h"

namespace grove {
namespace {

// The file-creation mask, read without changing it (umask(2) can only set it, and setting it even
// for a moment races with other threads creating files): Linux reports it in /proc/self/status.
mode_t ProcessUmask() {
  const std::string status = [] {
    try {
      return ReadTextFile("/proc/self/status", "process status");
    } catch (const Error&) {
      return std::string();
    }
  }();
  const std::size_t at = status.find("Umask:");
  if (at == std::string::npos) return 022;
  return static_cast<mode_t>(std::strtoul(status.c_str() + at + 6, nullptr, 8));
}

}  // namespace

std::string ReadTextFile(const std::string& path, std::string_view what) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer; on a regular file it
  // changes nothing.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) Fail("cannot read ", what, " '", path, "': ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    Fail("cannot read ", what, " '", path,
         "': ", S_ISDIR(st.st_mode) ? "it is a directory" : "it is not a regular file");
  }
  std::string text;
  text.reserve(static_cast<std::size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      Fail("cannot read ", what, " '", path, "': ", std::strerror(err));
    }
    text.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return text;
}

void ReplaceTextFile(const std::string& path, std::string_view text, std::string_view what) {
  std::string tmp = path + ".XXXXXX.partial";
  // mkstemps: O_CREAT | O_EXCL on a fresh name, so a link or file planted there is never opened.
  const int fd = ::mkstemps(tmp.data(), static_cast<int>(sizeof(".partial") - 1));
  if (fd < 0) Fail("cannot write ", what, " '", path, "': ", std::strerror(errno));
  bool ok = ::fchmod(fd, 0644 & ~ProcessUmask()) == 0;
  for (std::size_t done = 0; ok && done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<std::size_t>(n);
  }
  const int saved = ok ? 0 : errno;
  if (::close(fd) != 0) ok = false;
  if (ok && std::rename(tmp.c_str(), path.c_str()) == 0) return;
  const int error = saved != 0 ? saved : errno;
  ::unlink(tmp.c_str());
  Fail("cannot write ", what, " '", path, "': ", std::strerror(error));
}

}  // namespace grove
