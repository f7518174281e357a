// matmul against a plain dequantize-then-dot reference in double precision,
// for one token and a batch, on one and two threads, under each ISA; plus the
// errors it raises and the scratch it keeps; matmul_group against matmul.
#include <cstring>

#include "common/error.h"
#include "engine/util/thread_pool.h"
#include "kernel_test_util.h"

using namespace ns::kernels;
using namespace ns::kernels::test;

namespace {

struct Weights {
  GgmlType type;
  int64_t rows, cols;
  size_t stride;
  std::vector<uint8_t> bytes;
  MatrixView view() const { return MatrixView{type, bytes.data(), rows, cols, stride}; }
};

// Rows `pad` bytes further apart than they need, so a kernel that assumes
// packed rows reads the wrong bytes.
Weights random_weights(GgmlType t, int64_t rows, int64_t cols, size_t pad, uint32_t seed) {
  Weights w{t, rows, cols, row_bytes(t, cols) + pad, {}};
  w.bytes.assign(w.stride * static_cast<size_t>(rows), 0xcd);
  for (int64_t r = 0; r < rows; ++r) {
    const auto f = random_normal(static_cast<size_t>(cols), seed + static_cast<uint32_t>(r), 0.1f);
    quantize_row(t, f.data(), w.bytes.data() + r * w.stride, cols);
  }
  return w;
}

// y[t][r] in double from the dequantized weight row and the activation row
// converted exactly as matmul converts it under `isa`.
void check_against_reference(const Weights& w, const std::vector<float>& x, int64_t n_tokens,
                             const std::vector<float>& y, Isa isa) {
  for (int64_t t = 0; t < n_tokens; ++t) {
    const auto xa = activations(w.type, isa, x.data() + t * w.cols, w.cols);
    for (int64_t r = 0; r < w.rows; ++r) {
      const RefDot ref = reference_dot(w.type, w.bytes.data() + r * w.stride, xa.data(), w.cols);
      const double got = y[static_cast<size_t>(t * w.rows + r)];
      if (std::fabs(got - ref.value) > tolerance(w.type, w.cols, ref)) {
        FAIL_CHECK("token " << t << " row " << r << ": got " << got << ", reference " << ref.value);
      }
    }
  }
}

// matmul of `n_tokens` activation rows under `isa`, checked against the reference.
void check_matmul(const Weights& w, const std::vector<float>& x, int64_t n_tokens, ns::ThreadPool& pool, Isa isa) {
  IsaScope scope(isa);
  MatmulScratch scratch;
  std::vector<float> y(static_cast<size_t>(n_tokens * w.rows), -12345.0f);
  matmul(w.view(), x.data(), n_tokens, y.data(), pool, scratch);
  check_against_reference(w, x, n_tokens, y, isa);
}

}  // namespace

TEST_CASE("matmul matches dequantize-then-dot for 1 and 7 tokens, 1 and 2 threads, each ISA") {
  (void)simd_isas_to_test("matmul");
  for (const GgmlType t : kTypes) {
    // 37 rows: not a multiple of the 4-row micro-tiles. F-type rows of 203
    // elements leave an 8-lane tail.
    const int64_t cols = is_block_type(t) ? 512 : 203;
    const Weights w = random_weights(t, 37, cols, 6, 1000);
    for (const int64_t n_tokens : {int64_t{1}, int64_t{7}}) {
      const auto x = random_normal(static_cast<size_t>(n_tokens * cols), 77, 2.0f);
      for (const int threads : {1, 2}) {
        ns::ThreadPool pool(threads);
        for (const Isa isa : isas_to_test()) {
          CAPTURE(name(t));
          CAPTURE(n_tokens);
          CAPTURE(threads);
          CAPTURE(isa_name(isa));
          check_matmul(w, x, n_tokens, pool, isa);
        }
      }
    }
  }
}

TEST_CASE("matmul splits a larger matrix into many chunks without gaps or overlaps") {
  ns::ThreadPool pool(2);
  for (const GgmlType t : {GgmlType::Q4_0, GgmlType::F16, GgmlType::Q5_1, GgmlType::Q4_K}) {
    const Weights w = random_weights(t, 301, 1024, 0, 2000);
    const int64_t n_tokens = 5;
    const auto x = random_normal(static_cast<size_t>(n_tokens * w.cols), 78, 1.0f);
    for (const Isa isa : isas_to_test()) {
      CAPTURE(name(t));
      CAPTURE(isa_name(isa));
      check_matmul(w, x, n_tokens, pool, isa);
    }
  }
}

