#include "io/gguf.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "base/error.h"
#include "base/fnv1a.h"

namespace grove {
namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as a little-endian uint32
constexpr uint32_t kMaxDims = 4;             // GGML_MAX_DIMS
constexpr uint64_t kMaxStringBytes = uint64_t{1} << 30;

// Bounds-checked little-endian cursor over the file. Every read checks what remains, so absurd
// counts and lengths fail before anything is allocated for them.
class Cursor {
 public:
  Cursor(std::span<const uint8_t> bytes, const std::string& name) : bytes_(bytes), name_(name) {}

  uint64_t offset() const { return pos_; }
  uint64_t remaining() const { return bytes_.size() - pos_; }

  template <typename T>
  T Read(std::string_view what) {
    if (remaining() < sizeof(T)) {
      Fail("gguf: '", name_, "': file truncated while reading ", what, " at offset ", pos_);
    }
    T value;
    std::memcpy(&value, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }

  std::string ReadString(std::string_view what) {
    uint64_t len = Read<uint64_t>(what);
    if (len > remaining() || len > kMaxStringBytes) {
      Fail("gguf: '", name_, "': ", what, " has length ", len, " but only ", remaining(),
           " bytes remain (offset ", pos_, ")");
    }
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), len);
    pos_ += len;
    return s;
  }

  // Rejects a count of elements that could not possibly fit in the bytes left.
  void CheckCount(uint64_t count, uint64_t min_element_bytes, std::string_view what) {
    if (min_element_bytes > 0 && count > remaining() / min_element_bytes) {
      Fail("gguf: '", name_, "': ", what, " count ", count, " cannot fit in the ", remaining(),
           " bytes that remain");
    }
  }

 private:
  std::span<const uint8_t> bytes_;
  const std::string& name_;
  uint64_t pos_ = 0;
};

uint64_t ScalarBytes(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
      return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32:
      return 4;
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64:
    case GgufValueType::kString:  // at least its length prefix
      return 8;
    case GgufValueType::kArray:
      return 12;  // at least element type and count
  }
  return 0;
}

bool IsValidValueType(uint32_t t) { return t <= static_cast<uint32_t>(GgufValueType::kFloat64); }

GgufValue::Scalar ReadScalar(Cursor& in, GgufValueType t, std::string_view what,
                             const std::string& file) {
  switch (t) {
    case GgufValueType::kUint8:
      return uint64_t{in.Read<uint8_t>(what)};
    case GgufValueType::kInt8:
      return int64_t{in.Read<int8_t>(what)};
    case GgufValueType::kUint16:
      return uint64_t{in.Read<uint16_t>(what)};
    case GgufValueType::kInt16:
      return int64_t{in.Read<int16_t>(what)};
    case GgufValueType::kUint32:
      return uint64_t{in.Read<uint32_t>(what)};
    case GgufValueType::kInt32:
      return int64_t{in.Read<int32_t>(what)};
    case GgufValueType::kFloat32:
      return double{in.Read<float>(what)};
    case GgufValueType::kUint64:
      return in.Read<uint64_t>(what);
    case GgufValueType::kInt64:
      return in.Read<int64_t>(what);
    case GgufValueType::kFloat64:
      return in.Read<double>(what);
    case GgufValueType::kBool: {
      uint8_t b = in.Read<uint8_t>(what);
      if (b > 1) Fail("gguf: '", file, "': ", what, " is a bool with value ", int{b});
      return b != 0;
    }
    default:
      break;
  }
  Fail("gguf: '", file, "': ", what, " is not a scalar");
}

