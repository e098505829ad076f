#include "output_path.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "base/error.h"
#include "train/corpus_files.h"

namespace grove::cli {
namespace {

namespace fs = std::filesystem;

const char* KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// The directory a new entry `path` would go in must exist and be writable.
void CheckParentWritable(const std::string& path, const char* what) {
  const fs::path parent = fs::path(path).parent_path();
  const std::string dir = parent.empty() ? "." : parent.string();
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0)
    Fail(what, " '", path, "': directory '", dir, "' does not exist");
  if (!S_ISDIR(st.st_mode)) Fail(what, " '", path, "': '", dir, "' is not a directory");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    Fail(what, " '", path, "': directory '", dir, "' is not writable");
}

// "immutable" or "append-only" when the file system marks `path` so, else nullptr (also where the
// file system has no such attributes).
const char* ProtectingAttribute(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return nullptr;
  int flags = 0;
  const bool known = ::ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0;
  ::close(fd);
  if (!known) return nullptr;
  if (flags & FS_IMMUTABLE_FL) return "immutable";
  if (flags & FS_APPEND_FL) return "append-only";
  return nullptr;
}

}  // namespace

void CheckOutputFile(const std::string& path, const char* what, const OutputRules& rules) {
  if (path.empty()) Fail(what, ": the output path is empty");
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode)) {
      Fail(what, " '", path, "' is ", KindOf(st.st_mode), "; give the path of a regular file");
    }
    std::error_code ec;
    for (const std::string& input : rules.inputs) {
      if (!input.empty() && fs::equivalent(input, path, ec)) {
        Fail(what, " '", path, "' is the input file '", input, "'; write to a new path");
      }
    }
    // Read-only by its mode bits (no write bit for anyone), not by access(2), which says yes to
    // root whatever the bits: a file its owner made read-only stays protected from root too.
    if ((st.st_mode & (S_IWUSR | S_IWGRP | S_IWOTH)) == 0 || ::access(path.c_str(), W_OK) != 0) {
      if (rules.force == nullptr) Fail(what, " '", path, "' is read-only");
      if (!*rules.force) Fail(what, " '", path, "' is read-only (--force replaces it)");
    }
    // An immutable or append-only file (chattr +i, +a) cannot be replaced even with --force:
    // renaming over it fails, which would only show after the work.
    if (const char* attribute = ProtectingAttribute(path)) {
      Fail(what, " '", path, "' is ", attribute, " (chattr); it cannot be replaced");
    }
  } else if (errno != ENOENT && errno != ENOTDIR) {  // ENOTDIR: the parent check names it
    Fail(what, " '", path, "': ", std::strerror(errno));
  }
  CheckParentWritable(path, what);
}

std::vector<std::string> CorpusFiles() {
  return {std::string(kCorpusTrainFile), std::string(kCorpusValidFile)};
}

std::vector<std::string> DrafterFiles(const std::string& drafter) {
  std::vector<std::string> files;
  for (std::size_t from = 0; from <= drafter.size();) {
    const std::size_t plus = std::min(drafter.find('+', from), drafter.size());
    files.push_back(drafter.substr(from, plus - from));
    from = plus + 1;
  }
  return files;
}

void CheckOutputDirectory(const std::string& path, const char* what,
                          const std::vector<std::string>& files, const OutputRules& rules) {
  if (path.empty()) Fail(what, ": the output directory is empty");
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) Fail(what, " '", path, "' exists and is not a directory");
    if (::access(path.c_str(), W_OK | X_OK) != 0)
      Fail(what, " '", path, "': directory is not writable");
    for (const std::string& file : files) {
      CheckOutputFile((fs::path(path) / file).string(), what, rules);
    }
    return;
  }
  // Missing: the nearest existing ancestor decides whether it can be created.
  fs::path ancestor = fs::path(path).lexically_normal();
  while (ancestor.has_relative_path() && ::stat(ancestor.c_str(), &st) != 0)
    ancestor = ancestor.parent_path();
  const std::string dir = ancestor.empty() ? "." : ancestor.string();
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    Fail(what, " '", path, "': '", dir, "' is not a directory");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    Fail(what, " '", path, "': directory '", dir, "' is not writable");
}

}  // namespace grove::cli
