#include "io/gguf_writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "base/error.h"
#include "base/replacing_file.h"

namespace grove {
namespace {

using Sink = std::function<void(const void*, std::size_t)>;

template <typename T>
void Put(const Sink& sink, T v) {
  sink(&v, sizeof(T));
}

void PutString(const Sink& sink, const std::string& s) {
  Put<uint64_t>(sink, s.size());
  sink(s.data(), s.size());
}

void PutScalar(const Sink& sink, GgufValueType t, const GgufValue::Scalar& s) {
  auto as_u = [&] {
    return std::holds_alternative<uint64_t>(s) ? std::get<uint64_t>(s)
                                               : static_cast<uint64_t>(std::get<int64_t>(s));
  };
  auto as_d = [&] { return std::get<double>(s); };
  switch (t) {
    case GgufValueType::kUint8:
      Put<uint8_t>(sink, static_cast<uint8_t>(as_u()));
      break;
    case GgufValueType::kInt8:
      Put<int8_t>(sink, static_cast<int8_t>(as_u()));
      break;
    case GgufValueType::kUint16:
      Put<uint16_t>(sink, static_cast<uint16_t>(as_u()));
      break;
    case GgufValueType::kInt16:
      Put<int16_t>(sink, static_cast<int16_t>(as_u()));
      break;
    case GgufValueType::kUint32:
      Put<uint32_t>(sink, static_cast<uint32_t>(as_u()));
      break;
    case GgufValueType::kInt32:
      Put<int32_t>(sink, static_cast<int32_t>(as_u()));
      break;
    case GgufValueType::kUint64:
      Put<uint64_t>(sink, as_u());
      break;
    case GgufValueType::kInt64:
      Put<int64_t>(sink, static_cast<int64_t>(as_u()));
      break;
    case GgufValueType::kFloat32:
      Put<float>(sink, static_cast<float>(as_d()));
      break;
    case GgufValueType::kFloat64:
      Put<double>(sink, as_d());
      break;
    case GgufValueType::kBool:
      Put<uint8_t>(sink, std::get<bool>(s) ? 1 : 0);
      break;
    default:
      GROVE_CHECK(false, "not a scalar type");
  }
}

}  // namespace

GgufWriter::GgufWriter(uint64_t alignment) : alignment_(alignment) {
  GROVE_CHECK(alignment > 0 && (alignment & (alignment - 1)) == 0);
  if (alignment != 32) SetUint32("general.alignment", static_cast<uint32_t>(alignment));
}

void GgufWriter::SetValue(const std::string& key, GgufValue value) {
  for (auto& [k, v] : metadata_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  metadata_.emplace_back(key, std::move(value));
}

void GgufWriter::SetUint32(const std::string& key, uint32_t v) {
  SetValue(key, GgufValue{.type = GgufValueType::kUint32, .scalar = uint64_t{v}});
}
void GgufWriter::SetInt32(const std::string& key, int32_t v) {
  SetValue(key, GgufValue{.type = GgufValueType::kInt32, .scalar = int64_t{v}});
}
void GgufWriter::SetUint64(const std::string& key, uint64_t v) {
  SetValue(key, GgufValue{.type = GgufValueType::kUint64, .scalar = v});
}
void GgufWriter::SetFloat32(const std::string& key, float v) {
  SetValue(key, GgufValue{.type = GgufValueType::kFloat32, .scalar = double{v}});
}
void GgufWriter::SetBool(const std::string& key, bool v) {
  SetValue(key, GgufValue{.type = GgufValueType::kBool, .scalar = v});
}
void GgufWriter::SetString(const std::string& key, std::string v) {
  SetValue(key, GgufValue{.type = GgufValueType::kString, .string = std::move(v)});
}
void GgufWriter::SetStringArray(const std::string& key, std::vector<std::string> v) {
  SetValue(key, GgufValue{.type = GgufValueType::kArray,
                          .element_type = GgufValueType::kString,
                          .strings = std::move(v)});
}
void GgufWriter::SetFloat32Array(const std::string& key, std::span<const float> v) {
  GgufValue value{.type = GgufValueType::kArray, .element_type = GgufValueType::kFloat32};
  for (float f : v) value.array.emplace_back(double{f});
  SetValue(key, std::move(value));
}
void GgufWriter::SetInt32Array(const std::string& key, std::span<const int32_t> v) {
  GgufValue value{.type = GgufValueType::kArray, .element_type = GgufValueType::kInt32};
  for (int32_t i : v) value.array.emplace_back(int64_t{i});
  SetValue(key, std::move(value));
}

void GgufWriter::AddTensor(const std::string& name, std::vector<int64_t> shape, GgmlType type,
                           std::vector<uint8_t> data) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  GgmlTypeTraits t = GgmlTraits(type);
  GROVE_CHECK(shape[0] % t.block_size == 0, "tensor '", name, "' row not a whole number of blocks");
  uint64_t n_bytes = static_cast<uint64_t>(n / t.block_size * t.type_size);
  GROVE_CHECK(data.size() == n_bytes, "tensor '", name, "' has ", data.size(), " bytes, expected ",
              n_bytes);
  tensors_.push_back({name, std::move(shape), type, n_bytes, std::move(data), {}});
}

void GgufWriter::AddTensor(const std::string& name, std::vector<int64_t> shape, GgmlType type,
                           TensorFiller filler) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  GgmlTypeTraits t = GgmlTraits(type);
  GROVE_CHECK(shape[0] % t.block_size == 0, "tensor '", name, "' row not a whole number of blocks");
  uint64_t n_bytes = static_cast<uint64_t>(n / t.block_size * t.type_size);
  tensors_.push_back({name, std::move(shape), type, n_bytes, {}, std::move(filler)});
}

