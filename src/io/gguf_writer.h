// GGUF writer (version 3). Used by tests to build models and malformed files, by `grove synth` to
// write random-weight models, and later by the trainer to export. Metadata is written in insertion
// order; tensors are laid out in insertion order, each aligned to general.alignment.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "io/gguf.h"

namespace grove {

class GgufWriter {
 public:
  // Fills the tensor's bytes (exactly its size) when the file is written, so a writer can describe
  // gigabytes of weights without holding them all in memory.
  using TensorFiller = std::function<void(std::span<uint8_t>)>;

  explicit GgufWriter(uint64_t alignment = 32);

  void SetUint32(const std::string& key, uint32_t v);
  void SetInt32(const std::string& key, int32_t v);
  void SetUint64(const std::string& key, uint64_t v);
  void SetFloat32(const std::string& key, float v);
  void SetBool(const std::string& key, bool v);
  void SetString(const std::string& key, std::string v);
  void SetStringArray(const std::string& key, std::vector<std::string> v);
  void SetFloat32Array(const std::string& key, std::span<const float> v);
  void SetInt32Array(const std::string& key, std::span<const int32_t> v);
  // Any value, as the reader returns it (copies metadata from one file to another).
  void SetValue(const std::string& key, GgufValue value);

  // shape is ne[0] (row length) first. The data must be exactly the tensor's byte size.
  void AddTensor(const std::string& name, std::vector<int64_t> shape, GgmlType type,
                 std::vector<uint8_t> data);
  void AddTensor(const std::string& name, std::vector<int64_t> shape, GgmlType type,
                 TensorFiller filler);
  void AddF32Tensor(const std::string& name, std::vector<int64_t> shape, std::span<const float> v);

  // Writes to a temporary file beside `path` and renames it into place, so an interrupted write
  // never leaves a truncated model under the final name. `progress(done, total)` is called per
  // tensor.
  void WriteFile(const std::string& path,
                 const std::function<void(std::size_t, std::size_t)>& progress = {}) const;
  std::vector<uint8_t> WriteToBytes() const;

 private:
  struct Tensor {
    std::string name;
    std::vector<int64_t> shape;
    GgmlType type;
    uint64_t n_bytes;
    std::vector<uint8_t> data;
    TensorFiller filler;
  };
  void Emit(const std::function<void(const void*, std::size_t)>& sink,
            const std::function<void(std::size_t, std::size_t)>& progress) const;

  uint64_t alignment_;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<Tensor> tensors_;
};

}  // namespace grove
