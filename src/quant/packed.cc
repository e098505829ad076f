#include "quant/packed.h"

#include <cstring>

#include "base/error.h"
#include "quant/blocks.h"

namespace grove {
namespace {

// The layout as a list of pieces: for each unit (a block of 32, or a Q4_K super-block of 256) the
// bytes of row j's unit that move to one place in the group. Pack and unpack walk the same list
// in opposite directions.
struct Piece {
  int64_t row_offset;    // within the row's unit
  int64_t group_offset;  // within the group
  int size;
  bool biased;  // Q8_0 quants: stored as q + 128 (an xor with 0x80, its own inverse)
};

struct Layout {
  int unit_elements;
  int row_unit_bytes;  // one row's unit in GGUF
  int64_t n_units;
  template <typename Fn>
  void ForEachPiece(GgmlType type, int64_t u, int j, Fn&& fn) const;
};

Layout LayoutOf(GgmlType type, int64_t n_in) {
  GROVE_CHECK(HasGroupLayout(type), "packed: no row-group layout for ", GgmlTypeName(type));
  Layout layout = type == GgmlType::kQ8_0 ? Layout{kQBlock, sizeof(BlockQ8_0)}
                  : type == GgmlType::kQ4_0 || type == GgmlType::kIQ4_NL
                      ? Layout{kQBlock, sizeof(BlockQ4_0)}  // IQ4_NL's block is Q4_0's shape
                  : type == GgmlType::kF16 ? Layout{1, sizeof(uint16_t)}
                                           : Layout{kKBlock, sizeof(BlockQ4_K)};
  GROVE_CHECK(n_in > 0 && n_in % layout.unit_elements == 0, "packed: n_in ", n_in,
              " is not a multiple of ", layout.unit_elements, " for ", GgmlTypeName(type));
  layout.n_units = n_in / layout.unit_elements;
  return layout;
}

template <typename Fn>
void Layout::ForEachPiece(GgmlType type, int64_t u, int j, Fn&& fn) const {
  constexpr int kChunk = 4 * kGroupRows;  // 4 bytes of each of the 16 rows
  if (type == GgmlType::kF16) {
    fn(Piece{0, (u * kGroupRows + j) * 2, 2, false});  // element u of the 16 rows side by side
    return;
  }
  if (type == GgmlType::kQ4_K) {
    // Super-block by super-block (2304 bytes, whole cache lines): 4 pairs of sub-blocks x 8
    // chunks of quants, then d x 16, dmin x 16, then the 12 scale bytes as 3 chunks.
    const int64_t base = u * kGroupRows * row_unit_bytes;
    for (int i = 0; i < 32; ++i) fn(Piece{4 + 12 + 4 * i, base + i * kChunk + 4 * j, 4, false});
    fn(Piece{0, base + kQ4_KGroupD + 2 * j, 2, false});
    fn(Piece{2, base + kQ4_KGroupDmin + 2 * j, 2, false});
    for (int w = 0; w < 3; ++w)
      fn(Piece{4 + 4 * w, base + kQ4_KGroupScales + w * kQ4_KGroupScaleChunk + 4 * j, 4, false});
    return;
  }
  // Q8_0 / Q4_0 / IQ4_NL: the quants of all blocks first, 8 (4) chunks per block, so that every
  // block starts on a cache line; then all the fp16 scales, 16 per block.
  const int chunks = (row_unit_bytes - 2) / 4;
  for (int c = 0; c < chunks; ++c) {
    fn(Piece{2 + 4 * c, (u * chunks + c) * kChunk + 4 * j, 4, type == GgmlType::kQ8_0});
  }
  fn(Piece{0, n_units * chunks * kChunk + (u * kGroupRows + j) * 2, 2, false});
}

void Move(const uint8_t* from, uint8_t* to, const Piece& p) {
  if (p.size == 4) {  // every piece but the fp16 scales: one 32-bit move (packing is load time)
    uint32_t v;
    std::memcpy(&v, from, 4);
    if (p.biased) v ^= 0x80808080u;
    std::memcpy(to, &v, 4);
    return;
  }
  std::memcpy(to, from, p.size);
  if (p.biased) {
    for (int i = 0; i < p.size; ++i) to[i] ^= 0x80;
  }
}

}  // namespace

bool HasGroupLayout(GgmlType type) {
  return type == GgmlType::kQ8_0 || type == GgmlType::kQ4_0 || type == GgmlType::kIQ4_NL ||
         type == GgmlType::kQ4_K || type == GgmlType::kF16;
}

int64_t GroupBytes(GgmlType type, int64_t n_in) {
  const Layout layout = LayoutOf(type, n_in);
  return n_in / layout.unit_elements * kGroupRows * layout.row_unit_bytes;
}

void PackRowGroup(GgmlType type, const void* rows, int64_t row_bytes, int n_rows, int64_t n_in,
                  void* group) {
  const Layout layout = LayoutOf(type, n_in);
  GROVE_CHECK(n_rows >= 1 && n_rows <= kGroupRows, "packed: ", n_rows, " rows in a group");
  const auto* src = static_cast<const uint8_t*>(rows);
  auto* dst = static_cast<uint8_t*>(group);
  // Padding rows are all zero bytes: scale 0 (and min 0), so they compute to 0.
  if (n_rows < kGroupRows) std::memset(dst, 0, GroupBytes(type, n_in));
  if (type == GgmlType::kF16) {
    // ForEachPiece's F16 walk, element by element, written out: a 2-byte piece through the
    // general walk packed 1.7 GB/s, a tenth of the other types' speed.
    for (int j = 0; j < n_rows; ++j) {
      const uint8_t* row = src + j * row_bytes;
      for (int64_t u = 0; u < n_in; ++u)
        std::memcpy(dst + (u * kGroupRows + j) * 2, row + u * 2, 2);
    }
    return;
  }
  for (int64_t u = 0; u < layout.n_units; ++u) {
    for (int j = 0; j < n_rows; ++j) {
      const uint8_t* row_unit = src + j * row_bytes + u * layout.row_unit_bytes;
      layout.ForEachPiece(type, u, j, [&](const Piece& p) {
        Move(row_unit + p.row_offset, dst + p.group_offset, p);
      });
    }
  }
}

void UnpackRowGroup(GgmlType type, const void* group, int n_rows, int64_t n_in, void* rows,
                    int64_t row_bytes) {
  const Layout layout = LayoutOf(type, n_in);
  GROVE_CHECK(n_rows >= 1 && n_rows <= kGroupRows, "packed: ", n_rows, " rows in a group");
  const auto* src = static_cast<const uint8_t*>(group);
  auto* dst = static_cast<uint8_t*>(rows);
  for (int64_t u = 0; u < layout.n_units; ++u) {
    for (int j = 0; j < n_rows; ++j) {
      uint8_t* row_unit = dst + j * row_bytes + u * layout.row_unit_bytes;
      layout.ForEachPiece(type, u, j, [&](const Piece& p) {
        Move(src + p.group_offset, row_unit + p.row_offset, p);
      });
    }
  }
}

}  // namespace grove
