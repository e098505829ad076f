// Weight-type conversions against ggml itself (libggml-base.so of node-llama-cpp, opened at test
// time; see ggml_reference.h): grove's dequantizers must give ggml's to_float bit for bit, on rows
// ggml quantized and on blocks of random bytes; grove's quantizers must write the bytes that
// ggml_quantize_chunk writes without an importance matrix (llama-quantize's output), or, where a
// difference is documented below, quantize no worse. Every candidate type is checked in each
// direction grove converts it (CanDequantize, CanQuantize); the others are named as skipped, so the
// test grows as types are added.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ggml_reference.h"
#include "io/ggml_type.h"
#include "quant/quant.h"

namespace grove {
namespace {

using testing::GgmlReference;

// Every type grove may come to compute with.
constexpr GgmlType kCandidates[] = {
    GgmlType::kF16,  GgmlType::kBF16, GgmlType::kQ8_0,   GgmlType::kQ4_0,   GgmlType::kQ4_1,
    GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ2_K,   GgmlType::kQ3_K,   GgmlType::kQ4_K,
    GgmlType::kQ5_K, GgmlType::kQ6_K, GgmlType::kIQ4_NL, GgmlType::kIQ4_XS, GgmlType::kMXFP4,
};

// How grove's quantizer of a type compares with ggml_quantize_chunk (imatrix null).
enum class Agreement {
  kBitExact,           // the same bytes on every input
  kDiffersDocumented,  // other bytes, for the reason given; error no worse than 1.05x ggml's
};
struct QuantExpectation {
  GgmlType type;
  Agreement agreement;
  const char* why;  // for kDiffersDocumented: what differs and why that is acceptable
};
// Types absent here are expected to be bit-exact: a new quantizer that differs fails until its
// difference is understood and written down here.
constexpr QuantExpectation kQuantExpectations[] = {
    {GgmlType::kQ8_0, Agreement::kBitExact, ""},   {GgmlType::kQ4_0, Agreement::kBitExact, ""},
    {GgmlType::kQ4_1, Agreement::kBitExact, ""},   {GgmlType::kQ5_0, Agreement::kBitExact, ""},
    {GgmlType::kQ5_1, Agreement::kBitExact, ""},   {GgmlType::kQ2_K, Agreement::kBitExact, ""},
    {GgmlType::kQ3_K, Agreement::kBitExact, ""},   {GgmlType::kQ4_K, Agreement::kBitExact, ""},
    {GgmlType::kQ5_K, Agreement::kBitExact, ""},   {GgmlType::kQ6_K, Agreement::kBitExact, ""},
    {GgmlType::kIQ4_NL, Agreement::kBitExact, ""}, {GgmlType::kIQ4_XS, Agreement::kBitExact, ""},
    {GgmlType::kMXFP4, Agreement::kBitExact, ""},
};

QuantExpectation ExpectationOf(GgmlType type) {
  for (const QuantExpectation& e : kQuantExpectations) {
    if (e.type == type) return e;
  }
  return {type, Agreement::kBitExact, ""};
}

bool IsHalfFormat(GgmlType type) { return type == GgmlType::kF16 || type == GgmlType::kBF16; }

std::string Name(GgmlType type) { return std::string(GgmlTypeName(type)); }

// The candidates grove converts one way (`can` is CanDequantize or CanQuantize), after printing
// the others; with quantized_only, f16 and bf16 (checked on their own) are left out.
std::vector<GgmlType> CandidatesGrove(bool (*can)(GgmlType), const char* does,
                                      bool quantized_only) {
  std::vector<GgmlType> supported;
  std::string skipped;
  for (GgmlType type : kCandidates) {
    if (quantized_only && IsHalfFormat(type)) continue;
    if (!can(type)) {
      skipped += ' ';
      skipped += Name(type);
      continue;
    }
    EXPECT_TRUE(GgmlReference::Get().Converts(type)) << Name(type);
    supported.push_back(type);
  }
  if (!skipped.empty()) std::printf("  grove does not %s (skipped):%s\n", does, skipped.c_str());
  return supported;
}

// ---- inputs

struct Inputs {
  std::string name;
  int64_t n_per_row;
  int64_t nrows;
  std::vector<float> x;  // nrows * n_per_row
};

// The input sets every conversion is checked on, as rows of 256 and of 512 elements (multiples of
// every block size).
const std::vector<Inputs>& InputSets() {
  static const std::vector<Inputs> sets = [] {
    std::vector<Inputs> out;
    for (int64_t n_per_row : {256, 512}) {
      const int64_t nrows = 4096 / n_per_row;
      const size_t n = static_cast<size_t>(n_per_row * nrows);
      std::mt19937 rng(static_cast<uint32_t>(n_per_row));
      std::normal_distribution<float> normal(0.0f, 1.0f);
      std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
      auto add = [&](const std::string& name, auto&& value) {
        Inputs in{name + "/" + std::to_string(n_per_row), n_per_row, nrows, {}};
        in.x.resize(n);
        for (size_t i = 0; i < n; ++i) in.x[i] = value(i);
        out.push_back(std::move(in));
      };
      add("normal", [&](size_t) { return normal(rng); });
      // Magnitudes 1e-3 and 1e3 mixed in every block.
      add("outliers", [&](size_t) {
        const float sign = uniform(rng) < 0.5f ? -1.0f : 1.0f;
        const float magnitude = uniform(rng) < 0.5f ? 1e-3f : 1e3f;
        return sign * magnitude * (0.5f + uniform(rng));
      });
      // Normal values with one large value every 37 elements.
      add("spikes", [&](size_t i) { return i % 37 == 5 ? 50.0f : normal(rng); });
      // Each 32 elements at their own scale, 1e-4 .. 1e4 (the k-quants' sub-block scales).
      float block_scale = 1.0f;
      add("block_scales", [&](size_t i) {
        if (i % 32 == 0) block_scale = std::pow(10.0f, -4.0f + 8.0f * uniform(rng));
        return block_scale * normal(rng);
      });
      add("zero", [](size_t) { return 0.0f; });
      add("constant", [](size_t) { return 0.37f; });
      add("negative_constant", [](size_t) { return -1.5f; });
      add("denormal", [&](size_t) { return 1e-40f * normal(rng); });  // float subnormals
      add("tiny", [&](size_t) { return 1e-6f * normal(rng); });       // fp16-subnormal scales
      add("negative", [&](size_t) { return -std::fabs(normal(rng)); });
      // Scales beyond fp16's range (they round to inf in the block).
      add("overflow", [&](size_t) { return 1e6f * normal(rng); });
      add("positive_offset", [&](size_t) { return 3.0f + normal(rng); });
      // Multiples of 1/4 in [-2, 2]: many values at rounding ties.
      add("grid", [&](size_t) { return std::floor(uniform(rng) * 17.0f) / 4.0f - 2.0f; });
    }
    return out;
  }();
  return sets;
}

std::vector<uint8_t> GgmlQuantize(GgmlType type, const Inputs& in) {
  std::vector<uint8_t> bytes(static_cast<size_t>(GgmlRowBytes(type, in.n_per_row) * in.nrows + 64),
                             0xa5);
  const size_t written =
      GgmlReference::Get().Quantize(type, in.x.data(), bytes.data(), in.nrows, in.n_per_row);
  EXPECT_EQ(written, static_cast<size_t>(GgmlRowBytes(type, in.n_per_row) * in.nrows));
  for (size_t i = bytes.size() - 64; i < bytes.size(); ++i) {
    EXPECT_EQ(bytes[i], 0xa5) << "ggml wrote past the rows";
  }
  bytes.resize(bytes.size() - 64);
  return bytes;
}

std::vector<uint8_t> GroveQuantize(GgmlType type, const Inputs& in) {
  const int64_t row_bytes = GgmlRowBytes(type, in.n_per_row);
  std::vector<uint8_t> bytes(static_cast<size_t>(row_bytes * in.nrows));
  for (int64_t r = 0; r < in.nrows; ++r) {
    QuantizeRow(type, in.x.data() + r * in.n_per_row, bytes.data() + r * row_bytes, in.n_per_row);
  }
  return bytes;
}

std::vector<float> GgmlDequantize(GgmlType type, const std::vector<uint8_t>& bytes, int64_t n) {
  std::vector<float> y(static_cast<size_t>(n));
  GgmlReference::Get().Dequantize(type, bytes.data(), y.data(), n);
  return y;
}

std::vector<float> GroveDequantize(GgmlType type, const std::vector<uint8_t>& bytes,
                                   int64_t n_per_row, int64_t nrows) {
  const int64_t row_bytes = GgmlRowBytes(type, n_per_row);
  std::vector<float> y(static_cast<size_t>(n_per_row * nrows));
  for (int64_t r = 0; r < nrows; ++r) {
    DequantizeRow(type, bytes.data() + r * row_bytes, y.data() + r * n_per_row, n_per_row);
  }
  return y;
}

// Index of the first element whose float bits differ, or nullopt.
std::optional<size_t> FirstBitDifference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 0;
  if (std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0) return std::nullopt;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i])) return i;
  }
  return std::nullopt;
}

