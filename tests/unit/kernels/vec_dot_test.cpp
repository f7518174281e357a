// vec_dot: the scalar reference against a double-precision dot of the
// dequantized rows, and the AVX2 kernels against the scalar ones, on random
// rows of several lengths and on edge-case blocks.
#include <cfloat>

#include "engine/kernels/formats.h"
#include "kernel_test_util.h"

using namespace ns::kernels;
using namespace ns::kernels::test;

namespace {

std::vector<int64_t> lengths(GgmlType t) {
  if (is_block_type(t)) return {32, 64, 96, 256, 1024, 4096};
  return {1, 7, 8, 9, 31, 33, 100, 256, 1000, 4096};
}

// Checks both ISAs on one weight row and one activation row (already in the vec-dot format).
void check_dot(GgmlType t, const void* w, const void* x, int64_t n) {
  const RefDot ref = reference_dot(t, w, x, n);
  const double tol = accumulation_tolerance(t, n, ref.abs_sum);
  const float scalar = vec_dot(t, Isa::scalar)(w, x, n);
  CHECK(std::fabs(scalar - ref.value) <= tol);
  if (detected_isa() != Isa::avx2) return;
  const float fast = vec_dot(t, Isa::avx2)(w, x, n);
  CHECK((vec_dot(t, Isa::avx2) != vec_dot(t, Isa::scalar)));
  CHECK(std::fabs(fast - ref.value) <= tol);
  CHECK(std::fabs(fast - scalar) <= tol);
}

std::vector<uint8_t> raw_q8_0_blocks(int64_t nb, uint16_t d, int8_t lo, int8_t hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> q(lo, hi);
  std::vector<uint8_t> out(static_cast<size_t>(nb) * q8_0::kBlockBytes);
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* blk = out.data() + b * q8_0::kBlockBytes;
    store_u16(blk, d);
    for (int j = 0; j < 32; ++j) blk[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(q(rng)));
  }
  return out;
}

}  // namespace

TEST_CASE("vec_dot on random rows: scalar vs double reference, AVX2 vs scalar") {
  if (detected_isa() != Isa::avx2) MESSAGE("AVX2 comparisons skipped: this CPU has no AVX2/FMA/F16C");
  uint32_t seed = 100;
  for (const GgmlType t : kTypes) {
    for (const int64_t n : lengths(t)) {
      CAPTURE(name(t));
      CAPTURE(n);
      const auto wf = random_normal(static_cast<size_t>(n), ++seed, 0.05f);
      const auto xf = random_normal(static_cast<size_t>(n), ++seed, 3.0f);
      const auto w = quantized(t, wf.data(), n);
      const auto x = activations(t, Isa::scalar, xf.data(), n);
      check_dot(t, w.data(), x.data(), n);
    }
  }
}

TEST_CASE("vec_dot on zero blocks is exactly zero") {
  for (const GgmlType t : kTypes) {
    CAPTURE(name(t));
    const int64_t n = 96;
    const std::vector<float> zeros(n, 0.0f);
    const auto rnd = random_normal(n, 5);
    const auto wz = quantized(t, zeros.data(), n);
    const auto wr = quantized(t, rnd.data(), n);
    const auto xz = activations(t, Isa::scalar, zeros.data(), n);
    const auto xr = activations(t, Isa::scalar, rnd.data(), n);
    for (const Isa isa : isas_to_test()) {
      CHECK(vec_dot(t, isa)(wz.data(), xr.data(), n) == 0.0f);
      CHECK(vec_dot(t, isa)(wr.data(), xz.data(), n) == 0.0f);
    }
  }
}

