// The kernels on tensors of a real GGUF file written by other tools: the
// shared tiny-ds2-kquant model (Q2_K..Q6_K weights, Q8_0 embeddings; skipped
// where ../shared is absent). Every tensor dequantizes to finite, zero-mean,
// sensibly scaled values, and the dot products of both ISAs and matmul agree
// with the dequantized rows on its blocks.
#include <filesystem>
#include <set>

#include "engine/gguf/gguf_file.h"
#include "engine/util/thread_pool.h"
#include "kernel_test_util.h"

using namespace ns::kernels;
using namespace ns::kernels::test;

namespace {

const std::string kModel = std::string(NS_SHARED_DIR) + "/models/tiny-ds2-kquant.gguf";

bool have_model() {
  if (std::filesystem::exists(kModel)) return true;
  MESSAGE("skipping: " << kModel << " not found");
  return false;
}

bool quantized_with_kernels(GgmlType t) { return is_block_type(t) && is_supported(t); }

}  // namespace

TEST_CASE("every quantized tensor of the K-quant model dequantizes to finite, zero-mean, sensibly scaled values") {
  if (!have_model()) return;
  const auto file = ns::gguf::GgufFile::open(kModel);
  std::set<GgmlType> seen;
  for (const auto& t : file->tensors()) {
    if (!quantized_with_kernels(t.type)) continue;
    CAPTURE(t.name);
    seen.insert(t.type);
    const auto cols = static_cast<int64_t>(t.dims[0]);
    const size_t stride = row_bytes(t.type, cols);
    double sum = 0, sum_sq = 0;
    int64_t non_finite = 0;
    for (uint64_t r = 0; r < t.rows(); ++r) {
      for (const float v : dequantized(t.type, file->tensor_data(t) + r * stride, cols)) {
        non_finite += !std::isfinite(v);
        sum += v;
        sum_sq += static_cast<double>(v) * v;
      }
    }
    const double count = static_cast<double>(t.n_elements());
    const double mean = sum / count, rms = std::sqrt(sum_sq / count);
    CHECK(non_finite == 0);
    // Random weights of a tiny model: rms ~0.07..1 here; a misread scale
    // field would be off by orders of magnitude, a misread min by the mean.
    CHECK(rms > 1e-3);
    CHECK(rms < 10);
    CHECK(std::fabs(mean) < 0.1 * rms);
  }
  for (const GgmlType t : kKQuants) CHECK(seen.count(t) == 1);
}

TEST_CASE("dot products and matmul on the K-quant model's blocks match the dequantized rows, both ISAs") {
  if (!have_model()) return;
  const auto file = ns::gguf::GgufFile::open(kModel);
  ns::ThreadPool pool(2);
  uint32_t seed = 500;
  for (const auto& t : file->tensors()) {
    if (!quantized_with_kernels(t.type)) continue;
    CAPTURE(t.name);
    const auto cols = static_cast<int64_t>(t.dims[0]);
    const size_t stride = row_bytes(t.type, cols);
    const int64_t rows = std::min<int64_t>(static_cast<int64_t>(t.rows()), 24);
    const int64_t n_tokens = 3;
    const auto x = random_normal(static_cast<size_t>(n_tokens * cols), ++seed, 1.5f);
    for (const Isa isa : isas_to_test()) {
      CAPTURE(isa_name(isa));
      IsaScope scope(isa);
      MatmulScratch scratch;
      std::vector<float> y(static_cast<size_t>(n_tokens * rows));
      matmul(MatrixView{t.type, file->tensor_data(t), rows, cols, stride}, x.data(), n_tokens, y.data(), pool, scratch);
      for (int64_t tok = 0; tok < n_tokens; ++tok) {
        const auto xa = activations(t.type, isa, x.data() + tok * cols, cols);
        for (int64_t r = 0; r < rows; ++r) {
          const uint8_t* w = file->tensor_data(t) + r * stride;
          const RefDot ref = reference_dot(t.type, w, xa.data(), cols);
          const double tol = tolerance(t.type, cols, ref);
          const float dot = vec_dot(t.type, isa)(w, xa.data(), cols);
          CHECK(std::fabs(dot - ref.value) <= tol);
          CHECK(std::fabs(y[static_cast<size_t>(tok * rows + r)] - ref.value) <= tol);
        }
      }
    }
  }
}