TEST_CASE("AVX2 and AVX-512 tiles give every row and token the one-token kernel's result, bit for bit") {
  // The micro-tiles (up to 4 rows x 4 tokens, edges smaller) run each row
  // and token through the same float operations as vec_dot; 13 rows and 1..9
  // tokens reach every micro-tile shape, 3 and 16 blocks both parities of the block count (K-quants: 3
  // and 4 super-blocks). The scalar kernels are checked against the same product.
  ns::ThreadPool pool(1);
  for (const Isa isa : simd_isas_to_test("SIMD tiles")) {
    for (const GgmlType t :
         {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::IQ4_NL, GgmlType::MXFP4, GgmlType::Q1_0, GgmlType::Q2_0,
          GgmlType::NVFP4, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
      const bool k_quant = block_elems(t) == 256;
      for (const int64_t cols :
           {k_quant ? int64_t{768} : 3 * block_elems(t), k_quant ? int64_t{1024} : 16 * block_elems(t)}) {
        const Weights w = random_weights(t, 13, cols, 3, 6000);
        for (int64_t n_tokens = 1; n_tokens <= 9; ++n_tokens) {
          CAPTURE(isa_name(isa));
          CAPTURE(name(t));
          CAPTURE(cols);
          CAPTURE(n_tokens);
          const auto x = random_normal(static_cast<size_t>(n_tokens * cols), 80, 2.0f);
          IsaScope scope(isa);
          MatmulScratch scratch;
          std::vector<float> y(static_cast<size_t>(n_tokens * w.rows));
          matmul(w.view(), x.data(), n_tokens, y.data(), pool, scratch);
          for (int64_t k = 0; k < n_tokens; ++k) {
            const auto xa = activations(t, isa, x.data() + k * cols, cols);
            for (int64_t r = 0; r < w.rows; ++r) {
              const uint8_t* wr = w.bytes.data() + r * w.stride;
              const float one = vec_dot(t, isa)(wr, xa.data(), cols);
              const float scalar = vec_dot(t, Isa::scalar)(wr, xa.data(), cols);
              const float got = y[static_cast<size_t>(k * w.rows + r)];
              if (got != one) FAIL_CHECK("token " << k << " row " << r << ": tile " << got << ", vec_dot " << one);
              CHECK(std::fabs(got - scalar) <= tolerance(t, cols, reference_dot(t, wr, xa.data(), cols)));
            }
          }
        }
      }
    }
  }
}

TEST_CASE("matmul gives the same result on 1 and 2 threads") {
  const Weights w = random_weights(GgmlType::Q8_0, 64, 256, 0, 3000);
  const auto x = random_normal(3 * 256, 79);
  ns::ThreadPool one(1), two(2);
  MatmulScratch scratch;
  std::vector<float> y1(3 * 64), y2(3 * 64);
  matmul(w.view(), x.data(), 3, y1.data(), one, scratch);
  matmul(w.view(), x.data(), 3, y2.data(), two, scratch);
  CHECK(y1 == y2);  // rows are independent: the split must not change a single bit
}

TEST_CASE("matmul_group gives each task matmul's bits, shared inputs and all, on 1 and 2 threads, each ISA") {
  // Mixed formats (block and float, so different activation formats), inputs
  // shared by consecutive tasks (converted once) and not, one task with no
  // tokens, and more tasks than one parallel call takes (64).
  const GgmlType types[] = {GgmlType::Q4_0, GgmlType::Q4_0, GgmlType::F16, GgmlType::Q4_K, GgmlType::Q8_0};
  const int64_t cols = 256;
  std::vector<Weights> ws;
  for (uint32_t i = 0; i < 70; ++i) ws.push_back(random_weights(types[i % 5], 13 + i % 7, cols, i % 3, 6000 + 50 * i));
  const auto x = random_normal(static_cast<size_t>(4 * cols * 70), 81, 1.5f);
  // Task i's input: tasks 2k and 2k + 1 share one; token counts 1..3 (task 9: none).
  const auto input = [&](size_t i) { return x.data() + (i / 2) * 4 * cols; };
  const auto tokens = [](size_t i) { return i == 9 ? int64_t{0} : int64_t(1 + (i / 2) % 3); };
  for (const int threads : {1, 2}) {
    ns::ThreadPool pool(threads);
    for (const Isa isa : isas_to_test()) {
      for (const bool per_token : {false, true}) {
        CAPTURE(threads);
        CAPTURE(isa_name(isa));
        CAPTURE(per_token);
        IsaScope scope(isa);
        MatmulScratch scratch;
        std::vector<std::vector<float>> alone(ws.size()), grouped(ws.size());
        std::vector<MatmulTask> tasks;
        for (size_t i = 0; i < ws.size(); ++i) {
          const size_t n = static_cast<size_t>(3 * ws[i].rows);
          alone[i].assign(n, -1.0f);
          grouped[i].assign(n, -1.0f);
          matmul(ws[i].view(), input(i), tokens(i), alone[i].data(), pool, scratch, per_token);
          tasks.push_back(MatmulTask{ws[i].view(), input(i), tokens(i), grouped[i].data()});
        }
        matmul_group(tasks.data(), tasks.size(), pool, scratch, per_token);
        for (size_t i = 0; i < ws.size(); ++i) {
          CAPTURE(i);
          CHECK(std::memcmp(alone[i].data(), grouped[i].data(), alone[i].size() * sizeof(float)) == 0);
        }
      }
    }
  }
}

TEST_CASE("matmul scratch grows only when too small") {
  const Weights w = random_weights(GgmlType::Q4_0, 8, 64, 0, 4000);
  const auto x = random_normal(7 * 64, 80);
  ns::ThreadPool pool(1);
  MatmulScratch scratch;
  std::vector<float> y(7 * 8);
  matmul(w.view(), x.data(), 7, y.data(), pool, scratch);
  CHECK(scratch.act.size() == 7 * row_bytes(GgmlType::Q8_0, 64));
  const uint8_t* data = scratch.act.data();
  matmul(w.view(), x.data(), 1, y.data(), pool, scratch);
  matmul(w.view(), x.data(), 7, y.data(), pool, scratch);
  CHECK(scratch.act.data() == data);
  CHECK(scratch.act.size() == 7 * row_bytes(GgmlType::Q8_0, 64));
}

TEST_CASE("matmul with no tokens writes nothing") {
  const Weights w = random_weights(GgmlType::F32, 4, 8, 0, 5000);
  ns::ThreadPool pool(2);
  MatmulScratch scratch;
  float y = 42.0f;
  matmul(w.view(), nullptr, 0, &y, pool, scratch);
  CHECK(y == 42.0f);
}

TEST_CASE("matmul over rows of no elements gives zeros") {
  ns::ThreadPool pool(2);
  MatmulScratch scratch;
  std::vector<float> y(6, 7.0f);
  matmul(MatrixView{GgmlType::Q4_0, nullptr, 3, 0, 0}, nullptr, 2, y.data(), pool, scratch);
  CHECK(y == std::vector<float>(6, 0.0f));
}

TEST_CASE("matmul rejects types without kernels and shapes a type cannot hold") {
  ns::ThreadPool pool(1);
  MatmulScratch scratch;
  std::vector<uint8_t> bytes(4096);
  std::vector<float> x(256), y(4);
  auto kind_of = [&](const MatrixView& v) {
    try {
      matmul(v, x.data(), 1, y.data(), pool, scratch);
    } catch (const ns::Error& e) {
      CHECK(std::string(e.what()).find("matmul") != std::string::npos);
      return e.kind();
    }
    FAIL("no error");
    return ns::ErrorKind::internal;
  };
  CHECK(kind_of({GgmlType::I32, bytes.data(), 2, 256, 1024}) == ns::ErrorKind::bad_model);
  CHECK(kind_of({GgmlType::Q4_K, bytes.data(), 2, 128, 144}) == ns::ErrorKind::bad_model);  // 128 % 256 != 0
  CHECK(kind_of({GgmlType::Q4_0, bytes.data(), 2, 100, 64}) == ns::ErrorKind::bad_model);   // 100 % 32 != 0
  CHECK(kind_of({GgmlType::Q8_0, bytes.data(), 2, 64, 60}) == ns::ErrorKind::bad_model);    // stride < 68 bytes
}