std::string DescribeDifference(const std::vector<float>& got, const std::vector<float>& want,
                               size_t i, int64_t block_size) {
  std::ostringstream s;
  s.precision(9);
  s << "element " << i << " (block " << static_cast<int64_t>(i) / block_size << "): grove "
    << got[i] << " (0x" << std::hex << std::bit_cast<uint32_t>(got[i]) << std::dec << "), ggml "
    << want[i] << " (0x" << std::hex << std::bit_cast<uint32_t>(want[i]) << std::dec << ")";
  return s.str();
}

double RmsError(const std::vector<float>& y, const std::vector<float>& x) {
  double sum = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double d = static_cast<double>(y[i]) - static_cast<double>(x[i]);
    sum += d * d;
  }
  return std::sqrt(sum / static_cast<double>(x.size()));
}

// ---- (a) dequantization

TEST(QuantReferenceTest, DequantizesGgmlQuantizedRowsBitForBit) {
  GROVE_SKIP_WITHOUT_GGML();
  for (GgmlType type : CandidatesGrove(CanDequantize, "dequantize", false)) {
    int failures = 0;
    for (const Inputs& in : InputSets()) {
      const std::vector<uint8_t> bytes = GgmlQuantize(type, in);
      const std::vector<float> want = GgmlDequantize(type, bytes, in.n_per_row * in.nrows);
      const std::vector<float> got = GroveDequantize(type, bytes, in.n_per_row, in.nrows);
      if (auto i = FirstBitDifference(got, want); i && ++failures <= 3) {
        ADD_FAILURE() << Name(type) << " on " << in.name << ": "
                      << DescribeDifference(got, want, *i, GgmlTraits(type).block_size);
      }
    }
    EXPECT_EQ(failures, 0) << Name(type) << ": input sets whose dequantization differs";
    std::printf("  %-7s dequantization of ggml's rows: %s\n", Name(type).c_str(),
                failures == 0 ? "bit-exact" : "DIFFERS");
  }
}

