#include "tools/make_model/weight_init.h"

#include "engine/kernels/formats.h"

namespace ns::make_model {
namespace {

constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;  // splitmix64's increment

uint64_t mix64(uint64_t z) {  // splitmix64's output function
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Approximately standard normal from 64 random bits: the sum of four 16-bit
// uniforms (Irwin-Hall), each taken at the middle of its bucket so the result
// is exactly symmetric around 0, scaled to unit variance. Bounded at ±3.46:
// no outliers to stretch a quantization block's scale.
float unit_normal(uint64_t bits) {
  // The four 16-bit fields summed in two steps (SWAR), then one conversion.
  const uint64_t pairs = (bits & 0x0000FFFF0000FFFFull) + ((bits >> 16) & 0x0000FFFF0000FFFFull);
  const auto sum = static_cast<int64_t>((pairs & 0xFFFFFFFFull) + (pairs >> 32));  // 0 .. 4 * 65535
  // Each field has mean 32767.5 and variance (65536^2 - 1) / 12.
  constexpr int64_t kMean = 4 * 65535 / 2;
  constexpr float kInvStd = 1.0f / 37837.23f;  // sqrt(4 * (65536^2 - 1) / 12)
  return static_cast<float>(sum - kMean) * kInvStd;
}

// The row's own stream: splitmix64 started from a hash of (seed, tensor, row).
uint64_t row_state(uint64_t seed, uint64_t key, uint64_t row) {
  return mix64(mix64(mix64(seed + kGamma) ^ key) + row * kGamma);
}

}  // namespace

uint64_t tensor_key(std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : name) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

void fill_row(uint64_t seed, uint64_t key, uint64_t row, const Init& init, float* out, int64_t n) {
  uint64_t state = row_state(seed, key, row);
  for (int64_t j = 0; j < n; ++j) {
    state += kGamma;
    out[j] = unit_normal(mix64(state));
  }
  if (init.kind == Init::Kind::norm) {
    for (int64_t j = 0; j < n; ++j) out[j] = 1.0f + init.scale * out[j];
    return;
  }
  // Centre the row: its sum is then ~0 up to rounding, so W·1 = 0 and a
  // component shared by all inputs cannot leak into every output.
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += out[j];
  const float mean = n > 1 ? static_cast<float>(sum / static_cast<double>(n)) : 0.0f;
  for (int64_t j = 0; j < n; ++j) out[j] = (out[j] - mean) * init.scale;
}

void fill_mxfp4_codes(uint64_t seed, uint64_t key, uint64_t row, const Init& init, uint8_t* out, int64_t n) {
  using namespace kernels::mxfp4;
  // Uniform codes: E[kValues^2] = (0 + 1 + 4 + 9 + 16 + 36 + 64 + 144) / 8 = 34.25,
  // a deviation of 5.85 * scale(e). The exponent whose deviation is nearest
  // init.scale by halving or doubling (exact in float, the same everywhere).
  uint8_t e = 128;
  while (e > 2 && 5.85f * scale(e) > 1.4142f * init.scale) --e;
  while (e < 200 && 5.85f * scale(e) * 1.4142f < init.scale) ++e;
  uint64_t state = row_state(seed, key, row);
  for (int64_t b = 0; b < n / kBlockElems; ++b, out += kBlockBytes) {
    out[0] = e;
    for (int half = 0; half < 2; ++half) {
      state += kGamma;
      uint64_t bits = mix64(state);
      for (int j = 0; j < 8; ++j, bits >>= 8) out[1 + half * 8 + j] = static_cast<uint8_t>(bits);
    }
  }
}

}  // namespace ns::make_model
