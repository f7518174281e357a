// The i-quants (weight formats on lookup grids, dotted against Q8_K) and the
// ternary TQ1_0 / TQ2_0: the tables' value sets, each dequantizer on hand-built
// blocks whose values follow by hand from the grid and sign facts, the ternary
// quantizers on hand-made rows and round trips, the scalar dot against the dot
// of the dequantized rows (tying the dot to the dequantizer), and the AVX2
// dot, tile and matmul against the scalar dot on random blocks.
#include "engine/kernels/iquant.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "engine/kernels/formats.h"
#include "common/error.h"
#include "engine/util/thread_pool.h"
#include "kernel_test_util.h"

using namespace ns::kernels;
using namespace ns::kernels::test;

namespace {

constexpr uint16_t kOne = 0x3c00, kMinusTwo = 0xc000;

// A finite fp16 of either sign with |d| in [2^-14, 2): the range real
// super-scales live in, and small enough that no dot overflows.
uint16_t random_scale(std::mt19937& rng) {
  const uint32_t sign = rng() & 1, exp = 1 + rng() % 15, mant = rng() & 0x3ff;
  return static_cast<uint16_t>((sign << 15) | (exp << 10) | mant);
}

// nb blocks of t: every byte `fill` (random where fill < 0), then a finite
// super-scale per block (`d`, or random where d == 0). Any bytes are a valid
// block once the scale is finite: indices, signs and sub-scales use all bits.
std::vector<uint8_t> blocks(GgmlType t, int64_t nb, uint32_t seed, int fill = -1, uint16_t d = 0) {
  const size_t bytes = ns::gguf::traits(t).block_bytes;
  std::vector<uint8_t> out(static_cast<size_t>(nb) * bytes);
  std::mt19937 rng(seed);
  for (auto& b : out) b = static_cast<uint8_t>(fill < 0 ? rng() : static_cast<unsigned>(fill));
  for (int64_t b = 0; b < nb; ++b) iq::set_super_scale(t, out.data() + b * bytes, d != 0 ? d : random_scale(rng));
  return out;
}

// n Q8_K activations with codes code(i) and block scale d, bsums as the format defines them.
std::vector<uint8_t> q8k_codes(int64_t n, float d, const std::function<int8_t(int64_t)>& code) {
  std::vector<uint8_t> out(static_cast<size_t>(n / 256) * q8_k::kBlockBytes);
  for (int64_t b = 0; b < n / 256; ++b) {
    uint8_t* blk = out.data() + b * q8_k::kBlockBytes;
    std::memcpy(blk, &d, sizeof d);
    for (int g = 0; g < 16; ++g) {
      int16_t s = 0;
      for (int j = 0; j < 16; ++j) {
        const int8_t q = code(b * 256 + 16 * g + j);
        blk[4 + 16 * g + j] = static_cast<uint8_t>(q);
        s = static_cast<int16_t>(s + q);
      }
      std::memcpy(blk + 260 + 2 * g, &s, sizeof s);
    }
  }
  return out;
}

void check_values(const std::vector<float>& got, const std::vector<float>& expected) {
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(got[i] == expected[i]);
  }
}

// Element e of every grid entry, as a set.
template <class T, size_t N>
std::set<int> byte_values(const T (&grid)[N], int per_entry) {
  std::set<int> s;
  for (const T e : grid)
    for (int j = 0; j < per_entry; ++j) s.insert(static_cast<int>((static_cast<uint64_t>(e) >> (8 * j)) & 0xff));
  return s;
}

template <class T, size_t N>
bool all_distinct(const T (&grid)[N]) {
  return std::set<T>(std::begin(grid), std::end(grid)).size() == N;
}

}  // namespace

