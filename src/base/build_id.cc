#include "base/build_id.h"

#include <elf.h>
#include <link.h>

#include <cstdint>
#include <cstring>

namespace grove {
namespace {

// The first object dl_iterate_phdr reports is the executable itself.
int ReadBuildId(dl_phdr_info* info, std::size_t, void* out) {
  auto* hex = static_cast<std::string*>(out);
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& segment = info->dlpi_phdr[i];
    if (segment.p_type != PT_NOTE) continue;
    const auto* p = reinterpret_cast<const uint8_t*>(info->dlpi_addr + segment.p_vaddr);
    const uint8_t* end = p + segment.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      ElfW(Nhdr) note;
      std::memcpy(&note, p, sizeof(note));
      const uint8_t* name = p + sizeof(note);
      const uint8_t* desc = name + ((note.n_namesz + 3) & ~3u);
      if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 &&
          std::memcmp(name, "GNU", 4) == 0 && desc + note.n_descsz <= end) {
        static const char kDigits[] = "0123456789abcdef";
        for (uint32_t j = 0; j < note.n_descsz; ++j) {
          *hex += kDigits[desc[j] >> 4];
          *hex += kDigits[desc[j] & 15];
        }
        return 1;
      }
      p = desc + ((note.n_descsz + 3) & ~3u);
    }
  }
  return 1;  // only the executable
}

}  // namespace

const std::string& ExecutableBuildId() {
  static const std::string id = [] {
    std::string hex;
    ::dl_iterate_phdr(ReadBuildId, &hex);
    return hex;
  }();
  return id;
}

}  // namespace grove
