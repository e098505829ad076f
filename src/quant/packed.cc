#include "quant/packed.h"

#include <cstring>

#include "base/error.h"
#include "quant/blocks.h"

namespace grove {
namespace {

// Quant bytes of one block of one row, and the encoding of 4 of them in a group (q + 128 for
// Q8_0; the xor is its own inverse).
int BlockQuantBytes(GgmlType type) { return type == GgmlType::kQ8_0 ? kQBlock : kQBlock / 2; }
uint32_t Encode(GgmlType type, uint32_t four) {
  return type == GgmlType::kQ8_0 ? four ^ 0x80808080u : four;
}

// Where bytes 4c .. 4c + 3 of row j's block b go in a group, and where its scale goes.
struct GroupAddress {
  int64_t quant_bytes_per_block;  // kGroupRows x BlockQuantBytes
  int64_t scales_offset;
  int64_t Quants(int64_t b, int j, int c) const {
    return b * quant_bytes_per_block + c * (4 * kGroupRows) + j * 4;
  }
  int64_t Scale(int64_t b, int j) const {
    return scales_offset + (b * kGroupRows + j) * static_cast<int64_t>(sizeof(uint16_t));
  }
};

GroupAddress AddressOf(GgmlType type, int64_t n_in) {
  GROVE_CHECK(HasGroupLayout(type), "packed: no row-group layout for ", GgmlTypeName(type));
  GROVE_CHECK(n_in > 0 && n_in % kQBlock == 0, "packed: n_in ", n_in, " is not a multiple of 32");
  const int64_t per_block = kGroupRows * BlockQuantBytes(type);
  return {per_block, per_block * (n_in / kQBlock)};
}

// GGUF block b of a row: 2 bytes of fp16 scale, then the quants (BlockQ8_0 and BlockQ4_0).
int64_t BlockOffset(GgmlType type, int64_t b) { return b * (2 + BlockQuantBytes(type)); }

}  // namespace

bool HasGroupLayout(GgmlType type) { return type == GgmlType::kQ8_0 || type == GgmlType::kQ4_0; }

int64_t GroupBytes(GgmlType type, int64_t n_in) {
  const GroupAddress a = AddressOf(type, n_in);
  return a.scales_offset + (n_in / kQBlock) * kGroupRows * static_cast<int64_t>(sizeof(uint16_t));
}

void PackRowGroup(GgmlType type, const void* rows, int64_t row_bytes, int n_rows, int64_t n_in,
                  void* group) {
  const GroupAddress a = AddressOf(type, n_in);
  GROVE_CHECK(n_rows >= 1 && n_rows <= kGroupRows, "packed: ", n_rows, " rows in a group");
  const auto* src = static_cast<const uint8_t*>(rows);
  auto* dst = static_cast<uint8_t*>(group);
  const int chunks = BlockQuantBytes(type) / 4;
  const uint32_t zero = type == GgmlType::kQ8_0 ? 0x80808080u : 0x88888888u;  // q = 0, encoded
  for (int64_t b = 0; b < n_in / kQBlock; ++b) {
    for (int j = 0; j < kGroupRows; ++j) {
      const uint8_t* block = src + j * row_bytes + BlockOffset(type, b);
      uint16_t d = 0;
      if (j < n_rows) std::memcpy(&d, block, sizeof(d));
      std::memcpy(dst + a.Scale(b, j), &d, sizeof(d));
      for (int c = 0; c < chunks; ++c) {
        uint32_t four = zero;
        if (j < n_rows) {
          std::memcpy(&four, block + 2 + 4 * c, sizeof(four));
          four = Encode(type, four);
        }
        std::memcpy(dst + a.Quants(b, j, c), &four, sizeof(four));
      }
    }
  }
}

void UnpackRowGroup(GgmlType type, const void* group, int n_rows, int64_t n_in, void* rows,
                    int64_t row_bytes) {
  const GroupAddress a = AddressOf(type, n_in);
  GROVE_CHECK(n_rows >= 1 && n_rows <= kGroupRows, "packed: ", n_rows, " rows in a group");
  const auto* src = static_cast<const uint8_t*>(group);
  auto* dst = static_cast<uint8_t*>(rows);
  const int chunks = BlockQuantBytes(type) / 4;
  for (int64_t b = 0; b < n_in / kQBlock; ++b) {
    for (int j = 0; j < n_rows; ++j) {
      uint8_t* block = dst + j * row_bytes + BlockOffset(type, b);
      std::memcpy(block, src + a.Scale(b, j), sizeof(uint16_t));
      for (int c = 0; c < chunks; ++c) {
        uint32_t four;
        std::memcpy(&four, src + a.Quants(b, j, c), sizeof(four));
        four = Encode(type, four);
        std::memcpy(block + 2 + 4 * c, &four, sizeof(four));
      }
    }
  }
}

}  // namespace grove