TEST_CASE("i-quant tables hold ggml's value sets") {
  // kSigns completes 7 sign bits with an 8th that makes the count even.
  for (int i = 0; i < 128; ++i) CHECK(iq::kSigns[i] == (i | ((__builtin_popcount(i) & 1) << 7)));
  for (int s = 0; s < 256; ++s)
    for (int j = 0; j < 8; ++j)
      CHECK(static_cast<int8_t>(iq::grid_byte(iq::kSignFactors.v[s], j)) == ((s >> j) & 1 ? -1 : 1));
  CHECK(byte_values(iq::kIq2xxsGrid, 8) == std::set<int>{8, 25, 43});
  CHECK(byte_values(iq::kIq2xsGrid, 8) == std::set<int>{8, 25, 43});
  CHECK(byte_values(iq::kIq2sGrid, 8) == std::set<int>{8, 25, 43});
  CHECK(byte_values(iq::kIq3xxsGrid, 4) == std::set<int>{4, 12, 20, 28, 36, 44, 52, 62});
  CHECK(byte_values(iq::kIq3sGrid, 4) == std::set<int>{1, 3, 5, 7, 9, 11, 13, 15});
  CHECK(byte_values(iq::kIq1sGrid, 8) == std::set<int>{0x00, 0x01, 0xff});  // -1, 0, 1
  CHECK(all_distinct(iq::kIq2xxsGrid));
  CHECK(all_distinct(iq::kIq2xsGrid));
  CHECK(all_distinct(iq::kIq2sGrid));
  CHECK(all_distinct(iq::kIq3xxsGrid));
  CHECK(all_distinct(iq::kIq3sGrid));
  CHECK(all_distinct(iq::kIq1sGrid));
  // First and last entries, as ggml-common.h lists them.
  CHECK(iq::kIq2xxsGrid[0] == 0x0808080808080808ull);
  CHECK(iq::kIq2xxsGrid[255] == 0x2b2b2b1908081908ull);
  CHECK(iq::kIq2xsGrid[511] == 0x2b2b2b2b2b2b2b2bull);
  CHECK(iq::kIq2sGrid[1023] == 0x2b2b2b2b2b2b2b2bull);
  CHECK(iq::kIq3xxsGrid[255] == 0x3e341c04u);
  CHECK(iq::kIq3sGrid[511] == 0x0f0f0101u);
  CHECK(iq::kIq1sGrid[0] == 0xffffffffffffffffull);
  CHECK(iq::kIq1sGrid[2047] == 0x0101010101010101ull);
}

TEST_CASE("IQ2_XXS dequantizes hand-built blocks") {
  // Block 0, d = 1. Sub-block 0: grid indices 0, 1, 2, 255; sign fields 0, 1,
  // 3, 127 (kSigns: none, elements 0 and 7, elements 0 and 1, all 8); scale
  // s = 3, so every magnitude is multiplied by (0.5 + 3) / 4 = 0.875.
  // Sub-blocks 1..7: all zero, i.e. grid entry 0 (all 8), no signs, scale
  // 0.5 / 4: every element 1. Block 1, d = -2: sub-block 7 has scale s = 15
  // (-2 * 15.5 / 4 = -7.75 per unit), the others -2 * 0.125 * 8 = -2.
  std::vector<uint8_t> w(2 * iq2_xxs::kBlockBytes, 0);
  uint8_t* b0 = w.data();
  uint8_t* b1 = w.data() + iq2_xxs::kBlockBytes;
  store_u16(b0, kOne);
  b0[2 + 0] = 0;
  b0[2 + 1] = 1;
  b0[2 + 2] = 2;
  b0[2 + 3] = 255;
  const uint32_t word = 0u | (1u << 7) | (3u << 14) | (127u << 21) | (3u << 28);
  std::memcpy(b0 + 2 + 4, &word, 4);
  store_u16(b1, kMinusTwo);
  const uint32_t word7 = 15u << 28;
  std::memcpy(b1 + 2 + 8 * 7 + 4, &word7, 4);

  std::vector<float> expected;
  // grid[0] = 8 x 8
  for (int j = 0; j < 8; ++j) expected.push_back(7.0f);
  // grid[1] = 0x080808080808082b: 43 then 8s; signs on elements 0 and 7
  expected.push_back(-37.625f);
  for (int j = 1; j < 7; ++j) expected.push_back(7.0f);
  expected.push_back(-7.0f);
  // grid[2] = 0x0808080808081919: 25, 25, then 8s; signs on elements 0 and 1
  expected.push_back(-21.875f);
  expected.push_back(-21.875f);
  for (int j = 2; j < 8; ++j) expected.push_back(7.0f);
  // grid[255] = 0x2b2b2b1908081908: 8, 25, 8, 8, 25, 43, 43, 43, all negative
  for (const float m : {8.0f, 25.0f, 8.0f, 8.0f, 25.0f, 43.0f, 43.0f, 43.0f}) expected.push_back(-0.875f * m);
  for (int e = 32; e < 256; ++e) expected.push_back(1.0f);
  for (int e = 0; e < 224; ++e) expected.push_back(-2.0f);
  for (int e = 224; e < 256; ++e) expected.push_back(-62.0f);
  check_values(dequantized(GgmlType::IQ2_XXS, w.data(), 512), expected);
}