// The magic and the version: 2 or 3, little-endian.
uint32_t ReadVersion(Cursor& in, const std::string& file) {
  uint32_t magic = in.Read<uint32_t>("magic");
  if (magic != kGgufMagic) {
    Fail("gguf: '", file, "': bad magic (not a GGUF file): first bytes are 0x", std::hex, magic);
  }
  const uint32_t version = in.Read<uint32_t>("version");
  if (version == 1)
    Fail("gguf: '", file, "': GGUF version 1 is obsolete and not supported (need 2 or 3)");
  if (__builtin_bswap32(version) == 2 || __builtin_bswap32(version) == 3) {
    Fail("gguf: '", file, "': big-endian GGUF files are not supported");
  }
  if (version != 2 && version != 3) {
    Fail("gguf: '", file, "': unsupported GGUF version ", version, " (need 2 or 3)");
  }
  return version;
}

// A metadata value (its type, then the value), `what` naming it in errors.
GgufValue ReadValue(Cursor& in, const std::string& what, const std::string& file) {
  uint32_t raw_type = in.Read<uint32_t>(what + " type");
  if (!IsValidValueType(raw_type))
    Fail("gguf: '", file, "': ", what, " has invalid value type ", raw_type);
  GgufValue value;
  value.type = static_cast<GgufValueType>(raw_type);
  if (value.type == GgufValueType::kString) {
    value.string = in.ReadString(what);
  } else if (value.type == GgufValueType::kArray) {
    uint32_t raw_elem = in.Read<uint32_t>(what + " element type");
    if (!IsValidValueType(raw_elem)) {
      Fail("gguf: '", file, "': ", what, " has invalid array element type ", raw_elem);
    }
    value.element_type = static_cast<GgufValueType>(raw_elem);
    if (value.element_type == GgufValueType::kArray) {
      Fail("gguf: '", file, "': ", what, " is a nested array (not supported)");
    }
    uint64_t count = in.Read<uint64_t>(what + " array length");
    in.CheckCount(count, ScalarBytes(value.element_type), what + " array");
    if (value.element_type == GgufValueType::kString) {
      value.strings.reserve(count);
      for (uint64_t j = 0; j < count; ++j) value.strings.push_back(in.ReadString(what));
    } else {
      value.array.reserve(count);
      for (uint64_t j = 0; j < count; ++j) {
        value.array.push_back(ReadScalar(in, value.element_type, what, file));
      }
    }
  } else {
    value.scalar = ReadScalar(in, value.type, what, file);
  }
  return value;
}

// A tensor's info after its name: shape, type and offset, checked against the type's block,
// the alignment and the file's size (the data pointer is set once the data section is known).
GgufTensor ReadTensorInfo(Cursor& in, std::string name, uint64_t alignment, uint64_t file_bytes,
                          const std::string& file) {
  GgufTensor t;
  t.name = std::move(name);
  const std::string what = StrCat("tensor '", t.name, "'");
  uint32_t n_dims = in.Read<uint32_t>(what + " dimension count");
  if (n_dims == 0 || n_dims > kMaxDims) {
    Fail("gguf: '", file, "': ", what, " has ", n_dims, " dimensions (must be 1 to ", kMaxDims,
         ")");
  }
  int64_t n_elements = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    int64_t ne = in.Read<int64_t>(what + " shape");
    if (ne <= 0) Fail("gguf: '", file, "': ", what, " has dimension ", d, " of size ", ne);
    if (n_elements > std::numeric_limits<int64_t>::max() / ne) {
      Fail("gguf: '", file, "': ", what, " has too many elements");
    }
    n_elements *= ne;
    t.shape.push_back(ne);
  }
  uint32_t raw_type = in.Read<uint32_t>(what + " type");
  auto traits = GetGgmlTypeTraits(raw_type);
  if (!traits) Fail("gguf: '", file, "': ", what, " has unknown type ", raw_type);
  t.type = static_cast<GgmlType>(raw_type);
  if (t.shape[0] % traits->block_size != 0) {
    Fail("gguf: '", file, "': ", what, " of type ", traits->name, " has row length ", t.shape[0],
         ", not a multiple of its block size ", traits->block_size);
  }
  t.offset = in.Read<uint64_t>(what + " offset");
  if (t.offset % alignment != 0) {
    Fail("gguf: '", file, "': ", what, " data offset ", t.offset, " is not aligned to ", alignment);
  }
  // n_elements / block_size * type_size cannot overflow: n_elements < 2^63 and type_size <= 292
  // would overflow only past ~2^54 blocks, which is checked against the file size below.
  uint64_t n_blocks = static_cast<uint64_t>(n_elements / traits->block_size);
  if (n_blocks > file_bytes) Fail("gguf: '", file, "': ", what, " is larger than the file");
  t.n_bytes = n_blocks * static_cast<uint64_t>(traits->type_size);
  return t;
}

