// Public fp16 / bf16 conversions (see half.h for the definitions) and the
// fp16 -> fp32 table the kernels read block scales from.
#include "engine/kernels/half.h"

#include "engine/kernels/format.h"

namespace ns::kernels {
namespace {

constexpr Fp16Table make_fp16_table() {
  Fp16Table table{};
  for (uint32_t h = 0; h < 65536; ++h) table.value[h] = half_to_float(static_cast<uint16_t>(h));
  return table;
}

}  // namespace

// Built by the compiler: read-only data, no start-up cost, no initialisation order.
constexpr Fp16Table fp16_table = make_fp16_table();

float fp16_to_fp32(uint16_t h) { return half_to_float(h); }
uint16_t fp32_to_fp16(float f) { return float_to_half(f); }
float bf16_to_fp32(uint16_t h) { return bf16_bits_to_float(h); }
uint16_t fp32_to_bf16(float f) { return float_to_bf16_bits(f); }

}  // namespace ns::kernels
