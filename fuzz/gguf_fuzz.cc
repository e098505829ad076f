// libFuzzer target for the GGUF parser: any input must parse or throw grove::Error, never crash,
// hang or read out of bounds. Build with the "fuzz" preset (clang), then run e.g.
//   build/fuzz/fuzz/gguf_fuzz -max_total_time=60 corpus/
// Seeding the corpus with small real files (a random "tiny" model from `grove synth`) helps it
// reach the tensor table quickly.
#include <cstddef>
#include <cstdint>
#include <span>

#include "base/error.h"
#include "io/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto file = grove::GgufFile::FromBytes(std::span<const uint8_t>(data, size), "fuzz");
    // Touch what a loader would: every tensor's bytes and typed metadata access.
    volatile uint8_t sink = 0;
    for (const auto& t : file->tensors()) {
      if (t.n_bytes > 0) sink = sink ^ t.data[0] ^ t.data[t.n_bytes - 1];
    }
    for (const auto& [key, value] : file->metadata()) {
      if (value.is_integer()) (void)file->GetInt(key);
    }
  } catch (const grove::Error&) {
  }
  return 0;
}