// Offsets of the fp16 scale fields (d, and dmin or m) in each block layout: random bytes there
// could be inf or NaN, so they are replaced by random finite halves.
std::vector<int> HalfFieldOffsets(GgmlType type) {
  switch (type) {
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_0:
    case GgmlType::kQ5_0:
    case GgmlType::kIQ4_NL:
    case GgmlType::kIQ4_XS:
      return {0};  // d first
    case GgmlType::kQ4_1:
    case GgmlType::kQ5_1:
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
      return {0, 2};  // d, then m / dmin
    case GgmlType::kQ2_K:
      return {80, 82};  // scales[16], qs[64], then d, dmin
    case GgmlType::kQ3_K:
      return {108};  // hmask[32], qs[64], scales[12], then d
    case GgmlType::kQ6_K:
      return {208};  // ql[128], qh[64], scales[16], then d
    case GgmlType::kMXFP4:
      return {};  // an E8M0 exponent byte, not an fp16 (see ExponentFieldOffset)
    default:
      ADD_FAILURE() << "no block layout for " << Name(type);
      return {};
  }
}

// Offset of an E8M0 exponent byte in the block, or -1 for the types without one. Random bytes
// there are kept to 0xFC and below: 0xFF is NaN, and from 0xFD on the largest level (12, times
// 2^(e-128)) passes the largest float.
int ExponentFieldOffset(GgmlType type) { return type == GgmlType::kMXFP4 ? 0 : -1; }
constexpr uint8_t kLargestFiniteExponent = 0xFC;

