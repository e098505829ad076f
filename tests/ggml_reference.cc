#include "ggml_reference.h"

#include <dlfcn.h>

#include <cctype>
#include <string_view>

#include "base/error.h"
#include "llama_cpp_reference.h"
#include "test_support.h"

namespace grove::testing {

// struct ggml_type_traits of ggml/include/ggml.h (2025): checked against GgmlTraits when the
// library is opened (blck_size_interleave is 0 for every type since ggml dropped the interleaved
// Q4_0_4_4 family; is_quantized is false for f32, f16, bf16 and the integer types).
struct GgmlReference::Traits {
  const char* type_name;
  int64_t blck_size;
  int64_t blck_size_interleave;
  size_t type_size;
  bool is_quantized;
  void (*to_float)(const void* x, float* y, int64_t k);
  void (*from_float_ref)(const float* x, void* y, int64_t k);
};

namespace {

bool SameNameIgnoringCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

// Whether p points into the mapping of the shared object whose load address is base (so that a
// pointer read from a misunderstood struct is not dereferenced when it is garbage).
bool InObject(const void* p, const void* base) {
  Dl_info info;
  return p != nullptr && dladdr(p, &info) != 0 && info.dli_fbase == base;
}

bool IsFloatType(GgmlType type) {
  return type == GgmlType::kF32 || type == GgmlType::kF16 || type == GgmlType::kBF16;
}

bool IsIntegerType(GgmlType type) {
  return type == GgmlType::kI8 || type == GgmlType::kI16 || type == GgmlType::kI32 ||
         type == GgmlType::kI64 || type == GgmlType::kF64;  // f64: not a block type either
}

}  // namespace

const GgmlReference& GgmlReference::Get() {
  static const GgmlReference* const reference = new GgmlReference();
  return *reference;
}

GgmlReference::GgmlReference() {
#if defined(__linux__) && defined(__x86_64__)
  path_ = ReferenceDir() + "/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so";
#else
  missing_ = true;
  unavailable_ = "ggml reference checks need node-llama-cpp's linux-x64 binaries: skipped";
  return;
#endif
  if (!FileExists(path_)) {
    missing_ = true;
    unavailable_ = path_ + " is not installed (run scripts/install-deps.sh): ggml reference " +
                   "checks skipped";
    return;
  }
  handle_ = dlopen(path_.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle_ == nullptr) {
    const char* error = dlerror();
    unavailable_ = "dlopen(" + path_ + ") failed: " + (error ? error : "unknown error");
    return;
  }
  auto symbol = [&](const char* name) -> void* {
    void* p = dlsym(handle_, name);
    if (p == nullptr && !unavailable_) unavailable_ = path_ + " does not export " + name;
    return p;
  };
  get_type_traits_ = reinterpret_cast<const Traits* (*)(int)>(symbol("ggml_get_type_traits"));
  quantize_chunk_ = reinterpret_cast<size_t (*)(int, const float*, void*, int64_t, int64_t, int64_t,
                                                const float*)>(symbol("ggml_quantize_chunk"));
  quantize_init_ = reinterpret_cast<void (*)(int)>(symbol("ggml_quantize_init"));
  quantize_requires_imatrix_ =
      reinterpret_cast<bool (*)(int)>(symbol("ggml_quantize_requires_imatrix"));
  if (unavailable_) return;

  Dl_info self;
  if (dladdr(reinterpret_cast<const void*>(get_type_traits_), &self) == 0) {
    unavailable_ = "dladdr found no object for ggml_get_type_traits";
    return;
  }
  // Every type number grove knows (0..30, less ggml's removed 4 and 5) must describe the same
  // block geometry in ggml's table.
  for (uint32_t number = 0; number <= static_cast<uint32_t>(GgmlType::kBF16); ++number) {
    const std::optional<GgmlTypeTraits> want = GetGgmlTypeTraits(number);
    if (!want) continue;
    const GgmlType type = static_cast<GgmlType>(number);
    const Traits* t = get_type_traits_(static_cast<int>(number));
    const std::string what = "ggml_get_type_traits(" + std::to_string(number) + ")";
    if (!InObject(t, self.dli_fbase) || !InObject(t->type_name, self.dli_fbase)) {
      unavailable_ =
          what + " does not point into " + path_ + ": struct ggml_type_traits changed layout";
      return;
    }
    const bool quantized = !IsFloatType(type) && !IsIntegerType(type);
    if (!SameNameIgnoringCase(t->type_name, want->name) || t->blck_size != want->block_size ||
        t->blck_size_interleave != 0 || static_cast<int64_t>(t->type_size) != want->type_size ||
        t->is_quantized != quantized) {
      unavailable_ = what + " reads as {name '" + std::string(t->type_name) + "', block " +
                     std::to_string(t->blck_size) + ", interleave " +
                     std::to_string(t->blck_size_interleave) + ", bytes " +
                     std::to_string(t->type_size) + ", quantized " +
                     std::to_string(t->is_quantized) + "} where grove has {'" +
                     std::string(want->name) + "', " + std::to_string(want->block_size) + ", 0, " +
                     std::to_string(want->type_size) + ", " + std::to_string(quantized) +
                     "}: struct ggml_type_traits changed layout (update tests/ggml_reference.cc)";
      return;
    }
    if ((t->to_float != nullptr &&
         !InObject(reinterpret_cast<const void*>(t->to_float), self.dli_fbase)) ||
        (t->from_float_ref != nullptr &&
         !InObject(reinterpret_cast<const void*>(t->from_float_ref), self.dli_fbase))) {
      unavailable_ = what + " has conversion pointers outside " + path_ +
                     ": struct ggml_type_traits changed layout";
      return;
    }
  }
}

const GgmlReference::Traits* GgmlReference::TraitsOf(GgmlType type) const {
  GROVE_CHECK(!unavailable_, "ggml reference unavailable: ", *unavailable_);
  GROVE_CHECK(GetGgmlTypeTraits(static_cast<uint32_t>(type)).has_value(), "unknown type");
  return get_type_traits_(static_cast<int>(type));
}

bool GgmlReference::Converts(GgmlType type) const {
  const Traits* t = TraitsOf(type);
  return t->to_float != nullptr && t->from_float_ref != nullptr &&
         !quantize_requires_imatrix_(static_cast<int>(type));
}

void GgmlReference::Dequantize(GgmlType type, const void* src, float* dst, int64_t n) const {
  const Traits* t = TraitsOf(type);
  if (t->to_float == nullptr) Fail("ggml has no to_float for ", GgmlTypeName(type));
  if (n % t->blck_size != 0) Fail("ggml: ", n, " is not a multiple of the block size");
  t->to_float(src, dst, n);
}

size_t GgmlReference::Quantize(GgmlType type, const float* src, void* dst, int64_t nrows,
                               int64_t n_per_row) const {
  if (!Converts(type)) Fail("ggml cannot quantize ", GgmlTypeName(type), " without an imatrix");
  if (n_per_row % TraitsOf(type)->blck_size != 0) {
    Fail("ggml: ", n_per_row, " is not a multiple of the block size");
  }
  quantize_init_(static_cast<int>(type));  // the IQ grids; a no-op for other types
  return quantize_chunk_(static_cast<int>(type), src, dst, 0, nrows, n_per_row, nullptr);
}

}  // namespace grove::testing
