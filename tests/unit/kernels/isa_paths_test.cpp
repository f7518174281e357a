// Every ISA path this CPU runs (scalar, AVX2, AVX-512 + VNNI; the ones it
// lacks are skipped with a message) through matmul, for every weight format:
// 1..17 tokens (every micro-tile shape and token tail), 29 rows (not a
// multiple of any micro-tile height), rows of an odd and an even number of
// blocks. Each result is checked against the scalar kernel on the same
// activation bytes, and AVX-512 against AVX2 bit for bit: both convert
// activations with the AVX2 quantizer, and the AVX-512 kernels repeat the
// AVX2 kernels' float operations on the same exact int32 sums (the order the
// reference implementation's goldens were matched with; int8_avx512.h).
#include <algorithm>

#include "engine/util/thread_pool.h"
#include "kernel_test_util.h"

using namespace ns::kernels;
using namespace ns::kernels::test;

namespace {

std::vector<int64_t> widths(GgmlType t) {
  if (block_elems(t) == 256) return {768, 1280};
  if (is_block_type(t)) return {7 * block_elems(t), 33 * block_elems(t)};  // 7 and 33 blocks
  return {203};
}

std::vector<uint8_t> random_matrix(GgmlType t, int64_t rows, int64_t cols, uint32_t seed) {
  const size_t rb = row_bytes(t, cols);
  std::vector<uint8_t> out(rb * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    const auto f = random_normal(static_cast<size_t>(cols), seed + static_cast<uint32_t>(r), 0.1f);
    quantize_row(t, f.data(), out.data() + r * rb, cols);
  }
  return out;
}

}  // namespace

TEST_CASE("each ISA path's matmul matches the scalar kernels for 1..17 tokens; AVX-512 gives AVX2's bits") {
  const auto simd = simd_isas_to_test("ISA path comparisons");
  const int64_t rows = 29;
  ns::ThreadPool pool(1);
  for (const GgmlType t : kTypes) {
    double max_diff_512_vs_2 = 0;
    for (const int64_t cols : widths(t)) {
      const auto w = random_matrix(t, rows, cols, 7000);
      const size_t rb = row_bytes(t, cols);
      const MatrixView view{t, w.data(), rows, cols, rb};
      for (int64_t n_tokens = 1; n_tokens <= 17; ++n_tokens) {
        const auto x = random_normal(static_cast<size_t>(n_tokens * cols), 90 + static_cast<uint32_t>(n_tokens), 2.0f);
        std::vector<std::vector<float>> y_of(std::size(kIsas));
        for (const Isa isa : isas_to_test()) {
          CAPTURE(name(t));
          CAPTURE(cols);
          CAPTURE(n_tokens);
          CAPTURE(isa_name(isa));
          IsaScope scope(isa);
          MatmulScratch scratch;
          auto& y = y_of[static_cast<size_t>(isa)];
          y.assign(static_cast<size_t>(n_tokens * rows), -12345.0f);
          matmul(view, x.data(), n_tokens, y.data(), pool, scratch);
          for (int64_t k = 0; k < n_tokens; ++k) {
            const auto xa = activations(t, isa, x.data() + k * cols, cols);
            for (int64_t r = 0; r < rows; ++r) {
              const uint8_t* wr = w.data() + r * rb;
              const float scalar = vec_dot(t, Isa::scalar)(wr, xa.data(), cols);
              const float got = y[static_cast<size_t>(k * rows + r)];
              const double tol = tolerance(t, cols, reference_dot(t, wr, xa.data(), cols));
              if (!(std::fabs(got - scalar) <= tol))
                FAIL_CHECK("token " << k << " row " << r << ": got " << got << ", scalar " << scalar);
            }
          }
        }
        const auto& y2 = y_of[static_cast<size_t>(Isa::avx2)];
        const auto& y512 = y_of[static_cast<size_t>(Isa::avx512)];
        if (y2.empty() || y512.empty()) continue;
        for (size_t i = 0; i < y2.size(); ++i) {
          if (y512[i] != y2[i]) {
            FAIL_CHECK(name(t) << " token " << i / rows << " row " << i % rows << ": avx512 " << y512[i] << ", avx2 "
                               << y2[i]);
          }
          max_diff_512_vs_2 = std::max(max_diff_512_vs_2, std::fabs(static_cast<double>(y512[i]) - y2[i]));
        }
      }
    }
    if (std::find(simd.begin(), simd.end(), Isa::avx512) != simd.end()) {
      MESSAGE(name(t) << ": max |avx512 - avx2| = " << max_diff_512_vs_2);
    }
  }
}

TEST_CASE("rows_dot gives the one-token dot's bits on every ISA path, for every weight format") {
  // rows_dot runs a format's tile kernel where it has one (MLA's per-head
  // products); a decoded token must not depend on which of the two ran.
  for (const GgmlType t : kTypes) {
    for (const int64_t cols : widths(t)) {
      for (const int64_t rows : {int64_t{1}, int64_t{29}, int64_t{128}}) {
        const auto w = random_matrix(t, rows, cols, 7100);
        const size_t rb = row_bytes(t, cols);
        const auto x = random_normal(static_cast<size_t>(cols), 91, 2.0f);
        for (const Isa isa : isas_to_test()) {
          CAPTURE(name(t));
          CAPTURE(cols);
          CAPTURE(rows);
          CAPTURE(isa_name(isa));
          const auto xa = activations(t, isa, x.data(), cols);
          std::vector<float> y(static_cast<size_t>(rows) + 1, -12345.0f);
          rows_dot(t, isa, w.data(), rb, rows, xa.data(), cols, y.data());
          CHECK(y[static_cast<size_t>(rows)] == -12345.0f);  // nothing past the last row
          for (int64_t r = 0; r < rows; ++r) {
            const float dot = vec_dot(t, isa)(w.data() + r * rb, xa.data(), cols);
            if (y[static_cast<size_t>(r)] != dot)
              FAIL_CHECK("row " << r << ": rows_dot " << y[static_cast<size_t>(r)] << ", vec_dot " << dot);
          }
        }
      }
    }
  }
}