TEST(QuantReferenceTest, DequantizesRandomBlocksBitForBit) {
  GROVE_SKIP_WITHOUT_GGML();
  for (GgmlType type : CandidatesGrove(CanDequantize, "dequantize", true)) {
    const GgmlTypeTraits traits = GgmlTraits(type);
    const int64_t blocks_per_row = 8;
    const int64_t n_per_row = blocks_per_row * traits.block_size;
    const int64_t nrows = 256;
    std::mt19937 rng(static_cast<uint32_t>(type) + 1000);
    std::vector<uint8_t> bytes(static_cast<size_t>(blocks_per_row * nrows * traits.type_size));
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
    const std::vector<int> offsets = HalfFieldOffsets(type);
    for (size_t block = 0; block < bytes.size(); block += static_cast<size_t>(traits.type_size)) {
      for (int offset : offsets) {
        uint16_t h;
        do {
          h = static_cast<uint16_t>(rng());
        } while ((h & 0x7c00u) == 0x7c00u);  // inf or NaN
        std::memcpy(&bytes[block + static_cast<size_t>(offset)], &h, sizeof h);
      }
      if (const int e = ExponentFieldOffset(type); e >= 0) {
        while (bytes[block + static_cast<size_t>(e)] > kLargestFiniteExponent)
          bytes[block + static_cast<size_t>(e)] = static_cast<uint8_t>(rng());
      }
    }
    const std::vector<float> want = GgmlDequantize(type, bytes, n_per_row * nrows);
    const size_t non_finite = static_cast<size_t>(
        std::count_if(want.begin(), want.end(), [](float v) { return !std::isfinite(v); }));
    EXPECT_EQ(non_finite, 0u) << Name(type)
                              << ": ggml gives non-finite values: the scale offsets are wrong";
    const std::vector<float> got = GroveDequantize(type, bytes, n_per_row, nrows);
    const std::optional<size_t> i = FirstBitDifference(got, want);
    if (i)
      ADD_FAILURE() << Name(type) << ": " << DescribeDifference(got, want, *i, traits.block_size);
    std::printf("  %-7s dequantization of %lld random blocks: %s\n", Name(type).c_str(),
                static_cast<long long>(blocks_per_row * nrows), i ? "DIFFERS" : "bit-exact");
  }
}