TEST_CASE("vec_dot on extreme quantized blocks matches exact integer sums") {
  // Scales of 1.0 make every result an exactly representable integer.
  const uint16_t one = 0x3c00;
  const int64_t nb = 8, n = nb * 32;
  SUBCASE("Q8_0 at full scale, including -128 weights") {
    for (const int8_t wv : {int8_t{127}, int8_t{-127}, int8_t{-128}}) {
      for (const int8_t xv : {int8_t{127}, int8_t{-127}}) {
        const auto w = raw_q8_0_blocks(nb, one, wv, wv, 1);
        const auto x = raw_q8_0_blocks(nb, one, xv, xv, 2);
        const double expected = static_cast<double>(wv) * xv * n;
        for (const Isa isa : isas_to_test()) CHECK(vec_dot(GgmlType::Q8_0, isa)(w.data(), x.data(), n) == expected);
      }
    }
    // Random bytes over the whole int8 range for weights, [-127, 127] for activations.
    const auto w = raw_q8_0_blocks(nb, one, -128, 127, 3);
    const auto x = raw_q8_0_blocks(nb, one, -127, 127, 4);
    int64_t expected = 0;
    for (int64_t b = 0; b < nb; ++b)
      for (int j = 0; j < 32; ++j)
        expected += static_cast<int8_t>(w[b * 34 + 2 + j]) * static_cast<int8_t>(x[b * 34 + 2 + j]);
    for (const Isa isa : isas_to_test())
      CHECK(vec_dot(GgmlType::Q8_0, isa)(w.data(), x.data(), n) == static_cast<float>(expected));
  }
  SUBCASE("Q4_0 nibbles 0 and 15 against +-127") {
    for (const uint8_t nib : {uint8_t{0}, uint8_t{15}}) {
      std::vector<uint8_t> w(static_cast<size_t>(nb) * q4_0::kBlockBytes);
      for (int64_t b = 0; b < nb; ++b) {
        store_u16(w.data() + b * 18, one);
        for (int j = 0; j < 16; ++j) w[b * 18 + 2 + j] = static_cast<uint8_t>(nib | nib << 4);
      }
      for (const int8_t xv : {int8_t{127}, int8_t{-127}}) {
        const auto x = raw_q8_0_blocks(nb, one, xv, xv, 5);
        const double expected = static_cast<double>(nib - 8) * xv * n;
        for (const Isa isa : isas_to_test()) CHECK(vec_dot(GgmlType::Q4_0, isa)(w.data(), x.data(), n) == expected);
      }
    }
  }
  SUBCASE("random nibbles and scales spanning the fp16 range") {
    std::mt19937 rng(9);
    std::vector<uint8_t> w(static_cast<size_t>(nb) * q4_0::kBlockBytes);
    for (auto& byte : w) byte = static_cast<uint8_t>(rng());
    auto x = raw_q8_0_blocks(nb, one, -127, 127, 6);
    const uint16_t scales[] = {0x0001, 0x03ff, 0x0400, 0x3c00, 0x7bff, 0xfbff, 0x1000, 0x8400};
    for (int64_t b = 0; b < nb; ++b) {
      store_u16(w.data() + b * 18, scales[b]);
      store_u16(x.data() + b * 34, scales[(b + 3) % nb]);
    }
    check_dot(GgmlType::Q4_0, w.data(), x.data(), n);
    auto w8 = raw_q8_0_blocks(nb, one, -128, 127, 7);
    for (int64_t b = 0; b < nb; ++b) store_u16(w8.data() + b * 34, scales[b]);
    check_dot(GgmlType::Q8_0, w8.data(), x.data(), n);
  }
}

TEST_CASE("vec_dot on extreme finite floats") {
  const int64_t n = 45;  // not a multiple of 8: the tail runs too
  for (const GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16}) {
    CAPTURE(name(t));
    // The largest, smallest normal and subnormal values of the format, each
    // against a partner that keeps the product finite.
    const float big = t == GgmlType::F16 ? 65504.0f : (t == GgmlType::BF16 ? 3.3895314e38f : FLT_MAX);
    const float tiny = t == GgmlType::F16 ? 0x1p-14f : FLT_MIN;
    const float sub = t == GgmlType::F16 ? 0x1p-24f : (t == GgmlType::BF16 ? 0x1p-133f : 0x1p-149f);
    std::vector<float> wf(n), xf(n);
    for (int64_t i = 0; i < n; ++i) {
      switch (i % 5) {
        case 0:
          wf[i] = big;
          xf[i] = (t == GgmlType::F16 ? 1.0f : 1e-30f) * (i % 2 ? -1 : 1);
          break;
        case 1:
          wf[i] = tiny;
          xf[i] = t == GgmlType::F16 ? 65504.0f : 1e30f;
          break;
        case 2:
          wf[i] = -sub;
          xf[i] = t == GgmlType::F16 ? 1024.0f : 1e30f;
          break;
        case 3:
          wf[i] = 0.5f;
          xf[i] = -0.25f;
          break;
        default:
          wf[i] = -big;
          xf[i] = t == GgmlType::F16 ? 0.5f : 1e-30f;
          break;
      }
    }
    const auto w = quantized(t, wf.data(), n);
    const auto x = activations(t, Isa::scalar, xf.data(), n);
    const RefDot ref = reference_dot(t, w.data(), x.data(), n);
    REQUIRE(std::isfinite(ref.value));
    check_dot(t, w.data(), x.data(), n);
  }
}

TEST_CASE("AVX2 Q8_0 activation quantizer: same scales, codes within one step of the reference") {
  if (!have_avx2("AVX2 Q8_0 quantizer")) return;
  const int64_t n = 32 * 512;
  auto xf = random_normal(n, 21, 2.0f);
  for (int j = 0; j < 32; ++j) xf[j] = static_cast<float>(j - 16);  // exact ties at +-63.5
  for (int j = 32; j < 64; ++j) xf[j] = 0.0f;
  const auto ref = activations(GgmlType::Q4_0, Isa::scalar, xf.data(), n);
  const auto fast = activations(GgmlType::Q4_0, Isa::avx2, xf.data(), n);
  REQUIRE(ref.size() == fast.size());
  int64_t differing = 0;
  for (int64_t b = 0; b < n / 32; ++b) {
    const uint8_t* rb = ref.data() + b * 34;
    const uint8_t* fb = fast.data() + b * 34;
    CHECK(load_u16(rb) == load_u16(fb));
    for (int j = 0; j < 32; ++j) {
      const int diff = static_cast<int8_t>(rb[2 + j]) - static_cast<int8_t>(fb[2 + j]);
      CHECK(std::abs(diff) <= 1);
      CHECK(static_cast<int8_t>(fb[2 + j]) != -128);
      differing += diff != 0;
    }
  }
  // Only values on a rounding boundary may differ: a handful in 16k.
  CHECK(differing <= n / 1000);
}