TEST_CASE("IQ1_S dequantizes hand-built blocks") {
  // Block 0, d = 1. Sub-block 0: group indices 0, 1, 0x400, 0x7ff (low bytes
  // 0, 1, 0, 0xff; high bits 0, 0, 4, 7 in qh), scale s = 2 (ls = 5), delta
  // -1/8: x = 5 * (grid - 0.125). Sub-blocks 1..7: all zero, grid entry 0
  // (all -1), ls = 1, delta +1/8: x = -0.875. Block 1, d = -2: sub-block 3
  // has s = 7 (ls = 15): -2 * 15 * -0.875 = 26.25; the others -2 * -0.875 = 1.75.
  std::vector<uint8_t> w(2 * iq1_s::kBlockBytes, 0);
  uint8_t* b0 = w.data();
  uint8_t* b1 = w.data() + iq1_s::kBlockBytes;
  store_u16(b0, kOne);
  b0[2 + 1] = 1;
  b0[2 + 3] = 0xff;
  store_u16(b0 + 34, static_cast<uint16_t>((4 << 6) | (7 << 9) | (2 << 12) | 0x8000));
  store_u16(b1, kMinusTwo);
  store_u16(b1 + 34 + 2 * 3, static_cast<uint16_t>(7 << 12));

  std::vector<float> expected;
  for (int j = 0; j < 8; ++j) expected.push_back(-5.625f);  // grid[0]: all -1
  expected.push_back(4.375f);                               // grid[1] = 0xffffffffffffff01: 1, then -1s
  for (int j = 1; j < 8; ++j) expected.push_back(-5.625f);
  // grid[0x400] = 0x0000000000ff0100: 0, 1, -1, then 0s
  for (const float g : {0.0f, 1.0f, -1.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f}) expected.push_back(5 * (g - 0.125f));
  for (int j = 0; j < 8; ++j) expected.push_back(4.375f);  // grid[0x7ff]: all 1
  for (int e = 32; e < 256; ++e) expected.push_back(-0.875f);
  for (int e = 0; e < 256; ++e) expected.push_back(e / 32 == 3 ? 26.25f : 1.75f);
  check_values(dequantized(GgmlType::IQ1_S, w.data(), 512), expected);
}

TEST_CASE("IQ1_M dequantizes hand-built blocks") {
  // Block 0, d = 1 = fp16 0x3c00, its nibbles 0, 0, 0xc, 0x3 the top nibbles
  // of scale words 0..3. Sub-block 0: scale 1 (ls = 3) for groups 0, 1 (word
  // 0, bits 0..2) and 6 (ls = 13) for groups 2, 3 (bits 3..5); group indices
  // 1, 0, 0x7ff, 0x400 (low bytes 1, 0, 0xff, 0; high bits 0, 0, 7, 4 in the
  // qh nibbles, whose bit 3 makes delta -1/8 for groups 0 and 3).
  // Sub-blocks 1..7: grid entry 0 (all -1), ls = 1, delta +1/8: -0.875.
  // Block 1, d = 0.5 (0x3800), all else zero: 0.5 * -0.875 = -0.4375.
  std::vector<uint8_t> w(2 * iq1_m::kBlockBytes, 0);
  uint8_t* b0 = w.data();
  uint8_t* b1 = w.data() + iq1_m::kBlockBytes;
  b0[0] = 1;
  b0[2] = 0xff;
  b0[32] = 0x08;                       // group 0: high bits 0, delta -; group 1: high bits 0, delta +
  b0[33] = 0x07 | ((0x4 | 0x8) << 4);  // group 2: high bits 7, delta +; group 3: high bits 4, delta -
  store_u16(b0 + 48, static_cast<uint16_t>(1 | (6 << 3)));
  store_u16(b0 + 52, 0xc000);
  store_u16(b0 + 54, 0x3000);
  store_u16(b1 + 52, 0x8000);
  store_u16(b1 + 54, 0x3000);

  std::vector<float> expected;
  expected.push_back(2.625f);  // grid[1]: 1, then -1s; 3 * (g - 0.125)
  for (int j = 1; j < 8; ++j) expected.push_back(-3.375f);
  for (int j = 0; j < 8; ++j) expected.push_back(-2.625f);                 // grid[0]: all -1; 3 * (g + 0.125)
  for (int j = 0; j < 8; ++j) expected.push_back(14.625f);                 // grid[0x7ff]: all 1; 13 * (g + 0.125)
  for (const float g : {0.0f, 1.0f, -1.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f})  // grid[0x400]; 13 * (g - 0.125)
    expected.push_back(13 * (g - 0.125f));
  for (int e = 32; e < 256; ++e) expected.push_back(-0.875f);
  for (int e = 0; e < 256; ++e) expected.push_back(-0.4375f);
  check_values(dequantized(GgmlType::IQ1_M, w.data(), 512), expected);
}

