// The hyper-connections' weighted sums of rows (engine/layers/stream_mix.h):
// each ISA path gives the scalar loop's bits (an exact equality: element by
// element the same roundings in the same order), tails and an output that is
// one of its rows included.
#include <doctest/doctest.h>

#include <random>
#include <vector>

#include "engine/kernels/kernels.h"
#include "engine/layers/stream_mix.h"

using namespace ns;

TEST_CASE("stream mix: every ISA path equals the scalar loop bit for bit") {
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (const int64_t d : {int64_t{1}, int64_t{7}, int64_t{8}, int64_t{23}, int64_t{256}, int64_t{1030}}) {
    for (const int64_t n_rows : {int64_t{1}, int64_t{4}, int64_t{5}}) {
      std::vector<std::vector<float>> data(static_cast<size_t>(n_rows), std::vector<float>(static_cast<size_t>(d)));
      std::vector<const float*> rows;
      std::vector<float> w(static_cast<size_t>(n_rows));
      for (auto& r : data) {
        for (auto& x : r) x = dist(rng);
        rows.push_back(r.data());
      }
      for (auto& x : w) x = dist(rng);
      std::vector<float> ref(static_cast<size_t>(d));
      mix_rows_reference(rows.data(), w.data(), n_rows, d, ref.data());
      // The order written out for one element.
      float first = data[0][0] * w[0];
      for (int64_t r = 1; r < n_rows; ++r) first += data[static_cast<size_t>(r)][0] * w[static_cast<size_t>(r)];
      CHECK(ref[0] == first);
      for (const kernels::Isa isa : {kernels::Isa::scalar, kernels::Isa::avx2, kernels::Isa::avx512}) {
        if (isa > kernels::detected_isa()) continue;  // clamped: nothing new to test on this CPU
        CAPTURE(d);
        CAPTURE(n_rows);
        CAPTURE(kernels::isa_name(isa));
        std::vector<float> got(static_cast<size_t>(d));
        mix_rows(rows.data(), w.data(), n_rows, d, got.data(), isa);
        CHECK(got == ref);
        // In place over the last row (the output one of the inputs).
        std::vector<float> last = data.back();
        std::vector<const float*> in = rows;
        in.back() = last.data();
        mix_rows(in.data(), w.data(), n_rows, d, last.data(), isa);
        CHECK(last == ref);
      }
    }
  }
}