// Overlapping tensors would alias weights: always a writer bug, so the file is refused.
void CheckNoOverlap(const std::vector<GgufTensor>& tensors, const std::string& file) {
  std::vector<const GgufTensor*> by_offset;
  by_offset.reserve(tensors.size());
  for (const GgufTensor& t : tensors) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensor* a, const GgufTensor* b) { return a->offset < b->offset; });
  for (std::size_t i = 1; i < by_offset.size(); ++i) {
    const GgufTensor* a = by_offset[i - 1];
    const GgufTensor* b = by_offset[i];
    if (a->offset + a->n_bytes > b->offset) {
      Fail("gguf: '", file, "': tensors '", a->name, "' and '", b->name, "' overlap");
    }
  }
}

}  // namespace

std::string_view GgufValueTypeName(GgufValueType type) {
  static constexpr std::string_view kNames[] = {"uint8",  "int8",    "uint16", "int16",  "uint32",
                                                "int32",  "float32", "bool",   "string", "array",
                                                "uint64", "int64",   "float64"};
  auto i = static_cast<uint32_t>(type);
  return i < std::size(kNames) ? kNames[i] : "invalid";
}

bool GgufValue::is_integer() const {
  return type != GgufValueType::kArray && type != GgufValueType::kString &&
         type != GgufValueType::kBool && type != GgufValueType::kFloat32 &&
         type != GgufValueType::kFloat64;
}

bool GgufValue::is_number() const {
  return is_integer() || type == GgufValueType::kFloat32 || type == GgufValueType::kFloat64;
}

int64_t GgufTensor::n_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string GgufTensor::shape_string() const {
  std::string s;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += 'x';
    s += std::to_string(shape[i]);
  }
  return s;
}

std::unique_ptr<GgufFile> GgufFile::Open(const std::string& path, FileBacking backing) {
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->name_ = path;
  file->map_ = std::make_unique<MappedFile>(path, FollowLinks::kYes, backing);
  file->bytes_ = file->map_->bytes();
  file->Parse();
  return file;
}

void GgufFile::ReleasePages(const void* data, uint64_t n) const {
  if (map_) map_->ReleasePages(data, n);
}

const FileIdentity* GgufFile::identity() const { return map_ ? &map_->identity() : nullptr; }

std::unique_ptr<GgufFile> GgufFile::FromBytes(std::span<const uint8_t> bytes, std::string name) {
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->name_ = std::move(name);
  file->bytes_ = bytes;
  file->Parse();
  return file;
}

