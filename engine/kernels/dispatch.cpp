// The format table (one row per weight or activation format), ISA detection
// and the public entry points that look a format up.
#include <algorithm>
#include <array>
#include <atomic>
#include <string>
#include <vector>

#include "engine/kernels/formats.h"
#include "engine/kernels/q4_0_r16.h"
#include "common/error.h"

namespace ns::kernels {
namespace {

// type, vec-dot type, reference {dequantize, quantize, vec_dot}, AVX2 {activation quantizer, vec_dot, tile},
// AVX-512 {vec_dot, tile} where a format has them (omitted: its AVX2 kernels), then for interleaved layouts
// the scalar tile and the row group.
constexpr FormatKernels kFormats[] = {
    {GgmlType::F32, GgmlType::F32, f32::dequantize, f32::quantize, f32::vec_dot,  //
     nullptr, f32_avx2::vec_dot, f32_avx2::tile},
    {GgmlType::F16, GgmlType::F16, f16::dequantize, f16::quantize, f16::vec_dot,  //
     f16_avx2::quantize, f16_avx2::vec_dot, f16_avx2::tile},
    {GgmlType::BF16, GgmlType::BF16, bf16::dequantize, bf16::quantize, bf16::vec_dot,  //
     bf16_avx2::quantize, bf16_avx2::vec_dot, bf16_avx2::tile},
    {GgmlType::Q8_0, GgmlType::Q8_0, q8_0::dequantize, q8_0::quantize, q8_0::vec_dot,  //
     q8_0_avx2::quantize, q8_0_avx2::vec_dot, q8_0_avx2::tile,                         //
     q8_0_avx512::vec_dot, q8_0_avx512::tile},
    {GgmlType::Q4_0, GgmlType::Q8_0, q4_0::dequantize, q4_0::quantize, q4_0::vec_dot,  //
     nullptr, q4_0_avx2::vec_dot, q4_0_avx2::tile,                                     //
     q4_0_avx512::vec_dot, q4_0_avx512::tile},
    {GgmlType::Q4_0_R16, GgmlType::Q8_0, q4_0_r16::dequantize, nullptr, q4_0_r16::vec_dot,  //
     nullptr, q4_0_r16::vec_dot, q4_0_r16_avx2::tile,                                       //
     q4_0_r16::vec_dot, q4_0_r16_avx512::tile, q4_0_r16::tile, q4_0_r16::kRows},
    {GgmlType::Q8_1, GgmlType::Q8_1, q8_1::dequantize, q8_1::quantize, nullptr,  //
     q8_1_avx2::quantize, nullptr, nullptr},
    {GgmlType::Q4_1, GgmlType::Q8_1, q4_1::dequantize, q4_1::quantize, q4_1::vec_dot,  //
     nullptr, q4_1_avx2::vec_dot, q4_1_avx2::tile},
    {GgmlType::Q5_0, GgmlType::Q8_0, q5_0::dequantize, q5_0::quantize, q5_0::vec_dot,  //
     nullptr, q5_0_avx2::vec_dot, q5_0_avx2::tile},
    {GgmlType::Q5_1, GgmlType::Q8_1, q5_1::dequantize, q5_1::quantize, q5_1::vec_dot,  //
     nullptr, q5_1_avx2::vec_dot, q5_1_avx2::tile},
    {GgmlType::IQ4_NL, GgmlType::Q8_0, iq4_nl::dequantize, iq4_nl::quantize, iq4_nl::vec_dot,  //
     nullptr, iq4_nl_avx2::vec_dot, iq4_nl_avx2::tile,                                         //
     iq4_nl_avx512::vec_dot, iq4_nl_avx512::tile},
    {GgmlType::MXFP4, GgmlType::Q8_0, mxfp4::dequantize, mxfp4::quantize, mxfp4::vec_dot,  //
     nullptr, mxfp4_avx2::vec_dot, mxfp4_avx2::tile,                                       //
     mxfp4_avx512::vec_dot, mxfp4_avx512::tile},
    {GgmlType::NVFP4, GgmlType::Q8_0, nvfp4::dequantize, nvfp4::quantize, nvfp4::vec_dot,  //
     nullptr, nvfp4_avx2::vec_dot, nvfp4_avx2::tile},
    {GgmlType::Q1_0, GgmlType::Q8_0, q1_0::dequantize, q1_0::quantize, q1_0::vec_dot,  //
     nullptr, q1_0_avx2::vec_dot, q1_0_avx2::tile},
    {GgmlType::Q2_0, GgmlType::Q8_0, q2_0::dequantize, q2_0::quantize, q2_0::vec_dot,  //
     nullptr, q2_0_avx2::vec_dot, q2_0_avx2::tile},
    {GgmlType::Q8_K, GgmlType::Q8_K, q8_k::dequantize, q8_k::quantize, nullptr,  //
     q8_k_avx2::quantize, nullptr, nullptr},
    {GgmlType::Q2_K, GgmlType::Q8_K, q2_k::dequantize, q2_k::quantize, q2_k::vec_dot,  //
     nullptr, q2_k_avx2::vec_dot, q2_k_avx2::tile,                                     //
     q2_k_avx512::vec_dot, q2_k_avx512::tile},
    {GgmlType::Q3_K, GgmlType::Q8_K, q3_k::dequantize, q3_k::quantize, q3_k::vec_dot,  //
     nullptr, q3_k_avx2::vec_dot, q3_k_avx2::tile,                                     //
     q3_k_avx512::vec_dot, q3_k_avx512::tile},
    {GgmlType::Q4_K, GgmlType::Q8_K, q4_k::dequantize, q4_k::quantize, q4_k::vec_dot,  //
     nullptr, q4_k_avx2::vec_dot, q4_k_avx2::tile,                                     //
     q4_k_avx512::vec_dot, q4_k_avx512::tile},
    {GgmlType::Q5_K, GgmlType::Q8_K, q5_k::dequantize, q5_k::quantize, q5_k::vec_dot,  //
     nullptr, q5_k_avx2::vec_dot, q5_k_avx2::tile,                                     //
     q5_k_avx512::vec_dot, q5_k_avx512::tile},
    {GgmlType::Q6_K, GgmlType::Q8_K, q6_k::dequantize, q6_k::quantize, q6_k::vec_dot,  //
     nullptr, q6_k_avx2::vec_dot, q6_k_avx2::tile,                                     //
     q6_k_avx512::vec_dot, q6_k_avx512::tile},
    {GgmlType::IQ2_XXS, GgmlType::Q8_K, iq2_xxs::dequantize, nullptr, iq2_xxs::vec_dot,  //
     nullptr, iq2_xxs_avx2::vec_dot, iq2_xxs_avx2::tile},
    {GgmlType::IQ1_S, GgmlType::Q8_K, iq1_s::dequantize, nullptr, iq1_s::vec_dot,  //
     nullptr, iq1_s_avx2::vec_dot, iq1_s_avx2::tile},
    {GgmlType::IQ1_M, GgmlType::Q8_K, iq1_m::dequantize, nullptr, iq1_m::vec_dot,  //
     nullptr, iq1_m_avx2::vec_dot, iq1_m_avx2::tile},
    {GgmlType::IQ4_XS, GgmlType::Q8_K, iq4_xs::dequantize, nullptr, iq4_xs::vec_dot,  //
     nullptr, iq4_xs_avx2::vec_dot, iq4_xs_avx2::tile},
    {GgmlType::IQ3_XXS, GgmlType::Q8_K, iq3_xxs::dequantize, nullptr, iq3_xxs::vec_dot,  //
     nullptr, iq3_xxs_avx2::vec_dot, iq3_xxs_avx2::tile},
    {GgmlType::IQ2_XS, GgmlType::Q8_K, iq2_xs::dequantize, nullptr, iq2_xs::vec_dot,  //
     nullptr, iq2_xs_avx2::vec_dot, iq2_xs_avx2::tile},
    {GgmlType::TQ2_0, GgmlType::Q8_K, tq2_0::dequantize, tq2_0::quantize, tq2_0::vec_dot,  //
     nullptr, tq2_0_avx2::vec_dot, tq2_0_avx2::tile},
    {GgmlType::TQ1_0, GgmlType::Q8_K, tq1_0::dequantize, tq1_0::quantize, tq1_0::vec_dot,  //
     nullptr, tq1_0_avx2::vec_dot, tq1_0_avx2::tile},
    {GgmlType::IQ2_S, GgmlType::Q8_K, iq2_s::dequantize, nullptr, iq2_s::vec_dot,  //
     nullptr, iq2_s_avx2::vec_dot, iq2_s_avx2::tile},
    {GgmlType::IQ3_S, GgmlType::Q8_K, iq3_s::dequantize, nullptr, iq3_s::vec_dot,  //
     nullptr, iq3_s_avx2::vec_dot, iq3_s_avx2::tile},
};

// Ids are small (ggml's enum), so the lookup is an array indexed by id.
constexpr size_t kMaxTypeId = 64;
constexpr std::array<const FormatKernels*, kMaxTypeId> make_index() {
  std::array<const FormatKernels*, kMaxTypeId> index{};
  for (const auto& f : kFormats) index[static_cast<size_t>(f.type)] = &f;
  return index;
}
constexpr auto kByType = make_index();

std::string supported_list() {
  std::string s;
  for (const auto& f : kFormats) {
    if (f.vec_dot == nullptr || f.row_group > 1) continue;  // activations; in-memory layouts
    if (!s.empty()) s += ", ";
    s += gguf::type_name(f.type);
  }
  return s;
}

}  // namespace

const FormatKernels& require_format(GgmlType t, const char* what) {
  const FormatKernels* f = find_format(t);
  if (f == nullptr || f->vec_dot == nullptr) {
    throw Error(ErrorKind::bad_model, std::string(what) + ": tensor type " + std::string(gguf::type_name(t)) +
                                          " has no kernels in this build (supported: " + supported_list() +
                                          "); use a model quantized to one of those");
  }
  return *f;
}

void require_whole_blocks(GgmlType t, int64_t n, const char* what) {
  const auto& tt = gguf::traits(t);
  if (n < 0 || n % tt.block_elems != 0) {
    throw Error(ErrorKind::bad_model, std::string(what) + ": " + std::string(tt.name) + " rows hold multiples of " +
                                          std::to_string(tt.block_elems) + " elements, got " + std::to_string(n) +
                                          "; the tensor's shape does not fit its type");
  }
}

namespace {

// The CPU flags each level needs (GCC's __builtin_cpu_supports names).
constexpr const char* kAvx2Flags[] = {"avx2", "fma", "f16c"};
constexpr const char* kAvx512Flags[] = {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512vnni"};

// __builtin_cpu_supports wants a string literal, so the flags are spelled out.
bool cpu_has(std::string_view flag) {
  __builtin_cpu_init();
  if (flag == "avx2") return __builtin_cpu_supports("avx2");
  if (flag == "fma") return __builtin_cpu_supports("fma");
  if (flag == "f16c") return __builtin_cpu_supports("f16c");
  if (flag == "avx512f") return __builtin_cpu_supports("avx512f");
  if (flag == "avx512bw") return __builtin_cpu_supports("avx512bw");
  if (flag == "avx512vl") return __builtin_cpu_supports("avx512vl");
  if (flag == "avx512dq") return __builtin_cpu_supports("avx512dq");
  if (flag == "avx512vnni") return __builtin_cpu_supports("avx512vnni");
  return false;
}

template <size_t N>
bool cpu_has_all(const char* const (&flags)[N]) {
  for (const char* f : flags)
    if (!cpu_has(f)) return false;
  return true;
}

Isa detect_isa() {
  if (!cpu_has_all(kAvx2Flags)) return Isa::scalar;
  return cpu_has_all(kAvx512Flags) ? Isa::avx512 : Isa::avx2;
}

std::atomic<int> g_forced_isa{-1};  // -1: use the detected ISA

}  // namespace

const FormatKernels* find_format(GgmlType t) {
  const auto id = static_cast<size_t>(t);
  return id < kByType.size() ? kByType[id] : nullptr;
}

bool is_supported(GgmlType t) {
  const FormatKernels* f = find_format(t);
  return f != nullptr && f->vec_dot != nullptr;
}

GgmlType vec_dot_type(GgmlType weight_type) { return require_format(weight_type, "vec_dot_type").vec_dot_type; }

void dequantize_row(GgmlType t, const void* src, float* dst, int64_t n) {
  const auto& f = require_format(t, "dequantize_row");
  require_whole_blocks(t, n, "dequantize_row");
  f.dequantize(src, dst, n);
}

void quantize_row(GgmlType t, const float* src, void* dst, int64_t n) {
  const auto& f = require_format(t, "quantize_row");
  if (f.quantize == nullptr) {
    throw Error(ErrorKind::invalid_input,
                "quantize_row: " + std::string(gguf::type_name(t)) +
                    " is read-only in nightshift (it computes with such weights but cannot make them; ggml's "
                    "quantizer needs an importance matrix): quantize with llama.cpp's llama-quantize instead");
  }
  require_whole_blocks(t, n, "quantize_row");
  f.quantize(src, dst, n);
}

Isa detected_isa() {
  static const Isa isa = detect_isa();
  return isa;
}

Isa active_isa() {
  const int forced = g_forced_isa.load(std::memory_order_relaxed);
  return forced < 0 ? detected_isa() : static_cast<Isa>(forced);
}

void set_isa(Isa isa) {
  g_forced_isa.store(static_cast<int>(std::min(isa, detected_isa())), std::memory_order_relaxed);
}

std::string cpu_feature_summary() {
  std::string s;
  std::vector<const char*> all(std::begin(kAvx2Flags), std::end(kAvx2Flags));
  all.insert(all.end(), std::begin(kAvx512Flags), std::end(kAvx512Flags));
  for (const char* f : all) {
    if (!cpu_has(f)) continue;
    if (!s.empty()) s += ' ';
    s += f;
  }
  return s.empty() ? "none of avx2 fma f16c avx512f avx512bw avx512vl avx512dq avx512vnni" : s;
}

std::optional<Isa> parse_cpu_features(std::string_view cpu_features) {
  if (cpu_features == "auto") return std::nullopt;
  for (const Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) {
    if (cpu_features != isa_name(isa)) continue;
    if (isa > detected_isa()) {
      const std::string needs = isa == Isa::avx512 ? "AVX-512 F/BW/VL/DQ with VNNI (avx512f avx512bw avx512vl "
                                                     "avx512dq avx512vnni) and AVX2/FMA/F16C"
                                                   : "AVX2, FMA and F16C (avx2 fma f16c)";
      throw Error(ErrorKind::invalid_input, "cpu_features: " + std::string(cpu_features) + " needs " + needs +
                                                "; this CPU has: " + cpu_feature_summary() +
                                                " (best path: " + isa_name(detected_isa()) + "); use auto or " +
                                                isa_name(detected_isa()));
    }
    return isa;
  }
  throw Error(ErrorKind::invalid_input,
              "cpu_features: '" + std::string(cpu_features) + "' is not one of: auto, avx512, avx2, scalar");
}

void set_isa_override(std::string_view cpu_features) {
  const std::optional<Isa> isa = parse_cpu_features(cpu_features);
  g_forced_isa.store(isa ? static_cast<int>(*isa) : -1, std::memory_order_relaxed);
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::scalar: return "scalar";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
  }
  return "unknown";
}

IsaKernels kernels_for(const FormatKernels& f, Isa isa) {
  isa = std::min(isa, detected_isa());
  if (isa == Isa::avx512 && f.vec_dot_avx512 != nullptr) {
    return {f.quantize_avx2 ? f.quantize_avx2 : f.quantize, f.vec_dot_avx512, f.tile_avx512};
  }
  if (isa >= Isa::avx2 && f.vec_dot_avx2 != nullptr) {
    return {f.quantize_avx2 ? f.quantize_avx2 : f.quantize, f.vec_dot_avx2, f.tile_avx2};
  }
  if (isa >= Isa::avx2) return {f.quantize_avx2 ? f.quantize_avx2 : f.quantize, f.vec_dot, f.tile_scalar};
  return {f.quantize, f.vec_dot, f.tile_scalar};
}

VecDotFn vec_dot(GgmlType t, Isa isa) { return kernels_for(require_format(t, "vec_dot"), isa).vec_dot; }

void rows_dot(GgmlType t, Isa isa, const void* w, size_t w_stride, int64_t rows, const void* x, int64_t n, float* y) {
  const FormatKernels& f = require_format(t, "rows_dot");
  const IsaKernels k = kernels_for(f, isa);
  const auto* wb = static_cast<const uint8_t*>(w);
  // The float-like formats' tiles sum in llama.cpp's batched order, not their dot's.
  if (k.tile != nullptr && f.row_group == 1 && gguf::traits(t).block_elems > 1) {
    k.tile(Tile{wb, w_stride, rows, static_cast<const uint8_t*>(x), 0, 1, n, y, rows});
    return;
  }
  for (int64_t r = 0; r < rows; ++r) y[r] = k.vec_dot(wb + r * w_stride, x, n);
}

void convert_activations(GgmlType weight_type, Isa isa, const float* src, void* dst, int64_t n) {
  const auto& act = *find_format(require_format(weight_type, "convert_activations").vec_dot_type);
  require_whole_blocks(act.type, n, "convert_activations");
  kernels_for(act, isa).quantize(src, dst, n);
}

}  // namespace ns::kernels
