// libFuzzer target for the JSON files a speculation plan reads: tree files (--spec file:T.json),
// acceptance vectors (--accept) and verify-cost profiles (--profile). Any input must be read or
// refused with grove::Error; another exception escaping (a JSON type error, say) is a bug, which
// libFuzzer reports as a crash. The readers take paths, so each input goes through one scratch
// file, as the CLI would read it. Seeds: tests/fuzz/corpus/plan/.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "base/error.h"
#include "speculate/plan_files.h"

namespace {

const std::string& ScratchPath() {
  static const std::string path = "/tmp/grove_plan_fuzz." + std::to_string(::getpid()) + ".json";
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = ScratchPath();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  try {
    (void)grove::ReadTreeFile(path);
  } catch (const grove::Error&) {
  }
  try {
    (void)grove::ReadAcceptanceFile(path);
  } catch (const grove::Error&) {
  }
  try {
    (void)grove::ReadVerifyProfile(path);
  } catch (const grove::Error&) {
  }
  std::remove(path.c_str());
  return 0;
}
