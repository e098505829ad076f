// GGUF reader (versions 2 and 3): https://github.com/ggml-org/ggml/blob/master/docs/gguf.md
//
// The reader validates the whole header before anything uses it: magic, version, counts against the
// bytes that remain, value types, string lengths, key uniqueness, alignment, every tensor's shape,
// type and byte range inside the file. Every error names the key or tensor. Tensor data is never
// copied: GgufTensor::data points into the memory map (or the caller's buffer).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "io/ggml_type.h"
#include "io/mapped_file.h"

namespace grove {

// Value types of GGUF metadata, numbered as in the file.
enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};
std::string_view GgufValueTypeName(GgufValueType type);

// One metadata value. Arrays hold scalars or strings (nested arrays are rejected: no model uses
// them).
struct GgufValue {
  using Scalar = std::variant<uint64_t, int64_t, double, bool>;
  GgufValueType type = GgufValueType::kUint32;
  GgufValueType element_type = GgufValueType::kUint32;  // for arrays
  Scalar scalar;                                        // numbers and bools
  std::string string;                                   // kString
  std::vector<Scalar> array;                            // arrays of numbers or bools
  std::vector<std::string> strings;                     // arrays of strings

  bool is_integer() const;
  bool is_number() const;  // integer or float
  std::size_t array_size() const {
    return type == GgufValueType::kArray ? array.size() + strings.size() : 0;
  }
};

struct GgufTensor {
  std::string name;
  std::vector<int64_t> shape;  // ne[0] (contiguous, row length) first, as in the file
  GgmlType type = GgmlType::kF32;
  uint64_t offset = 0;  // from the start of the data section
  const uint8_t* data = nullptr;
  uint64_t n_bytes = 0;

  int64_t n_elements() const;
  std::string shape_string() const;  // "2048x2048"
};

class GgufFile {
 public:
  // Maps (or, kCopied, reads: mapped_file.h) and parses a file. Throws grove::Error ("gguf:
  // '<path>': ...") on any malformation.
  static std::unique_ptr<GgufFile> Open(const std::string& path,
                                        FileBacking backing = FileBacking::kMapped);
  // Parses bytes that the caller keeps alive for the lifetime of the result (tests, fuzzing).
  static std::unique_ptr<GgufFile> FromBytes(std::span<const uint8_t> bytes,
                                             std::string name = "<memory>");

  const std::string& name() const { return name_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return bytes_.size(); }
  // A 64-bit hash that tells one file's contents from another's, cheaply: of the size, the
  // whole header (metadata and tensor table) and the first and last 64 bytes of every tensor. Two
  // files that differ only deep inside a tensor's data collide (a check that ranks or processes
  // were given the same file, not a checksum).
  uint64_t ContentFingerprint() const;

  // Releases the resident pages of tensor data that the caller has copied (see
  // MappedFile::ReleasePages). Does nothing for FromBytes files: their memory is the caller's.
  void ReleasePages(const void* data, uint64_t n) const;
  // The mapped file's identity when opened; null for FromBytes files.
  const FileIdentity* identity() const;

  // Metadata in file order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
  const GgufValue* Find(std::string_view key) const;
  bool Has(std::string_view key) const { return Find(key) != nullptr; }

  // Typed getters. The Get* forms throw an Error naming the key when it is absent or of a type that
  // cannot represent the request (e.g. a negative value read as unsigned, a string read as a
  // number); the forms with a default return it when the key is absent (and still throw on a wrong
  // type).
  std::string GetString(std::string_view key) const;
  std::string GetString(std::string_view key, std::string_view fallback) const;
  uint64_t GetUint(std::string_view key) const;
  uint64_t GetUint(std::string_view key, uint64_t fallback) const;
  int64_t GetInt(std::string_view key) const;
  double GetFloat(std::string_view key) const;
  double GetFloat(std::string_view key, double fallback) const;
  bool GetBool(std::string_view key, bool fallback) const;
  std::span<const std::string> GetStringArray(std::string_view key) const;
  std::vector<float> GetFloatArray(std::string_view key) const;
  std::vector<int64_t> GetIntArray(std::string_view key) const;

  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* FindTensor(std::string_view name) const;
  // Throws naming the tensor if it is absent.
  const GgufTensor& GetTensor(std::string_view name) const;

 private:
  GgufFile() = default;
  void Parse();

  std::string name_;
  std::unique_ptr<MappedFile> map_;
  std::span<const uint8_t> bytes_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::unordered_map<std::string, std::size_t> metadata_index_;
  std::vector<GgufTensor> tensors_;
  std::unordered_map<std::string, std::size_t> tensor_index_;
};

}  // namespace grove