void GgufWriter::AddF32Tensor(const std::string& name, std::vector<int64_t> shape,
                              std::span<const float> v) {
  std::vector<uint8_t> bytes(v.size_bytes());
  std::memcpy(bytes.data(), v.data(), bytes.size());
  AddTensor(name, std::move(shape), GgmlType::kF32, std::move(bytes));
}

void GgufWriter::Emit(const Sink& sink,
                      const std::function<void(std::size_t, std::size_t)>& progress) const {
  uint64_t written = 0;
  Sink counted = [&](const void* p, std::size_t n) {
    sink(p, n);
    written += n;
  };
  auto pad = [&] {
    static const uint8_t kZeros[256] = {};
    uint64_t target = (written + alignment_ - 1) / alignment_ * alignment_;
    while (written < target) counted(kZeros, std::min<uint64_t>(target - written, sizeof(kZeros)));
  };
  Put<uint32_t>(counted, 0x46554747);
  Put<uint32_t>(counted, 3);
  Put<uint64_t>(counted, tensors_.size());
  Put<uint64_t>(counted, metadata_.size());
  for (const auto& [key, v] : metadata_) {
    PutString(counted, key);
    Put<uint32_t>(counted, static_cast<uint32_t>(v.type));
    if (v.type == GgufValueType::kString) {
      PutString(counted, v.string);
    } else if (v.type == GgufValueType::kArray) {
      Put<uint32_t>(counted, static_cast<uint32_t>(v.element_type));
      if (v.element_type == GgufValueType::kString) {
        Put<uint64_t>(counted, v.strings.size());
        for (const std::string& s : v.strings) PutString(counted, s);
      } else {
        Put<uint64_t>(counted, v.array.size());
        for (const auto& s : v.array) PutScalar(counted, v.element_type, s);
      }
    } else {
      PutScalar(counted, v.type, v.scalar);
    }
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    PutString(counted, t.name);
    Put<uint32_t>(counted, static_cast<uint32_t>(t.shape.size()));
    for (int64_t d : t.shape) Put<int64_t>(counted, d);
    Put<uint32_t>(counted, static_cast<uint32_t>(t.type));
    Put<uint64_t>(counted, offset);
    offset = (offset + t.n_bytes + alignment_ - 1) / alignment_ * alignment_;
  }
  pad();
  std::vector<uint8_t> buffer;
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    const Tensor& t = tensors_[i];
    if (t.filler) {
      buffer.assign(t.n_bytes, 0);
      t.filler(buffer);
      counted(buffer.data(), buffer.size());
    } else {
      counted(t.data.data(), t.data.size());
    }
    pad();
    if (progress) progress(i + 1, tensors_.size());
  }
}

void GgufWriter::WriteFile(const std::string& path,
                           const std::function<void(std::size_t, std::size_t)>& progress) const {
  // A unique temporary beside `path`, renamed over it when whole; removed if a filler throws.
  ReplacingFile file(path, "GGUF file");
  Emit([&](const void* p, std::size_t n) { file.Write(p, n); }, progress);
  file.Commit();
}

std::vector<uint8_t> GgufWriter::WriteToBytes() const {
  std::vector<uint8_t> out;
  Emit(
      [&](const void* p, std::size_t n) {
        const auto* b = static_cast<const uint8_t*>(p);
        out.insert(out.end(), b, b + n);
      },
      {});
  return out;
}

}  // namespace grove