void GgufFile::Parse() {
  Cursor in(bytes_, name_);
  const std::string& file = name_;
  if (bytes_.size() < 4)
    Fail("gguf: '", file, "': file is ", bytes_.size(), " bytes, too short for a GGUF header");
  version_ = ReadVersion(in, file);
  uint64_t n_tensors = in.Read<uint64_t>("tensor count");
  uint64_t n_kv = in.Read<uint64_t>("metadata count");
  // A key-value pair needs at least 8 (key length) + 4 (type) + 1 bytes; a tensor info 8 + 4 + 4
  // + 8.
  in.CheckCount(n_kv, 13, "metadata");
  in.CheckCount(n_tensors, 24, "tensor");

  metadata_.reserve(n_kv);
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = in.ReadString(StrCat("key of metadata entry ", i));
    if (key.empty()) Fail("gguf: '", file, "': metadata entry ", i, " has an empty key");
    if (metadata_index_.count(key)) Fail("gguf: '", file, "': duplicate metadata key '", key, "'");
    GgufValue value = ReadValue(in, StrCat("metadata '", key, "'"), file);
    metadata_index_.emplace(key, metadata_.size());
    metadata_.emplace_back(std::move(key), std::move(value));
  }

  if (const GgufValue* a = Find("general.alignment")) {
    if (!a->is_integer())
      Fail("gguf: '", file, "': metadata 'general.alignment' must be an integer");
    alignment_ = GetUint("general.alignment");
    if (alignment_ == 0 || !std::has_single_bit(alignment_) || alignment_ > (1u << 20)) {
      Fail("gguf: '", file, "': metadata 'general.alignment' = ", alignment_,
           " is not a power of two");
    }
  }

  tensors_.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    std::string name = in.ReadString(StrCat("name of tensor ", i));
    if (name.empty()) Fail("gguf: '", file, "': tensor ", i, " has an empty name");
    if (tensor_index_.count(name)) Fail("gguf: '", file, "': duplicate tensor '", name, "'");
    tensor_index_.emplace(name, tensors_.size());
    tensors_.push_back(ReadTensorInfo(in, std::move(name), alignment_, bytes_.size(), file));
  }

  data_offset_ = (in.offset() + alignment_ - 1) / alignment_ * alignment_;
  if (n_tensors > 0 && data_offset_ > bytes_.size()) {
    Fail("gguf: '", file, "': file truncated: the data section would start at ", data_offset_,
         " but the file has ", bytes_.size(), " bytes");
  }
  uint64_t data_size = bytes_.size() - std::min<uint64_t>(data_offset_, bytes_.size());
  for (GgufTensor& t : tensors_) {
    if (t.offset > data_size || t.n_bytes > data_size - t.offset) {
      Fail("gguf: '", file, "': tensor '", t.name, "' (", t.n_bytes, " bytes at data offset ",
           t.offset, ") extends past the end of the file (data section is ", data_size, " bytes)");
    }
    t.data = bytes_.data() + data_offset_ + t.offset;
  }
  CheckNoOverlap(tensors_, file);
}

const GgufValue* GgufFile::Find(std::string_view key) const {
  auto it = metadata_index_.find(std::string(key));
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].second;
}

namespace {

[[noreturn]] void WrongType(const std::string& file, std::string_view key, const GgufValue& v,
                            std::string_view wanted) {
  std::string got(GgufValueTypeName(v.type));
  if (v.type == GgufValueType::kArray) got = StrCat("array of ", GgufValueTypeName(v.element_type));
  Fail("gguf: '", file, "': metadata '", key, "' is ", got, ", expected ", wanted);
}

// Converts a stored scalar to the requested arithmetic type, refusing values it cannot represent.
template <typename T>
bool ScalarAs(const GgufValue::Scalar& s, T* out) {
  if (const auto* u = std::get_if<uint64_t>(&s)) {
    if constexpr (std::is_floating_point_v<T>) {
      *out = static_cast<T>(*u);
      return true;
    } else {
      if (*u > static_cast<uint64_t>(std::numeric_limits<T>::max())) return false;
      *out = static_cast<T>(*u);
      return true;
    }
  }
  if (const auto* i = std::get_if<int64_t>(&s)) {
    if constexpr (std::is_floating_point_v<T>) {
      *out = static_cast<T>(*i);
      return true;
    } else {
      if constexpr (std::is_unsigned_v<T>) {
        if (*i < 0) return false;
      }
      *out = static_cast<T>(*i);
      return true;
    }
  }
  if (const auto* d = std::get_if<double>(&s)) {
    if constexpr (std::is_floating_point_v<T>) {
      *out = static_cast<T>(*d);
      return true;
    }
  }
  return false;
}

}  // namespace

std::string GgufFile::GetString(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (!v) Fail("gguf: '", name_, "': missing metadata '", key, "'");
  if (v->type != GgufValueType::kString) WrongType(name_, key, *v, "string");
  return v->string;
}

