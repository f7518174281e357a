// The interleaved Q4_0 layout (q4_0_r16.h): the in-place repack and its
// inverse, and matmul on it under every ISA path against matmul on the plain
// Q4_0 rows under the same path: every row, of whole groups or after the last
// one (kept in Q4_0's layout), gives the plain kernel's bits exactly (the
// layout's kernels repeat its float order, q4_0_r16_simd.h), so a repacked
// expert changes no output; on the scalar path both are q4_0::vec_dot.
// Weights are random bytes (every nibble value) with random scales.
#include <cstring>

#include "common/error.h"
#include "engine/kernels/q4_0_r16.h"
#include "engine/util/thread_pool.h"
#include "kernel_test_util.h"

using namespace ns::kernels;
using namespace ns::kernels::test;

namespace {

std::vector<uint8_t> random_q4_0(int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> scale(0.0f, 0.01f);
  const size_t rb = row_bytes(GgmlType::Q4_0, cols);
  std::vector<uint8_t> w(rb * static_cast<size_t>(rows));
  for (size_t b = 0; b < w.size(); b += q4_0::kBlockBytes) {
    store_u16(&w[b], fp32_to_fp16(scale(rng)));
    for (size_t i = 2; i < q4_0::kBlockBytes; ++i) w[b + i] = static_cast<uint8_t>(rng());
  }
  return w;
}

}  // namespace

TEST_CASE("repack_rows interleaves whole groups of 16 Q4_0 rows in place; unpack_rows undoes it") {
  CHECK(repacked_type(GgmlType::Q4_0, 16) == GgmlType::Q4_0_R16);
  CHECK(repacked_type(GgmlType::Q4_0, 15) == GgmlType::Q4_0);  // not one whole group
  CHECK(repacked_type(GgmlType::Q8_0, 64) == GgmlType::Q8_0);  // no layout for it (yet)
  CHECK(is_supported(GgmlType::Q4_0_R16));
  CHECK_FALSE(ns::gguf::type_traits(static_cast<uint32_t>(GgmlType::Q4_0_R16)).has_value());  // never in a file
  for (const int64_t rows : {1, 15, 16, 29, 48}) {
    CAPTURE(rows);
    const int64_t cols = 96;
    const auto plain = random_q4_0(rows, cols, 11);
    auto w = plain;
    repack_rows(GgmlType::Q4_0, w.data(), rows, cols);
    const size_t rb = row_bytes(GgmlType::Q4_0, cols);
    const size_t grouped = static_cast<size_t>(rows / q4_0_r16::kRows * q4_0_r16::kRows) * rb;
    CHECK((std::memcmp(w.data(), plain.data(), grouped) != 0) == (grouped > 0));
    CHECK(std::memcmp(w.data() + grouped, plain.data() + grouped, w.size() - grouped) == 0);  // the tail as it was
    if (grouped > 0) {
      // Row 5's block 1: its scale at 2 * 5, its qs byte 6 in slice 1, lane 5.
      const uint8_t* gb = w.data() + q4_0_r16::kGroupBlockBytes;
      const uint8_t* src = plain.data() + 5 * rb + q4_0::kBlockBytes;
      CHECK(load_u16(gb + 10) == load_u16(src));
      CHECK(gb[q4_0_r16::kScaleBytes + 64 + 4 * 5 + 2] == src[2 + 6]);
    }
    unpack_rows(GgmlType::Q4_0, w.data(), rows, cols);
    CHECK(w == plain);
  }
}

TEST_CASE("matmul on Q4_0_R16 gives the plain Q4_0 kernel's bits on every ISA path") {
  ns::ThreadPool pool(2);
  // 45 rows: two groups and a 13-row tail; 100: chunks of 48 rows on two
  // threads, the last one tail only. 1-17 tokens: the AVX-512 tile's pairs and
  // lone token, the plain kernels' 4-token tiles, their tails and vec_dot.
  for (const int64_t rows : {16, 45, 100}) {
    for (const int64_t cols : {7 * 32, 33 * 32, 300 * 32}) {
      const auto plain = random_q4_0(rows, cols, 100 + static_cast<uint32_t>(rows + cols));
      auto packed = plain;
      repack_rows(GgmlType::Q4_0, packed.data(), rows, cols);
      const size_t rb = row_bytes(GgmlType::Q4_0, cols);
      const MatrixView view{GgmlType::Q4_0_R16, packed.data(), rows, cols, rb};
      const MatrixView plain_view{GgmlType::Q4_0, plain.data(), rows, cols, rb};
      for (const int64_t n_tokens : {1, 2, 3, 4, 5, 8, 9, 16, 17}) {
        if (cols == 300 * 32 && n_tokens > 9) continue;  // long rows: few tokens suffice
        // Large activations: q_x reaches +-127 in every block.
        const auto x = random_normal(static_cast<size_t>(n_tokens * cols), 7 + static_cast<uint32_t>(n_tokens), 3.0f);
        for (const Isa isa : isas_to_test()) {
          CAPTURE(rows);
          CAPTURE(cols);
          CAPTURE(n_tokens);
          CAPTURE(isa_name(isa));
          IsaScope scope(isa);
          MatmulScratch scratch;
          std::vector<float> y(static_cast<size_t>(n_tokens * rows), -1.0f), y_plain(y.size(), -2.0f);
          matmul(view, x.data(), n_tokens, y.data(), pool, scratch);
          matmul(plain_view, x.data(), n_tokens, y_plain.data(), pool, scratch);
          for (int64_t k = 0; k < n_tokens; ++k) {
            const auto xa = activations(GgmlType::Q4_0, isa, x.data() + k * cols, cols);
            for (int64_t r = 0; r < rows; ++r) {
              const size_t i = static_cast<size_t>(k * rows + r);
              if (y[i] != y_plain[i])
                FAIL_CHECK("token " << k << " row " << r << ": got " << y[i] << ", want " << y_plain[i]);
              if (isa == Isa::scalar &&
                  y_plain[i] != q4_0::vec_dot(plain.data() + static_cast<size_t>(r) * rb, xa.data(), cols))
                FAIL_CHECK("scalar: token " << k << " row " << r << " is not q4_0::vec_dot's");
            }
          }
        }
      }
    }
  }
}

TEST_CASE("Q4_0_R16 rows are read only by matmul: vec_dot and dequantize_row say so") {
  std::vector<uint8_t> w(q4_0::kBlockBytes), x(q8_0::kBlockBytes);
  std::vector<float> out(32);
  CHECK_THROWS_AS(vec_dot(GgmlType::Q4_0_R16, Isa::scalar)(w.data(), x.data(), 32), ns::Error);
  CHECK_THROWS_AS(dequantize_row(GgmlType::Q4_0_R16, w.data(), out.data(), 32), ns::Error);
}