// Every fp16 and bf16 bit pattern; NaNs need only be NaNs of the same sign on both sides: ggml's
// fp16 conversion goes through a float multiply, which quiets the 1022 signaling NaNs (0x7c01 ->
// 0x7fc02000), where grove keeps the payload as it is (0x7f802000).
TEST(QuantReferenceTest, DequantizesEveryHalfBitPattern) {
  GROVE_SKIP_WITHOUT_GGML();
  for (GgmlType type : {GgmlType::kF16, GgmlType::kBF16}) {
    ASSERT_TRUE(CanDequantize(type));
    std::vector<uint8_t> bytes(65536 * 2);
    for (uint32_t h = 0; h < 65536; ++h) {
      const uint16_t v = static_cast<uint16_t>(h);
      std::memcpy(&bytes[h * 2], &v, 2);
    }
    const std::vector<float> want = GgmlDequantize(type, bytes, 65536);
    const std::vector<float> got = GroveDequantize(type, bytes, 65536, 1);
    int mismatches = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      const bool same = std::isnan(want[i])
                            ? std::isnan(got[i]) && std::signbit(got[i]) == std::signbit(want[i])
                            : std::bit_cast<uint32_t>(got[i]) == std::bit_cast<uint32_t>(want[i]);
      if (!same && ++mismatches <= 5) {
        ADD_FAILURE() << Name(type) << " 0x" << std::hex << i << std::dec << ": "
                      << DescribeDifference(got, want, i, 1);
      }
    }
    EXPECT_EQ(mismatches, 0) << Name(type);
  }
}

// ---- (b) quantization

TEST(QuantReferenceTest, QuantizesLikeGgml) {
  GROVE_SKIP_WITHOUT_GGML();
  for (GgmlType type : CandidatesGrove(CanQuantize, "write", true)) {
    const GgmlTypeTraits traits = GgmlTraits(type);
    const QuantExpectation expected = ExpectationOf(type);
    int sets_differing = 0;
    int64_t blocks_differing = 0;
    int64_t blocks = 0;
    double max_abs_difference = 0.0;  // between grove's and ggml's dequantized values
    double worst_error_ratio = 0.0;   // grove's RMS error / ggml's, over the sets that differ
    for (const Inputs& in : InputSets()) {
      const std::vector<uint8_t> want = GgmlQuantize(type, in);
      const std::vector<uint8_t> got = GroveQuantize(type, in);
      ASSERT_EQ(got.size(), want.size());
      blocks += static_cast<int64_t>(want.size()) / traits.type_size;
      if (got == want) continue;
      ++sets_differing;
      std::string first;
      for (size_t b = 0; b < want.size(); b += static_cast<size_t>(traits.type_size)) {
        std::string offsets;
        for (int64_t k = 0; k < traits.type_size; ++k) {
          if (got[b + k] == want[b + k]) continue;
          offsets += ' ';
          offsets += std::to_string(k);
        }
        if (offsets.empty()) continue;
        ++blocks_differing;
        if (first.empty()) {
          first = "block " + std::to_string(b / traits.type_size) + ", bytes" + offsets;
        }
      }
      const int64_t n = in.n_per_row * in.nrows;
      const std::vector<float> y_ggml = GgmlDequantize(type, want, n);
      const std::vector<float> y_grove = GroveDequantize(type, got, in.n_per_row, in.nrows);
      double set_max = 0.0;
      for (size_t i = 0; i < y_ggml.size(); ++i) {
        set_max = std::max(set_max, std::fabs(static_cast<double>(y_grove[i]) - y_ggml[i]));
      }
      max_abs_difference = std::max(max_abs_difference, set_max);
      const double error_grove = RmsError(y_grove, in.x);
      const double error_ggml = RmsError(y_ggml, in.x);
      const double ratio =
          error_ggml > 0.0 ? error_grove / error_ggml : (error_grove > 0 ? 1e9 : 1);
      worst_error_ratio = std::max(worst_error_ratio, ratio);
      std::printf(
          "    %s on %s: first difference at %s; max |grove - ggml| %.6g; RMS error grove "
          "%.6g, ggml %.6g\n",
          Name(type).c_str(), in.name.c_str(), first.c_str(), set_max, error_grove, error_ggml);
      if (expected.agreement == Agreement::kBitExact) {
        if (sets_differing <= 3) {
          ADD_FAILURE() << Name(type) << " on " << in.name << ": grove's bytes differ from ggml's ("
                        << first << ")";
        }
      } else {
        EXPECT_LE(error_grove, 1.05 * error_ggml)
            << Name(type) << " on " << in.name << ": grove quantizes worse than ggml (documented "
            << "difference: " << expected.why << ")";
      }
    }
    if (expected.agreement == Agreement::kBitExact) {
      EXPECT_EQ(sets_differing, 0) << Name(type) << ": input sets quantized unlike ggml";
    }
    if (sets_differing == 0) {
      std::printf("  %-7s quantization: bit-exact on %zu input sets\n", Name(type).c_str(),
                  InputSets().size());
    } else {
      std::printf(
          "  %-7s quantization: DIFFERS on %d of %zu input sets (%lld of %lld blocks); "
          "max |grove - ggml| dequantized %.6g; worst RMS error ratio grove/ggml %.4f\n",
          Name(type).c_str(), sets_differing, InputSets().size(),
          static_cast<long long>(blocks_differing), static_cast<long long>(blocks),
          max_abs_difference, worst_error_ratio);
    }
  }
}