std::string GgufFile::GetString(std::string_view key, std::string_view fallback) const {
  return Has(key) ? GetString(key) : std::string(fallback);
}

uint64_t GgufFile::GetUint(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (!v) Fail("gguf: '", name_, "': missing metadata '", key, "'");
  uint64_t out = 0;
  if (!v->is_integer() || !ScalarAs(v->scalar, &out))
    WrongType(name_, key, *v, "a non-negative integer");
  return out;
}

uint64_t GgufFile::GetUint(std::string_view key, uint64_t fallback) const {
  return Has(key) ? GetUint(key) : fallback;
}

int64_t GgufFile::GetInt(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (!v) Fail("gguf: '", name_, "': missing metadata '", key, "'");
  int64_t out = 0;
  if (!v->is_integer() || !ScalarAs(v->scalar, &out)) WrongType(name_, key, *v, "an integer");
  return out;
}

double GgufFile::GetFloat(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (!v) Fail("gguf: '", name_, "': missing metadata '", key, "'");
  double out = 0;
  if (!v->is_number() || !ScalarAs(v->scalar, &out)) WrongType(name_, key, *v, "a number");
  return out;
}

double GgufFile::GetFloat(std::string_view key, double fallback) const {
  return Has(key) ? GetFloat(key) : fallback;
}

bool GgufFile::GetBool(std::string_view key, bool fallback) const {
  const GgufValue* v = Find(key);
  if (!v) return fallback;
  if (v->type != GgufValueType::kBool) WrongType(name_, key, *v, "bool");
  return std::get<bool>(v->scalar);
}

std::span<const std::string> GgufFile::GetStringArray(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (!v) Fail("gguf: '", name_, "': missing metadata '", key, "'");
  if (v->type != GgufValueType::kArray || v->element_type != GgufValueType::kString) {
    WrongType(name_, key, *v, "array of string");
  }
  return v->strings;
}

std::vector<float> GgufFile::GetFloatArray(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (!v) Fail("gguf: '", name_, "': missing metadata '", key, "'");
  if (v->type != GgufValueType::kArray || v->element_type == GgufValueType::kString ||
      v->element_type == GgufValueType::kBool) {
    WrongType(name_, key, *v, "array of numbers");
  }
  std::vector<float> out(v->array.size());
  for (std::size_t i = 0; i < out.size(); ++i) ScalarAs(v->array[i], &out[i]);
  return out;
}

std::vector<int64_t> GgufFile::GetIntArray(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (!v) Fail("gguf: '", name_, "': missing metadata '", key, "'");
  if (v->type != GgufValueType::kArray || v->element_type == GgufValueType::kString ||
      v->element_type == GgufValueType::kBool || v->element_type == GgufValueType::kFloat32 ||
      v->element_type == GgufValueType::kFloat64) {
    WrongType(name_, key, *v, "array of integers");
  }
  std::vector<int64_t> out(v->array.size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (!ScalarAs(v->array[i], &out[i])) {
      Fail("gguf: '", name_, "': metadata '", key, "' element ", i, " does not fit in int64");
    }
  }
  return out;
}

uint64_t GgufFile::ContentFingerprint() const {
  Fnv1a h;
  const uint64_t size = bytes_.size();
  h.Mix(&size, sizeof(size));
  h.Mix(bytes_.data(), static_cast<std::size_t>(std::min<uint64_t>(data_offset_, size)));
  constexpr uint64_t kEdge = 64;
  for (const GgufTensor& t : tensors_) {
    const uint64_t edge = std::min(kEdge, t.n_bytes);
    h.Mix(t.data, static_cast<std::size_t>(edge));
    h.Mix(t.data + (t.n_bytes - edge), static_cast<std::size_t>(edge));
  }
  return h.value();
}

const GgufTensor* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GgufTensor& GgufFile::GetTensor(std::string_view name) const {
  const GgufTensor* t = FindTensor(name);
  if (!t) Fail("gguf: '", name_, "': missing tensor '", name, "'");
  return *t;
}

}  // namespace grove
