// vec_dot: the scalar reference against a double-precision dot of the
// dequantized rows, and the AVX2 and AVX-512 kernels against the scalar ones, on random
// rows of several lengths and on edge-case blocks (every byte pattern the
// formats can hold, scales across the fp16 range, activations at +-127).
#include <cfloat>
#include <cstring>
#include <functional>

#include "engine/kernels/formats.h"
#include "kernel_test_util.h"

using namespace ns::kernels;
using namespace ns::kernels::test;

namespace {

std::vector<int64_t> lengths(GgmlType t) {
  if (block_elems(t) == 256) return {256, 512, 768, 1024, 4096};
  if (is_block_type(t) && block_elems(t) > 32) return {block_elems(t), 3 * block_elems(t), 1024, 4096};
  if (is_block_type(t)) return {32, 64, 96, 256, 1024, 4096};
  return {1, 7, 8, 9, 31, 33, 100, 256, 1000, 4096};
}

// Checks both ISAs on one weight row and one activation row (already in the vec-dot format).
void check_dot(GgmlType t, const void* w, const void* x, int64_t n) {
  const RefDot ref = reference_dot(t, w, x, n);
  const double tol = tolerance(t, n, ref);
  const float scalar = vec_dot(t, Isa::scalar)(w, x, n);
  CHECK(std::fabs(scalar - ref.value) <= tol);
  for (const Isa isa : {Isa::avx2, Isa::avx512}) {
    if (isa > detected_isa()) continue;
    CAPTURE(isa_name(isa));
    const float fast = vec_dot(t, isa)(w, x, n);
    CHECK((vec_dot(t, isa) != vec_dot(t, Isa::scalar)));
    CHECK(std::fabs(fast - ref.value) <= tol);
    CHECK(std::fabs(fast - scalar) <= tol);
  }
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

// n activations in vec_dot_type(weight), built field by field: element i's
// code is code(i) (within [-127, 127], as every quantizer here produces), block
// b's scale is scale(b) (rounded to fp16 for Q8_0 / Q8_1), and the derived
// fields (Q8_1's s, Q8_K's bsums) are what the format defines them to be.
std::vector<uint8_t> raw_activations(GgmlType weight, int64_t n, const std::function<float(int64_t)>& scale,
                                     const std::function<int8_t(int64_t)>& code) {
  const GgmlType act = vec_dot_type(weight);
  const int64_t be = block_elems(act);
  const size_t bytes = ns::gguf::traits(act).block_bytes;
  std::vector<uint8_t> out(row_bytes(act, n));
  for (int64_t b = 0; b < n / be; ++b) {
    uint8_t* blk = out.data() + b * bytes;
    const float d = scale(b);
    const size_t qs = act == GgmlType::Q8_0 ? 2 : 4;
    int sum = 0;
    for (int64_t j = 0; j < be; ++j) {
      const int8_t q = code(b * be + j);
      blk[qs + j] = static_cast<uint8_t>(q);
      sum += q;
    }
    if (act == GgmlType::Q8_K) {
      std::memcpy(blk, &d, sizeof d);
      for (int g = 0; g < 16; ++g) {
        int16_t s = 0;
        for (int j = 0; j < 16; ++j) s = static_cast<int16_t>(s + static_cast<int8_t>(blk[4 + 16 * g + j]));
        std::memcpy(blk + 260 + 2 * g, &s, sizeof s);
      }
    } else {
      store_u16(blk, fp32_to_fp16(d));
      if (act == GgmlType::Q8_1) store_u16(blk + 2, fp32_to_fp16(d * static_cast<float>(sum)));
    }
  }
  return out;
}

// Byte offsets of a quantized weight block's fp16 fields: the scale, then the
// min (Q4_1, Q5_1) or the scale of the mins (Q2_K, Q4_K, Q5_K).
std::vector<size_t> fp16_fields(GgmlType t) {
  switch (t) {
    case GgmlType::Q8_0:
    case GgmlType::Q4_0:
    case GgmlType::Q5_0:
    case GgmlType::IQ4_NL:
    case GgmlType::Q1_0:
    case GgmlType::Q2_0: return {0};
    case GgmlType::Q4_1:
    case GgmlType::Q5_1:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K: return {0, 2};
    case GgmlType::Q2_K: return {80, 82};
    case GgmlType::Q3_K: return {108};
    case GgmlType::Q6_K: return {208};
    default: return {};
  }
}

// nb weight blocks whose every byte is `fill` (or random where fill < 0),
// then fp16 field f of block b set to field(b, f).
std::vector<uint8_t> raw_weights(GgmlType t, int64_t nb, int fill, uint32_t seed,
                                 const std::function<uint16_t(int64_t, size_t)>& field) {
  const size_t bytes = ns::gguf::traits(t).block_bytes;
  std::vector<uint8_t> out(static_cast<size_t>(nb) * bytes);
  std::mt19937 rng(seed);
  for (auto& byte : out) byte = static_cast<uint8_t>(fill < 0 ? rng() : static_cast<unsigned>(fill));
  const auto fields = fp16_fields(t);
  for (int64_t b = 0; b < nb; ++b)
    for (size_t f = 0; f < fields.size(); ++f) store_u16(out.data() + b * bytes + fields[f], field(b, f));
  return out;
}

// Activation codes for the byte-pattern tests: all 127, all -127,
// alternating, and spread over every code (the last, for random weights).
const std::function<int8_t(int64_t)> kCodes[] = {
    [](int64_t) { return int8_t{127}; },
    [](int64_t) { return int8_t{-127}; },
    [](int64_t i) { return static_cast<int8_t>(i % 2 ? 127 : -127); },
    [](int64_t i) { return static_cast<int8_t>((i * 7919) % 255 - 127); },
};

}  // namespace

TEST_CASE("vec_dot on random rows: scalar vs double reference, AVX2 and AVX-512 vs scalar") {
  (void)simd_isas_to_test("vec_dot comparisons");
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
    const int64_t n = 3 * block_elems(t);
    const std::vector<float> zeros(static_cast<size_t>(n), 0.0f);
    const auto rnd = random_normal(static_cast<size_t>(n), 5);
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

TEST_CASE("vec_dot on every byte pattern of the newer formats, scales 1 and across the fp16 range") {
  // Filled blocks put every level at its extreme (0x00, 0xff) or at mixed
  // bit patterns; with activations at +-127 that is where maddubs could
  // saturate or an offset could be applied twice. Random bytes cover every
  // code, scale and min encoding; random fp16 scales span subnormals to 65504.
  const uint16_t one = 0x3c00;
  const uint16_t scales[] = {0x0001, 0x03ff, 0x0400, 0x3c00, 0x7bff, 0xfbff, 0x1000, 0x8400, 0x2e66, 0xb266};
  // NVFP4 has no fp16 field: its four scale bytes take the fill (0xff reads
  // as 240, 0x7f as 0) or, from random bytes, every UE4M3 encoding.
  const GgmlType types[] = {GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::IQ4_NL,
                            GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K,
                            GgmlType::Q6_K, GgmlType::Q1_0, GgmlType::Q2_0, GgmlType::NVFP4};
  for (const GgmlType t : types) {
    const int64_t n = 4 * block_elems(t);
    const int64_t nb = n / block_elems(t);
    for (const int fill : {0x00, 0xff, 0x80, 0x7f, 0x55, 0xaa, -1}) {
      CAPTURE(name(t));
      CAPTURE(fill);
      const auto w = raw_weights(t, nb, fill, 11, [&](int64_t, size_t) { return one; });
      for (const auto& code : kCodes) {
        const auto x = raw_activations(
            t, n, [](int64_t) { return 1.0f; }, code);
        check_dot(t, w.data(), x.data(), n);
      }
    }
    for (uint32_t seed = 20; seed < 24; ++seed) {
      CAPTURE(name(t));
      CAPTURE(seed);
      const auto w = raw_weights(t, nb, -1, seed, [&](int64_t b, size_t f) { return scales[(b + 3 * f + seed) % 10]; });
      // Activation scales as quantizers make them: Q8_0 / Q8_1 positive, up to
      // where Q8_1's s = d * sum(q) still fits fp16; Q8_K of either sign.
      const float act_scales[] = {0x1p-14f, 1.0f, 0x1p-12f, 7.5f};
      const bool signed_scale = vec_dot_type(t) == GgmlType::Q8_K;
      const auto x = raw_activations(
          t, n, [&](int64_t b) { return act_scales[(b + seed) % 4] * (signed_scale && b % 2 ? -1.0f : 1.0f); },
          kCodes[3]);
      check_dot(t, w.data(), x.data(), n);
    }
  }
}

TEST_CASE("MXFP4 vec_dot on every nibble pattern and E8M0 exponents across the float range") {
  // As above, with MXFP4's one-byte exponent in place of an fp16 scale: 128
  // (one unit = 1) for the filled blocks, then exponents from the subnormal
  // 2^-128 to 2^102 (the largest whose products stay finite against 7.5 *
  // 127) under activation scales down to an fp16 subnormal. 5 blocks: the odd
  // last block runs too.
  const GgmlType t = GgmlType::MXFP4;
  const int64_t nb = 5, n = nb * 32;
  auto with_exponents = [&](std::vector<uint8_t> w, const std::function<uint8_t(int64_t)>& e) {
    for (int64_t b = 0; b < nb; ++b) w[static_cast<size_t>(b) * mxfp4::kBlockBytes] = e(b);
    return w;
  };
  for (const int fill : {0x00, 0xff, 0x88, 0x77, 0x55, 0xaa, -1}) {
    CAPTURE(fill);
    const auto w = with_exponents(raw_weights(t, nb, fill, 11, [](int64_t, size_t) { return uint16_t{0}; }),
                                  [](int64_t) { return uint8_t{128}; });
    for (const auto& code : kCodes) {
      const auto x = raw_activations(
          t, n, [](int64_t) { return 1.0f; }, code);
      check_dot(t, w.data(), x.data(), n);
    }
  }
  const uint8_t exponents[] = {0, 1, 2, 60, 127, 128, 129, 200, 230};
  const float act_scales[] = {0x1p-14f, 1.0f, 0x1p-24f, 7.5f, 0x1p-12f};
  for (uint32_t seed = 20; seed < 29; ++seed) {
    CAPTURE(seed);
    const auto w = with_exponents(raw_weights(t, nb, -1, seed, [](int64_t, size_t) { return uint16_t{0}; }),
                                  [&](int64_t b) { return exponents[(b + seed) % 9]; });
    const auto x = raw_activations(
        t, n, [&](int64_t b) { return act_scales[(b + 2 * seed) % 5]; }, kCodes[3]);
    check_dot(t, w.data(), x.data(), n);
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

TEST_CASE("AVX2 Q8_1 activation quantizer: Q8_0's codes, and a block sum that matches them") {
  if (!have_avx2("AVX2 Q8_1 quantizer")) return;
  const int64_t n = 32 * 256;
  auto xf = random_normal(n, 22, 2.0f);
  for (int j = 0; j < 32; ++j) xf[j] = static_cast<float>(j - 16);  // ties at +-63.5
  for (int j = 32; j < 64; ++j) xf[j] = 0.0f;
  const auto ref = activations(GgmlType::Q4_1, Isa::scalar, xf.data(), n);
  const auto fast = activations(GgmlType::Q5_1, Isa::avx2, xf.data(), n);
  const auto q8_0 = activations(GgmlType::Q4_0, Isa::avx2, xf.data(), n);
  for (int64_t b = 0; b < n / 32; ++b) {
    CAPTURE(b);
    const uint8_t* rb = ref.data() + b * 36;
    const uint8_t* fb = fast.data() + b * 36;
    CHECK(load_u16(rb) == load_u16(fb));
    CHECK(std::memcmp(fb + 4, q8_0.data() + b * 34 + 2, 32) == 0);  // the same codes as Q8_0's AVX2 quantizer
    float amax = 0;
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
      amax = std::max(amax, std::fabs(xf[static_cast<size_t>(b * 32 + j)]));
      sum += static_cast<int8_t>(fb[4 + j]);
    }
    CHECK(load_u16(fb + 2) == fp32_to_fp16(amax / 127.0f * static_cast<float>(sum)));
  }
}

TEST_CASE("AVX2 Q8_K activation quantizer is bit-exact with the reference") {
  if (!have_avx2("AVX2 Q8_K quantizer")) return;
  const int64_t n = 256 * 64;
  auto xf = random_normal(n, 23, 2.0f);
  for (int j = 0; j < 256; ++j) xf[j] = static_cast<float>(j - 128);  // ties at +-63.5 (scale 127/128)
  for (int j = 256; j < 512; ++j) xf[j] = 0.0f;                       // all-zero block
  xf[512 + 7] = -9.0f;                                                // the first of two largest magnitudes
  xf[512 + 100] = 9.0f;                                               // decides the sign of the scale
  xf[768 + 3] = 1e30f;                                                // one huge value, the rest round to 0
  const auto ref = activations(GgmlType::Q4_K, Isa::scalar, xf.data(), n);
  const auto fast = activations(GgmlType::Q6_K, Isa::avx2, xf.data(), n);
  REQUIRE(ref.size() == fast.size());
  for (int64_t b = 0; b < n / 256; ++b) {
    CAPTURE(b);
    CHECK(std::memcmp(ref.data() + b * 292, fast.data() + b * 292, 292) == 0);
  }
}

TEST_CASE("Q2_0's SIMD kernels give the scalar reference's result bit for bit") {
  // ggml's x86 build dots Q2_0 with its generic code, which the scalar
  // reference follows; the AVX2 kernel repeats its float operations on the
  // same exact integer sums, so any difference is a bug, not rounding.
  const GgmlType t = GgmlType::Q2_0;
  const auto simd = simd_isas_to_test("Q2_0 SIMD vs scalar");
  uint32_t seed = 300;
  for (const int64_t n : {int64_t{64}, int64_t{192}, int64_t{4096}}) {
    CAPTURE(n);
    const auto wf = random_normal(static_cast<size_t>(n), ++seed, 0.05f);
    const auto xf = random_normal(static_cast<size_t>(n), ++seed, 3.0f);
    const auto w = quantized(t, wf.data(), n);
    // Random bytes use code 3 (2d), which the quantizer never writes.
    const auto raw =
        raw_weights(t, n / 64, -1, seed, [&](int64_t b, size_t) { return static_cast<uint16_t>(0x3000 + b % 7); });
    for (const Isa act_isa : isas_to_test()) {
      const auto x = activations(t, act_isa, xf.data(), n);
      for (const Isa isa : simd) {
        CAPTURE(isa_name(isa));
        CHECK(vec_dot(t, isa)(w.data(), x.data(), n) == vec_dot(t, Isa::scalar)(w.data(), x.data(), n));
        CHECK(vec_dot(t, isa)(raw.data(), x.data(), n) == vec_dot(t, Isa::scalar)(raw.data(), x.data(), n));
      }
    }
  }
}