TEST_CASE("IQ4_XS dequantizes hand-built blocks") {
  // d = 0.5. Sub-block 0: 6-bit scale 33 (low nibble 1 in scales_l[0], high
  // bits 2 in scales_h bits 0..1), so x = 0.5 * (33 - 32) * level; byte j of
  // its qs holds nibbles j (element j) and 15 - j (element j + 16), walking
  // all 16 levels -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38,
  // 53, 69, 89, 113. Sub-block 7: scale 63 (high nibble 15 of scales_l[3],
  // scales_h bits 14..15 = 3), nibbles 15: 0.5 * 31 * 113. The others: scale
  // 0, nibbles 0: 0.5 * -32 * -127 = 2032.
  std::vector<uint8_t> w(iq4_xs::kBlockBytes, 0);
  store_u16(w.data(), 0x3800);
  store_u16(w.data() + 2, static_cast<uint16_t>(2 | (3 << 14)));
  w[4] = 0x01;
  w[4 + 3] = 0xf0;
  for (int j = 0; j < 16; ++j) w[8 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  for (int j = 0; j < 16; ++j) w[8 + 16 * 7 + j] = 0xff;

  const float half_levels[16] = {-63.5f, -52.0f, -41.5f, -32.5f, -24.5f, -17.5f, -11.0f, -5.0f,
                                 0.5f,   6.5f,   12.5f,  19.0f,  26.5f,  34.5f,  44.5f,  56.5f};
  std::vector<float> expected;
  for (int j = 0; j < 16; ++j) expected.push_back(half_levels[j]);
  for (int j = 0; j < 16; ++j) expected.push_back(half_levels[15 - j]);
  for (int e = 32; e < 224; ++e) expected.push_back(2032.0f);
  for (int e = 224; e < 256; ++e) expected.push_back(1751.5f);
  check_values(dequantized(GgmlType::IQ4_XS, w.data(), 256), expected);
}

TEST_CASE("IQ3_XXS dequantizes hand-built blocks") {
  // Block 0, d = 1. Sub-block 0: group indices 0, 255, then 0s (4 magnitudes
  // each); sign field 1 for its first 8 elements (kSigns: elements 0 and 7),
  // 0 for the rest; scale s = 1, so magnitudes times (0.5 + 1) / 2 = 0.75.
  // Sub-blocks 1..7: all zero, grid entry 0 (4, 4, 4, 4), scale 0.5 / 2: 1.
  // Block 1, d = -2: sub-block 5 has s = 15: -2 * 15.5 / 2 * 4 = -62; the
  // others -2 * 0.25 * 4 = -2.
  std::vector<uint8_t> w(2 * iq3_xxs::kBlockBytes, 0);
  uint8_t* b0 = w.data();
  uint8_t* b1 = w.data() + iq3_xxs::kBlockBytes;
  store_u16(b0, kOne);
  b0[2 + 1] = 255;
  const uint32_t word = 1u | (1u << 28);
  std::memcpy(b0 + 66, &word, 4);
  store_u16(b1, kMinusTwo);
  const uint32_t word5 = 15u << 28;
  std::memcpy(b1 + 66 + 4 * 5, &word5, 4);

  // grid[0] = 0x04040404, grid[255] = 0x3e341c04: 4, 28, 52, 62
  std::vector<float> expected = {-3.0f, 3.0f, 3.0f, 3.0f, 3.0f, 21.0f, 39.0f, -46.5f};
  for (int e = 8; e < 32; ++e) expected.push_back(3.0f);
  for (int e = 32; e < 256; ++e) expected.push_back(1.0f);
  for (int e = 0; e < 256; ++e) expected.push_back(e / 32 == 5 ? -62.0f : -2.0f);
  check_values(dequantized(GgmlType::IQ3_XXS, w.data(), 512), expected);
}

TEST_CASE("IQ2_XS dequantizes hand-built blocks") {
  // Block 0, d = 1. Sub-block 0: 16-bit fields (index | sign field << 9)
  // 0 | 0, 1 | 1 << 9, 511 | 127 << 9, 2 | 3 << 9 (kSigns: none, elements 0
  // and 7, all 8, elements 0 and 1); scales byte 0x31: groups 0, 1 times
  // (0.5 + 1) / 4 = 0.375, groups 2, 3 times (0.5 + 3) / 4 = 0.875.
  // Sub-blocks 1..7: grid entry 0 (all 8), scale 0.5 / 4: 1. Block 1, d = -2:
  // sub-block 2 has scales 0xf0: its first half -2 * 0.125 * 8 = -2, its
  // second -2 * 15.5 / 4 * 8 = -62; all else -2.
  std::vector<uint8_t> w(2 * iq2_xs::kBlockBytes, 0);
  uint8_t* b0 = w.data();
  uint8_t* b1 = w.data() + iq2_xs::kBlockBytes;
  store_u16(b0, kOne);
  store_u16(b0 + 2 + 2, static_cast<uint16_t>(1 | (1 << 9)));
  store_u16(b0 + 2 + 4, static_cast<uint16_t>(511 | (127 << 9)));
  store_u16(b0 + 2 + 6, static_cast<uint16_t>(2 | (3 << 9)));
  b0[66] = 0x31;
  store_u16(b1, kMinusTwo);
  b1[66 + 2] = 0xf0;

  std::vector<float> expected;
  for (int j = 0; j < 8; ++j) expected.push_back(3.0f);  // grid[0]: all 8
  expected.push_back(-16.125f);                          // grid[1]: 43, then 8s
  for (int j = 1; j < 7; ++j) expected.push_back(3.0f);
  expected.push_back(-3.0f);
  for (int j = 0; j < 8; ++j) expected.push_back(-37.625f);  // grid[511]: all 43
  expected.push_back(-21.875f);                              // grid[2]: 25, 25, then 8s
  expected.push_back(-21.875f);
  for (int j = 2; j < 8; ++j) expected.push_back(7.0f);
  for (int e = 32; e < 256; ++e) expected.push_back(1.0f);
  for (int e = 0; e < 256; ++e) expected.push_back(e >= 80 && e < 96 ? -62.0f : -2.0f);
  check_values(dequantized(GgmlType::IQ2_XS, w.data(), 512), expected);
}

TEST_CASE("TQ2_0 dequantizes hand-built blocks") {
  // d = 0.5 in the last two bytes. Codes 1 (0x55 bytes: value 0) everywhere
  // but qs[0] = 0b00'10'01'00, whose 2-bit fields are elements 0, 32, 64, 96
  // (codes 0, 1, 2, 0: -1, 0, 1, -1), and qs[37] = 0xff, code 3 in elements
  // 128 + 5, 160 + 5, 192 + 5, 224 + 5 (read as 3 - 1 = 2, as ggml does).
  std::vector<uint8_t> w(tq2_0::kBlockBytes, 0x55);
  store_u16(w.data() + 64, 0x3800);
  w[0] = 0x24;
  w[37] = 0xff;
  std::vector<float> expected(256, 0.0f);
  expected[0] = -0.5f;
  expected[64] = 0.5f;
  expected[96] = -0.5f;
  for (const int e : {133, 165, 197, 229}) expected[e] = 1.0f;
  check_values(dequantized(GgmlType::TQ2_0, w.data(), 256), expected);
}

TEST_CASE("TQ1_0 dequantizes hand-built blocks") {
  // Digit n of byte b is (uint8(b * 3^n) * 3) >> 8, weight digit - 1; d = -2
  // in the last two bytes. Byte 128 has every digit 1 (128 * odd = 128 mod
  // 256, 384 >> 8 = 1): weight 0, the background. Byte 108 = ceil(102 * 256 /
  // 243) carries 102 = 10210 in base 3: digits 1, 0, 2, 1, 0 (108 -> 324 >> 8
  // = 1; 68 -> 0; 204 -> 2; 100 -> 1; 44 -> 0), weights 0, -1, 1, 0, -1.
  // Byte 0 has every digit 0: weight -1.
  std::vector<uint8_t> w(tq1_0::kBlockBytes, 128);
  store_u16(w.data() + 52, kMinusTwo);
  w[0] = 0;         // elements 0, 32, 64, 96, 128 (qs[m], digit n: 32n + m)
  w[3] = 108;       // elements 3, 35, 67, 99, 131
  w[32 + 5] = 108;  // elements 165, 181, 197, 213, 229 (qs[32 + m], digit n: 160 + 16n + m)
  w[48 + 2] = 108;  // elements 242, 246, 250, 254 (qh[j], digit n < 4: 240 + 4n + j)
  std::vector<float> expected(256, 0.0f);
  for (const int e : {0, 32, 64, 96, 128}) expected[e] = 2.0f;
  const float pattern[5] = {0.0f, 2.0f, -2.0f, 0.0f, 2.0f};  // weights 0, -1, 1, 0, -1 times -2
  for (int n = 0; n < 5; ++n) {
    expected[32 * n + 3] = pattern[n];
    expected[160 + 16 * n + 5] = pattern[n];
    if (n < 4) expected[240 + 4 * n + 2] = pattern[n];
  }
  check_values(dequantized(GgmlType::TQ1_0, w.data(), 256), expected);
}

// The ternary quantizers (ggml's quantize_row_tq*_ref): d = the largest
// magnitude, digit round(x / d) + 1, half away from zero. Expected bytes by
// hand from the layouts in iquant.h.
TEST_CASE("TQ2_0 quantizes a hand-made row to the expected bytes") {
  // d = 2 (fp16 0x4000). x / d: element 0 1 (digit 2), 32 -0.5 (rounds away
  // to -1: digit 0), 64 0.495 (0: digit 1), 96 -0.6 (digit 0); element 133
  // 0.5 (rounds away to 1: digit 2). qs[0] packs elements 0, 32, 64, 96 at
  // bits 0, 2, 4, 6: 2 | 0 | 1 << 4 | 0 = 0x12; qs[37] elements 133, 165,
  // 197, 229: 2 | 1 << 2 | 1 << 4 | 1 << 6 = 0x56; the rest digit 1: 0x55.
  std::vector<float> x(256, 0.0f);
  x[0] = 2.0f, x[32] = -1.0f, x[64] = 0.99f, x[96] = -1.2f, x[133] = 1.0f;
  std::vector<uint8_t> expected(tq2_0::kBlockBytes, 0x55);
  expected[0] = 0x12;
  expected[37] = 0x56;
  store_u16(expected.data() + 64, 0x4000);
  CHECK(quantized(GgmlType::TQ2_0, x.data(), 256) == expected);
}

TEST_CASE("TQ1_0 quantizes a hand-made row to the expected bytes") {
  // d = 3 (fp16 0x4200). A byte holding digits a..e stores ceil(v * 256 /
  // 243), v = 81a + 27b + 9c + 3d + e; a qh byte's 4 digits are scaled by 3.
  // All digits 1: v = 121 -> 128 in qs, v = 40 * 3 -> 127 in qh.
  // qs[0], elements 0, 32, 64, 96, 128 = -3, 1.5, -1.4, 3, -1.5: x / d
  // -1, 0.5, -0.47, 1, -0.5, digits 0, 2, 1, 2, 0: v = 69 -> 73.
  // qs[37], elements 165, 181, 197, 213, 229: 197 = 2.9, digits 1, 1, 2, 1,
  // 1: v = 130 -> 137. qh[2], elements 242, 246, 250, 254: 246 = -3, digits
  // 1, 0, 1, 1: v = 31 * 3 -> 98.
  std::vector<float> x(256, 0.0f);
  x[0] = -3.0f, x[32] = 1.5f, x[64] = -1.4f, x[96] = 3.0f, x[128] = -1.5f;
  x[197] = 2.9f;
  x[246] = -3.0f;
  std::vector<uint8_t> expected(tq1_0::kBlockBytes, 128);
  for (int j = 0; j < 4; ++j) expected[48 + j] = 127;
  expected[0] = 73;
  expected[37] = 137;
  expected[48 + 2] = 98;
  store_u16(expected.data() + 52, 0x4200);
  CHECK(quantized(GgmlType::TQ1_0, x.data(), 256) == expected);
}

TEST_CASE("ternary quantizers: exact on ternary rows, within d / 2 on any row") {
  for (const GgmlType t : {GgmlType::TQ1_0, GgmlType::TQ2_0}) {
    CAPTURE(name(t));
    // Rows of -0.75, 0, 0.75 (0.75 exact in fp16), every block holding both
    // signs: every digit position of both layouts comes back as it went in.
    std::mt19937 rng(5);
    std::vector<float> ternary(1024);
    for (auto& v : ternary) v = 0.75f * static_cast<float>(static_cast<int>(rng() % 3) - 1);
    for (int b = 0; b < 4; ++b) ternary[256 * b + 7] = 0.75f, ternary[256 * b + 250] = -0.75f;
    check_values(dequantized(t, quantized(t, ternary.data(), 1024).data(), 1024), ternary);
    // Normal rows: each value is off by at most half the block's fp16 scale
    // (plus the scale's own fp16 rounding, 2^-11 relative).
    const auto x = random_normal(1024, 9);
    const auto back = dequantized(t, quantized(t, x.data(), 1024).data(), 1024);
    for (int b = 0; b < 4; ++b) {
      float amax = 0;
      for (int e = 0; e < 256; ++e) amax = std::max(amax, std::fabs(x[256 * b + e]));
      for (int e = 0; e < 256; ++e) CHECK(std::fabs(back[256 * b + e] - x[256 * b + e]) <= amax * (0.5f + 1.0f / 2048));
    }
    // An all-zero block: d = 0, every digit 1, all zero back.
    const std::vector<float> zeros(256, 0.0f);
    check_values(dequantized(t, quantized(t, zeros.data(), 256).data(), 256), zeros);
  }
}

TEST_CASE("IQ2_S dequantizes hand-built blocks") {
  // Block 0, d = 1. Sub-block 0: index low bytes 1, 0xff, 2, 0 with qh[0] =
  // 0b00'00'11'00 putting 3 above group 1's (index 0x3ff); explicit sign
  // bytes 0x81, 0xff, 0x03, 0x00; scales byte 0x31: groups 0, 1 times
  // (0.5 + 1) / 4 = 0.375, groups 2, 3 times (0.5 + 3) / 4 = 0.875.
  // Sub-blocks 1..7: grid entry 0 (all 8), scale 0.5 / 4: 1.
  std::vector<uint8_t> w(iq2_s::kBlockBytes, 0);
  store_u16(w.data(), kOne);
  w[2 + 0] = 1;
  w[2 + 1] = 0xff;
  w[2 + 2] = 2;
  w[34 + 0] = 0x81;
  w[34 + 1] = 0xff;
  w[34 + 2] = 0x03;
  w[66] = 0x0c;
  w[74] = 0x31;

  std::vector<float> expected;
  expected.push_back(-16.125f);  // grid[1] = 0x080808080808082b: 43, then 8s; signs on elements 0, 7
  for (int j = 1; j < 7; ++j) expected.push_back(3.0f);
  expected.push_back(-3.0f);
  for (int j = 0; j < 8; ++j) expected.push_back(-16.125f);  // grid[0x3ff]: all 43, all negative
  expected.push_back(-21.875f);                              // grid[2]: 25, 25, then 8s; signs on 0, 1
  expected.push_back(-21.875f);
  for (int j = 2; j < 8; ++j) expected.push_back(7.0f);
  for (int j = 0; j < 8; ++j) expected.push_back(7.0f);  // grid[0]
  for (int e = 32; e < 256; ++e) expected.push_back(1.0f);
  check_values(dequantized(GgmlType::IQ2_S, w.data(), 256), expected);
}

TEST_CASE("IQ3_S dequantizes hand-built blocks") {
  // Block 0, d = 0.5. Sub-block 0: group index low bytes 1, 0xff, then 0s,
  // with qh[0] = 0b10 putting bit 8 above group 1's (index 0x1ff); sign byte
  // 0x81 for its first 8 elements; scales[0] low nibble 2: times 2 * 2 + 1 = 5.
  // Sub-block 1 (scales[0] high nibble 7: times 15) and the rest (scale 1):
  // grid entry 0 (1, 1, 1, 1).
  std::vector<uint8_t> w(iq3_s::kBlockBytes, 0);
  store_u16(w.data(), 0x3800);
  w[2 + 0] = 1;
  w[2 + 1] = 0xff;
  w[66] = 0x02;
  w[74] = 0x81;
  w[106] = 0x72;

  // grid[1] = 0x01010103: 3, 1, 1, 1; grid[0x1ff] = 0x0f0f0101: 1, 1, 15, 15
  std::vector<float> expected = {-7.5f, 2.5f, 2.5f, 2.5f, 2.5f, 2.5f, 37.5f, -37.5f};
  for (int e = 8; e < 32; ++e) expected.push_back(2.5f);
  for (int e = 32; e < 64; ++e) expected.push_back(7.5f);
  for (int e = 64; e < 256; ++e) expected.push_back(0.5f);
  check_values(dequantized(GgmlType::IQ3_S, w.data(), 256), expected);
}

TEST_CASE("i-quants: the scalar dot is the dot of the dequantized rows") {
  uint32_t seed = 300;
  for (const GgmlType t : kIQuants) {
    for (const int64_t n : {256, 512, 1024, 4096}) {
      CAPTURE(name(t));
      CAPTURE(n);
      const auto w = blocks(t, n / 256, ++seed);
      const auto xf = random_normal(static_cast<size_t>(n), ++seed, 2.0f);
      std::vector<std::vector<uint8_t>> xs{
          activations(t, Isa::scalar, xf.data(), n), q8k_codes(n, 1.0f, [](int64_t) { return int8_t{127}; }),
          q8k_codes(n, -0.5f, [](int64_t i) { return static_cast<int8_t>(i % 3 ? -127 : 127); })};
      for (const auto& x : xs) {
        const RefDot ref = reference_dot(t, w.data(), x.data(), n);
        CHECK(std::fabs(vec_dot(t, Isa::scalar)(w.data(), x.data(), n) - ref.value) <= tolerance(t, n, ref));
      }
    }
  }
}

TEST_CASE("i-quants: AVX2 vec_dot and tile agree with the scalar dot") {
  if (!have_avx2("i-quant AVX2 kernels")) return;
  uint32_t seed = 500;
  for (const GgmlType t : kIQuants) {
    const FormatKernels& f = *find_format(t);
    REQUIRE((f.vec_dot_avx2 != nullptr));
    REQUIRE((f.tile_avx2 != nullptr));
    for (const int64_t n : {256, 1024, 4096}) {
      for (const int fill : {-1, 0x00, 0xff, 0x55, 0xaa}) {
        const int64_t rows = 9, max_tokens = 13;
        const size_t wb = row_bytes(t, n), xb = row_bytes(GgmlType::Q8_K, n);
        const auto w = blocks(t, rows * n / 256, ++seed, fill, fill < 0 ? 0 : kOne);
        std::vector<uint8_t> x(xb * max_tokens);
        for (int64_t k = 0; k < max_tokens; ++k) {
          // Random activations, and for the filled weights codes at +-127 (where maddubs would saturate).
          const auto xf = random_normal(static_cast<size_t>(n), ++seed, 2.0f);
          const auto xk =
              fill < 0 || k % 2
                  ? activations(t, Isa::avx2, xf.data(), n)
                  : q8k_codes(n, 1.0f, [k](int64_t i) { return static_cast<int8_t>((i + k) % 2 ? 127 : -127); });
          std::memcpy(x.data() + k * xb, xk.data(), xb);
        }
        std::vector<double> scalar(rows * max_tokens), tol(rows * max_tokens);
        for (int64_t k = 0; k < max_tokens; ++k) {
          for (int64_t r = 0; r < rows; ++r) {
            const uint8_t* wr = w.data() + r * wb;
            const uint8_t* xk = x.data() + k * xb;
            const RefDot ref = reference_dot(t, wr, xk, n);
            scalar[k * rows + r] = vec_dot(t, Isa::scalar)(wr, xk, n);
            tol[k * rows + r] = accumulation_tolerance(t, n, ref.abs_sum);
            CAPTURE(name(t));
            CAPTURE(n);
            CAPTURE(fill);
            CHECK(std::fabs(vec_dot(t, Isa::avx2)(wr, xk, n) - scalar[k * rows + r]) <= tol[k * rows + r]);
          }
        }
        for (const int64_t tokens : {1, 2, 3, 4, 5, 8, 13}) {
          CAPTURE(name(t));
          CAPTURE(n);
          CAPTURE(fill);
          CAPTURE(tokens);
          std::vector<float> y(static_cast<size_t>(rows * tokens), -1.0f);
          f.tile_avx2(Tile{w.data(), wb, rows, x.data(), xb, tokens, n, y.data(), rows});
          for (int64_t k = 0; k < tokens; ++k)
            for (int64_t r = 0; r < rows; ++r)
              CHECK(std::fabs(y[k * rows + r] - scalar[k * rows + r]) <= tol[k * rows + r]);
        }
      }
    }
  }
}

TEST_CASE("i-quants through matmul: one and several tokens, both ISAs") {
  ns::ThreadPool pool(2);
  MatmulScratch scratch;
  uint32_t seed = 700;
  for (const GgmlType t : kIQuants) {
    const int64_t rows = 30, cols = 1024, tokens = 6;
    const size_t wb = row_bytes(t, cols);
    const auto w = blocks(t, rows * cols / 256, ++seed);
    const auto x = random_normal(static_cast<size_t>(tokens * cols), ++seed, 1.0f);
    for (const Isa isa : isas_to_test()) {
      IsaScope scope(isa);
      for (const int64_t nt : {int64_t{1}, tokens}) {
        CAPTURE(name(t));
        CAPTURE(isa_name(isa));
        CAPTURE(nt);
        std::vector<float> y(static_cast<size_t>(rows * nt));
        matmul(MatrixView{t, w.data(), rows, cols, wb}, x.data(), nt, y.data(), pool, scratch);
        for (int64_t k = 0; k < nt; ++k) {
          const auto xa = activations(t, isa, x.data() + k * cols, cols);
          for (int64_t r = 0; r < rows; ++r) {
            const RefDot ref = reference_dot(t, w.data() + r * wb, xa.data(), cols);
            CHECK(std::fabs(y[k * rows + r] - ref.value) <= tolerance(t, cols, ref));
          }
        }
      }
    }
  }
}

TEST_CASE("i-quants are read-only: quantize_row says so") {
  std::vector<float> x(256, 0.5f);
  std::vector<uint8_t> q(512);
  for (const GgmlType t : kIQuants) {
    CAPTURE(name(t));
    if (t == GgmlType::TQ1_0 || t == GgmlType::TQ2_0) continue;  // quantized above
    CHECK(is_supported(t));
    CHECK(vec_dot_type(t) == GgmlType::Q8_K);
    CHECK((find_format(t)->quantize == nullptr));
    try {
      quantize_row(t, x.data(), q.data(), 256);
      FAIL("no error");
    } catch (const ns::Error& e) {
      CHECK(std::string(e.what()).find(name(t)) != std::string::npos);
      CHECK(std::string(e.what()).find("read-only") != std::string::npos);
    }
  }
}
