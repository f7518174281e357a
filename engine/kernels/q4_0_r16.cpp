// Q4_0_R16 (q4_0_r16.h): the repack, its inverse and the scalar reference
// tile, which puts each row back together and runs Q4_0's reference dot.
#include "engine/kernels/q4_0_r16.h"

#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"

namespace ns::kernels {
namespace q4_0_r16 {
namespace {

size_t row_bytes_of(int64_t cols) { return static_cast<size_t>(cols / q4_0::kBlockElems) * q4_0::kBlockBytes; }

// The calling thread's scratch of at least `bytes` (grown, never shrunk: the
// expert cache repacks on its thread with no allocation once warm).
uint8_t* scratch(size_t bytes) {
  thread_local std::vector<uint8_t> buf;
  if (buf.size() < bytes) buf.resize(bytes);
  return buf.data();
}

// Row r of the group at g (nb blocks) in Q4_0's layout into row.
void gather_row(const uint8_t* g, int64_t nb, int r, uint8_t* row) {
  for (int64_t b = 0; b < nb; ++b, row += q4_0::kBlockBytes) {
    const uint8_t* gb = g + b * kGroupBlockBytes;
    std::memcpy(row, gb + 2 * r, 2);
    for (int i = 0; i < 16; i += 4) std::memcpy(row + 2 + i, gb + qs_offset(r, i), 4);
  }
}

[[noreturn]] void no_rows(const char* what) {
  throw Error(ErrorKind::internal, std::string(what) +
                                       ": a Q4_0_R16 matrix interleaves its rows; only matmul reads it (unpack_rows "
                                       "gives back Q4_0)");
}

}  // namespace

void dequantize(const void*, float*, int64_t) { no_rows("dequantize_row"); }
float vec_dot(const void*, const void*, int64_t) { no_rows("vec_dot"); }

void tile(const Tile& t) {
  const int64_t nb = t.n / q4_0::kBlockElems;
  uint8_t* row = scratch(row_bytes_of(t.n));
  for (int64_t r = 0; r < t.n_rows; ++r) {
    const uint8_t* w = t.w + r * t.w_stride;  // a tail row, in Q4_0's layout
    if (r < t.n_rows / kRows * kRows) {
      gather_row(t.w + r / kRows * kRows * t.w_stride, nb, static_cast<int>(r % kRows), row);
      w = row;
    }
    for (int64_t k = 0; k < t.n_tokens; ++k) t.y[k * t.y_stride + r] = q4_0::vec_dot(w, t.x + k * t.x_stride, t.n);
  }
}

}  // namespace q4_0_r16

GgmlType repacked_type(GgmlType t, int64_t rows) {
  return t == GgmlType::Q4_0 && rows >= q4_0_r16::kRows ? GgmlType::Q4_0_R16 : t;
}

namespace {

// Each whole group of 16 rows at data, copied to scratch first (the rewrite
// is in place): f(group, copy, blocks per row, row bytes). No-op where t has
// no layout for `rows` rows.
template <class F>
void each_group(GgmlType t, void* data, int64_t rows, int64_t cols, const char* what, F&& f) {
  using namespace q4_0_r16;
  if (repacked_type(t, rows) == t) return;
  require_whole_blocks(t, cols, what);
  const size_t rb = row_bytes_of(cols);
  uint8_t* copy = scratch(kRows * rb);
  for (int64_t g0 = 0; g0 + kRows <= rows; g0 += kRows) {
    uint8_t* g = static_cast<uint8_t*>(data) + g0 * rb;
    std::memcpy(copy, g, kRows * rb);
    f(g, copy, cols / q4_0::kBlockElems, rb);
  }
}

}  // namespace

void repack_rows(GgmlType t, void* data, int64_t rows, int64_t cols) {
  using namespace q4_0_r16;
  each_group(t, data, rows, cols, "repack_rows", [](uint8_t* g, const uint8_t* plain, int64_t nb, size_t rb) {
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* gb = g + b * kGroupBlockBytes;
      for (int r = 0; r < kRows; ++r) {
        const uint8_t* src = plain + r * rb + b * q4_0::kBlockBytes;
        std::memcpy(gb + 2 * r, src, 2);
        for (int i = 0; i < 16; i += 4) std::memcpy(gb + qs_offset(r, i), src + 2 + i, 4);
      }
    }
  });
}

void unpack_rows(GgmlType t, void* data, int64_t rows, int64_t cols) {
  each_group(t, data, rows, cols, "unpack_rows", [](uint8_t* g, const uint8_t* packed, int64_t nb, size_t rb) {
    for (int r = 0; r < q4_0_r16::kRows; ++r) q4_0_r16::gather_row(packed, nb, r, g + r * rb);
  });
}

}  // namespace ns::kernels
