// ggml itself as the reference for weight-type conversions: libggml-base.so from node-llama-cpp's
// prebuilt binaries (tests/reference/node_modules, installed by scripts/install-deps.sh), opened
// with dlopen at test time. Its per-type dequantizer (ggml_get_type_traits(type)->to_float) and
// its quantizer (ggml_quantize_chunk, no importance matrix) are the ones llama.cpp and
// llama-quantize use.
//
// ggml's type-traits struct is not a stable ABI, so its layout is checked when the library is
// opened: type names, block sizes and block bytes of every type grove knows must agree with
// GgmlTraits before a function pointer read from it is trusted.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "io/ggml_type.h"

namespace grove::testing {

class GgmlReference {
 public:
  // The library, opened on first use and kept open for the life of the process.
  static const GgmlReference& Get();

  // Why the reference cannot be used, or nullopt when it can. missing() tells whether the reason
  // is that the library is not installed (tests skip) rather than a library whose layout grove
  // does not understand (tests fail).
  const std::optional<std::string>& Unavailable() const { return unavailable_; }
  bool missing() const { return missing_; }
  const std::string& path() const { return path_; }

  // Whether ggml can convert rows of this type both ways (to_float and ggml_quantize_chunk without
  // an importance matrix).
  bool Converts(GgmlType type) const;

  // ggml's to_float of the type: n elements (a multiple of the block size) from src.
  void Dequantize(GgmlType type, const void* src, float* dst, int64_t n) const;
  // ggml_quantize_chunk(type, src, dst, 0, nrows, n_per_row, nullptr); returns the bytes written.
  size_t Quantize(GgmlType type, const float* src, void* dst, int64_t nrows,
                  int64_t n_per_row) const;

 private:
  GgmlReference();
  struct Traits;  // ggml's struct ggml_type_traits, as laid out by the library in use
  const Traits* TraitsOf(GgmlType type) const;

  std::string path_;
  std::optional<std::string> unavailable_;
  bool missing_ = false;
  void* handle_ = nullptr;
  const Traits* (*get_type_traits_)(int) = nullptr;
  size_t (*quantize_chunk_)(int, const float*, void*, int64_t, int64_t, int64_t,
                            const float*) = nullptr;
  void (*quantize_init_)(int) = nullptr;
  bool (*quantize_requires_imatrix_)(int) = nullptr;
};

}  // namespace grove::testing

// Skips the test when libggml-base.so is not installed; fails it when it is there but unusable.
#define GROVE_SKIP_WITHOUT_GGML()                                                   \
  do {                                                                              \
    const auto& ggml_reference = ::grove::testing::GgmlReference::Get();            \
    if (ggml_reference.Unavailable()) {                                             \
      if (ggml_reference.missing()) GTEST_SKIP() << *ggml_reference.Unavailable();  \
      GTEST_FAIL() << "ggml reference unusable: " << *ggml_reference.Unavailable(); \
    }                                                                               \
  } while (0)
