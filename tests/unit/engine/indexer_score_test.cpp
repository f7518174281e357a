// The lightning indexer's scores (engine/layers/indexer_score.h): every ISA
// path gives the scalar reference's bits at its lane width (an exact equality:
// the vector code makes the same roundings in the same order), and the
// reference is the product it orders, to a float sum's error.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <vector>

#include "engine/kernels/kernels.h"
#include "engine/layers/indexer_score.h"

using namespace ns;

TEST_CASE("indexer scores: each ISA path equals the scalar reference of its lane width, bit for bit") {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (const int64_t dim : {int64_t{64}, int64_t{128}, int64_t{512}}) {
    const int64_t n_head = 5, n = 37, stride = dim + 24;  // a block row: the indexer's key after other values
    std::vector<float> q(static_cast<size_t>(n_head * dim)), w(static_cast<size_t>(n_head));
    std::vector<uint16_t> k(static_cast<size_t>(n * stride));
    for (auto& x : q) x = dist(rng);
    for (auto& x : w) x = dist(rng) * 0.1f;
    for (auto& x : k) x = kernels::fp32_to_fp16(dist(rng));
    for (const int width : {8, 16}) {
      std::vector<float> ref(static_cast<size_t>(n));
      indexer_scores_reference(q.data(), w.data(), n_head, dim, k.data() + 24, stride, n, ref.data(), width);
      // Against the plain sum in double: the order changes only the last bits.
      for (int64_t j = 0; j < n; ++j) {
        double exact = 0, mag = 0;
        for (int64_t h = 0; h < n_head; ++h) {
          double d = 0, m = 0;
          for (int64_t i = 0; i < dim; ++i) {
            const double p = static_cast<double>(q[static_cast<size_t>(h * dim + i)]) *
                             kernels::fp16_to_fp32(k[static_cast<size_t>(24 + j * stride + i)]);
            d += p;
            m += std::fabs(p);
          }
          exact += std::max(d, 0.0) * w[static_cast<size_t>(h)];
          mag += m * std::fabs(w[static_cast<size_t>(h)]);
        }
        CHECK(std::fabs(ref[static_cast<size_t>(j)] - exact) <= 1e-5 * mag);
      }
      for (const kernels::Isa isa : {kernels::Isa::scalar, kernels::Isa::avx2, kernels::Isa::avx512}) {
        if (isa > kernels::detected_isa()) continue;  // a path this CPU lacks: clamped, nothing new to test
        std::vector<float> got(static_cast<size_t>(n));
        indexer_scores(q.data(), w.data(), n_head, dim, k.data() + 24, stride, n, got.data(), isa, width);
        CAPTURE(dim);
        CAPTURE(width);
        CAPTURE(kernels::isa_name(isa));
        CHECK(got == ref);
      }
    }
  }
}

TEST_CASE("indexer scores: a key length the reference's order does not cover is refused") {
  std::vector<float> q(96), w(1), out(1);
  std::vector<uint16_t> k(96);
  CHECK_THROWS_AS(indexer_scores(q.data(), w.data(), 1, 96, k.data(), 96, 1, out.data()), std::invalid_argument);
}
