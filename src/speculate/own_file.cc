#include "speculate/own_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"

namespace grove {

OwnFileState InspectOwnFile(const std::string& path, std::string_view magic) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return OwnFileState::kAbsent;
    Fail("cannot look at '", path, "': ", std::strerror(errno));
  }
  if (S_ISLNK(st.st_mode)) return OwnFileState::kLink;
  if (!S_ISREG(st.st_mode)) return OwnFileState::kNotRegular;
  if (magic.empty()) return OwnFileState::kOwn;
  // O_NOFOLLOW and O_NONBLOCK: a link or FIFO put there since the lstat is neither followed nor
  // waited on; fstat says what was opened.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ELOOP) return OwnFileState::kLink;
    Fail("cannot read '", path, "': ", std::strerror(errno));
  }
  std::string head(magic.size(), '\0');
  std::size_t got = 0;
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  while (regular && got < head.size()) {
    const ssize_t n = ::read(fd, head.data() + got, head.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  if (!regular) return OwnFileState::kNotRegular;
  return got == head.size() && head == magic ? OwnFileState::kOwn : OwnFileState::kForeign;
}

void CheckReplaceableOwnFile(const std::string& path, std::string_view what,
                             std::string_view magic) {
  constexpr const char* kLeft = "; it is left as it is (remove it, or name another file)";
  switch (InspectOwnFile(path, magic)) {
    case OwnFileState::kAbsent:
    case OwnFileState::kOwn:
      return;
    case OwnFileState::kForeign:
      Fail("will not replace '", path, "' with a ", what, ": it is not a ", what,
           " (it does not begin with one's magic bytes)", kLeft);
    case OwnFileState::kLink:
      Fail("will not replace '", path, "' with a ", what,
           ": it is a symbolic link (name the file itself)", kLeft);
    case OwnFileState::kNotRegular:
      Fail("will not replace '", path, "' with a ", what,
           ": it is not a regular file (a directory, FIFO or device)", kLeft);
  }
}

}  // namespace grove