// ---- (c) f16 and bf16

// fp32 -> half -> fp32 against ggml (ggml_quantize_chunk's f16/bf16 rows, then to_float), on the
// input sets and on random finite float bit patterns (every exponent, rounding ties included).
TEST(QuantReferenceTest, HalfFormatsRoundTripLikeGgml) {
  GROVE_SKIP_WITHOUT_GGML();
  std::vector<Inputs> sets = InputSets();
  Inputs bits{"random_bits", 4096, 256, {}};
  std::mt19937 rng(17);
  for (int64_t i = 0; i < bits.n_per_row * bits.nrows; ++i) {
    uint32_t u;
    do {
      u = static_cast<uint32_t>(rng());
      // Half of them at fp16 or bf16 rounding ties.
      if (i % 4 == 1) u = (u & ~0x1fffu) | 0x1000u;  // fp16 tie (normal halves)
      if (i % 4 == 3) u = (u & ~0xffffu) | 0x8000u;  // bf16 tie
    } while ((u & 0x7f800000u) == 0x7f800000u);      // finite only
    bits.x.push_back(std::bit_cast<float>(u));
  }
  sets.push_back(std::move(bits));
  for (GgmlType type : {GgmlType::kF16, GgmlType::kBF16}) {
    ASSERT_TRUE(CanQuantize(type) && CanDequantize(type));
    int failures = 0;
    for (const Inputs& in : sets) {
      const std::vector<uint8_t> want = GgmlQuantize(type, in);
      const std::vector<uint8_t> got = GroveQuantize(type, in);
      size_t i = 0;
      while (i < want.size() && got[i] == want[i] && got[i + 1] == want[i + 1]) i += 2;
      if (i < want.size() && ++failures <= 3) {
        ADD_FAILURE() << Name(type) << " on " << in.name << ": element " << i / 2 << " ("
                      << in.x[i / 2] << ", 0x" << std::hex << std::bit_cast<uint32_t>(in.x[i / 2])
                      << ") grove 0x" << (got[i] | got[i + 1] << 8) << ", ggml 0x"
                      << (want[i] | want[i + 1] << 8);
      }
      const int64_t n = in.n_per_row * in.nrows;
      const std::vector<float> y_ggml = GgmlDequantize(type, want, n);
      const std::vector<float> y_grove = GroveDequantize(type, got, in.n_per_row, in.nrows);
      if (auto j = FirstBitDifference(y_grove, y_ggml); j && ++failures <= 3) {
        ADD_FAILURE() << Name(type) << " round trip on " << in.name << ": "
                      << DescribeDifference(y_grove, y_ggml, *j, 1);
      }
    }
    EXPECT_EQ(failures, 0) << Name(type) << ": conversions that differ from ggml's";
    std::printf("  %-7s fp32 round trip on %zu input sets: %s\n", Name(type).c_str(), sets.size(),
                failures == 0 ? "bit-exact" : "DIFFERS");
  }
}

}  // namespace
}  // namespace grove
