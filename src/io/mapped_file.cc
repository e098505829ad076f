#include "io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"

namespace grove {

namespace {

// Reads the whole file at fd into fresh anonymous memory of `size` bytes.
void* ReadIntoMemory(int fd, std::size_t size, const std::string& path) {
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    Fail("cannot allocate ", size, " bytes for '", path, "': ", std::strerror(errno));
  auto* bytes = static_cast<uint8_t*>(p);
  for (std::size_t done = 0; done < size;) {
    const ssize_t n = ::pread(fd, bytes + done, size - done, static_cast<off_t>(done));
    if (n <= 0) {
      const int err = n < 0 ? errno : 0;
      ::munmap(p, size);
      Fail("cannot read '", path, "': ", err ? std::strerror(err) : "the file was cut short");
    }
    done += static_cast<std::size_t>(n);
  }
  ::mprotect(p, size, PROT_READ);
  return p;
}

}  // namespace

MappedFile::MappedFile(const std::string& path, FollowLinks follow, FileBacking backing)
    : path_(path) {
  // O_NONBLOCK: a FIFO would otherwise block the open until a writer comes; the check below
  // refuses it.
  const int no_follow = follow == FollowLinks::kNo ? O_NOFOLLOW : 0;
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY | no_follow);
  if (fd < 0) Fail("cannot open '", path, "': ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    Fail("cannot stat '", path, "': ", std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    Fail("'", path, "' is not a regular file");
  }
  size_ = static_cast<std::size_t>(st.st_size);
  identity_ = {.device = static_cast<uint64_t>(st.st_dev),
               .inode = static_cast<uint64_t>(st.st_ino),
               .size = static_cast<uint64_t>(st.st_size),
               .modified_ns = int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec,
               .changed_ns = int64_t{st.st_ctim.tv_sec} * 1000000000 + st.st_ctim.tv_nsec,
               .owner = static_cast<uint32_t>(st.st_uid),
               .mode = static_cast<uint32_t>(st.st_mode)};
  if (size_ > 0 && backing == FileBacking::kCopied) {
    try {
      data_ = static_cast<const uint8_t*>(ReadIntoMemory(fd, size_, path));
    } catch (...) {
      ::close(fd);
      throw;
    }
  } else if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      Fail("cannot map '", path, "': ", std::strerror(err));
    }
    data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
}

void MappedFile::ReleasePages(const void* p, std::size_t n) const {
  const auto begin = reinterpret_cast<uintptr_t>(p);
  const auto map_begin = reinterpret_cast<uintptr_t>(data_);
  GROVE_CHECK(begin >= map_begin && n <= size_ && begin - map_begin <= size_ - n,
              "mapped file: release outside the map of '", path_, "'");
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t first = (begin + page - 1) / page * page;
  const uintptr_t last = (begin + n) / page * page;
  // Advice only: on failure the pages simply stay resident.
  if (first < last) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace grove
