#include "io/ggml_type.h"

#include <array>
#include <cctype>
#include <string>

#include "base/error.h"

namespace grove {
namespace {

struct Entry {
  uint32_t id;
  GgmlTypeTraits traits;
};

// Block sizes and bytes per block of each ggml type (QK_K = 256 for the k-quants).
constexpr std::array<Entry, 30> kTypes = {{
    {0, {"f32", 1, 4}},         {1, {"f16", 1, 2}},         {2, {"q4_0", 32, 18}},
    {3, {"q4_1", 32, 20}},      {6, {"q5_0", 32, 22}},      {7, {"q5_1", 32, 24}},
    {8, {"q8_0", 32, 34}},      {9, {"q8_1", 32, 36}},      {10, {"q2_k", 256, 84}},
    {11, {"q3_k", 256, 110}},   {12, {"q4_k", 256, 144}},   {13, {"q5_k", 256, 176}},
    {14, {"q6_k", 256, 210}},   {15, {"q8_k", 256, 292}},   {16, {"iq2_xxs", 256, 66}},
    {17, {"iq2_xs", 256, 74}},  {18, {"iq3_xxs", 256, 98}}, {19, {"iq1_s", 256, 50}},
    {20, {"iq4_nl", 32, 18}},   {21, {"iq3_s", 256, 110}},  {22, {"iq2_s", 256, 82}},
    {23, {"iq4_xs", 256, 136}}, {24, {"i8", 1, 1}},         {25, {"i16", 1, 2}},
    {26, {"i32", 1, 4}},        {27, {"i64", 1, 8}},        {28, {"f64", 1, 8}},
    {29, {"iq1_m", 256, 56}},   {30, {"bf16", 1, 2}},       {39, {"mxfp4", 32, 17}},
}};

}  // namespace

std::optional<GgmlTypeTraits> GetGgmlTypeTraits(uint32_t type) {
  for (const Entry& e : kTypes) {
    if (e.id == type) return e.traits;
  }
  return std::nullopt;
}

GgmlTypeTraits GgmlTraits(GgmlType type) {
  auto traits = GetGgmlTypeTraits(static_cast<uint32_t>(type));
  GROVE_CHECK(traits.has_value(), "unknown ggml type ", static_cast<uint32_t>(type));
  return *traits;
}

std::string_view GgmlTypeName(GgmlType type) { return GgmlTraits(type).name; }

std::optional<GgmlType> ParseGgmlType(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const Entry& e : kTypes) {
    if (e.traits.name == lower) return static_cast<GgmlType>(e.id);
  }
  return std::nullopt;
}

}  // namespace grove
