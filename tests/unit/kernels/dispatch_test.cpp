// The format table and ISA switch: which types have kernels, their vec-dot
// types, block geometry agreeing with the GGUF type table, exact output sizes,
// set_isa's clamping, the cpu_features override and the per-ISA fallbacks.
#include "engine/kernels/formats.h"
#include "common/error.h"
#include "kernel_test_util.h"

using namespace ns::kernels;
using namespace ns::kernels::test;

TEST_CASE("the weight formats have kernels; activation-only and other formats do not") {
  for (const GgmlType t : kTypes) CHECK(is_supported(t));
  for (const GgmlType t : kIQuants) CHECK(is_supported(t));
  for (const GgmlType t : {GgmlType::Q8_1, GgmlType::Q8_K, GgmlType::I8, GgmlType::I32, GgmlType::F64})
    CHECK_FALSE(is_supported(t));
  CHECK_FALSE(is_supported(static_cast<GgmlType>(1000)));
  // The activation-only formats still have their converters in the table.
  for (const GgmlType t : {GgmlType::Q8_1, GgmlType::Q8_K}) {
    const FormatKernels* f = find_format(t);
    REQUIRE(f != nullptr);
    CHECK((f->quantize != nullptr));
    CHECK((f->dequantize != nullptr));
    CHECK((f->vec_dot == nullptr));
  }
}

TEST_CASE("vec-dot types follow ggml's CPU choices") {
  CHECK(vec_dot_type(GgmlType::F32) == GgmlType::F32);
  CHECK(vec_dot_type(GgmlType::F16) == GgmlType::F16);
  CHECK(vec_dot_type(GgmlType::BF16) == GgmlType::BF16);
  CHECK(vec_dot_type(GgmlType::Q8_0) == GgmlType::Q8_0);
  CHECK(vec_dot_type(GgmlType::Q4_0) == GgmlType::Q8_0);
  CHECK(vec_dot_type(GgmlType::Q5_0) == GgmlType::Q8_0);
  CHECK(vec_dot_type(GgmlType::IQ4_NL) == GgmlType::Q8_0);
  CHECK(vec_dot_type(GgmlType::MXFP4) == GgmlType::Q8_0);
  for (const GgmlType t : kMultiBlockTypes) CHECK(vec_dot_type(t) == GgmlType::Q8_0);
  CHECK(vec_dot_type(GgmlType::Q4_1) == GgmlType::Q8_1);
  CHECK(vec_dot_type(GgmlType::Q5_1) == GgmlType::Q8_1);
  for (const GgmlType t : kKQuants) CHECK(vec_dot_type(t) == GgmlType::Q8_K);
  for (const GgmlType t : kIQuants) CHECK(vec_dot_type(t) == GgmlType::Q8_K);
  CHECK_THROWS_AS(vec_dot_type(GgmlType::I32), ns::Error);
  CHECK_THROWS_AS(vec_dot_type(GgmlType::Q8_K), ns::Error);
}

TEST_CASE("table rows agree with the GGUF type table") {
  for (const GgmlType t : kTypes) {
    const FormatKernels* f = find_format(t);
    REQUIRE(f != nullptr);
    CHECK(f->type == t);
    CHECK((f->dequantize != nullptr));
    CHECK((f->quantize != nullptr));
  }
  struct Geometry {
    GgmlType type;
    int64_t elems;
    size_t bytes;
  };
  const Geometry declared[] = {
      {GgmlType::Q8_0, q8_0::kBlockElems, q8_0::kBlockBytes},
      {GgmlType::Q4_0, q4_0::kBlockElems, q4_0::kBlockBytes},
      {GgmlType::Q4_1, q4_1::kBlockElems, q4_1::kBlockBytes},
      {GgmlType::Q5_0, q5_0::kBlockElems, q5_0::kBlockBytes},
      {GgmlType::Q5_1, q5_1::kBlockElems, q5_1::kBlockBytes},
      {GgmlType::Q8_1, q8_1::kBlockElems, q8_1::kBlockBytes},
      {GgmlType::IQ4_NL, iq4_nl::kBlockElems, iq4_nl::kBlockBytes},
      {GgmlType::MXFP4, mxfp4::kBlockElems, mxfp4::kBlockBytes},
      {GgmlType::Q1_0, q1_0::kBlockElems, q1_0::kBlockBytes},
      {GgmlType::Q2_0, q2_0::kBlockElems, q2_0::kBlockBytes},
      {GgmlType::NVFP4, nvfp4::kBlockElems, nvfp4::kBlockBytes},
      {GgmlType::Q8_K, q8_k::kBlockElems, q8_k::kBlockBytes},
      {GgmlType::Q2_K, q2_k::kBlockElems, q2_k::kBlockBytes},
      {GgmlType::Q3_K, q3_k::kBlockElems, q3_k::kBlockBytes},
      {GgmlType::Q4_K, q4_k::kBlockElems, q4_k::kBlockBytes},
      {GgmlType::Q5_K, q5_k::kBlockElems, q5_k::kBlockBytes},
      {GgmlType::Q6_K, q6_k::kBlockElems, q6_k::kBlockBytes},
      {GgmlType::IQ2_XXS, iq2_xxs::kBlockElems, iq2_xxs::kBlockBytes},
      {GgmlType::IQ1_S, iq1_s::kBlockElems, iq1_s::kBlockBytes},
      {GgmlType::IQ1_M, iq1_m::kBlockElems, iq1_m::kBlockBytes},
      {GgmlType::IQ4_XS, iq4_xs::kBlockElems, iq4_xs::kBlockBytes},
      {GgmlType::IQ3_XXS, iq3_xxs::kBlockElems, iq3_xxs::kBlockBytes},
      {GgmlType::IQ2_XS, iq2_xs::kBlockElems, iq2_xs::kBlockBytes},
      {GgmlType::TQ2_0, tq2_0::kBlockElems, tq2_0::kBlockBytes},
      {GgmlType::TQ1_0, tq1_0::kBlockElems, tq1_0::kBlockBytes},
      {GgmlType::IQ2_S, iq2_s::kBlockElems, iq2_s::kBlockBytes},
      {GgmlType::IQ3_S, iq3_s::kBlockElems, iq3_s::kBlockBytes},
  };
  for (const auto& g : declared) {
    CAPTURE(name(g.type));
    CHECK(ns::gguf::traits(g.type).block_elems == g.elems);
    CHECK(ns::gguf::traits(g.type).block_bytes == g.bytes);
  }
}

TEST_CASE("quantize_row and convert_activations write exactly one row's bytes") {
  const int64_t n = 512;
  const auto x = random_normal(n, 3);
  for (const GgmlType t : kTypes) {
    CAPTURE(name(t));
    for (const Isa isa : isas_to_test()) {
      const size_t bytes = row_bytes(t, n);
      std::vector<uint8_t> out(bytes + 16, 0xab);
      quantize_row(t, x.data(), out.data(), n);
      for (size_t i = bytes; i < out.size(); ++i) CHECK(out[i] == 0xab);
      const size_t act_bytes = row_bytes(vec_dot_type(t), n);
      std::vector<uint8_t> act(act_bytes + 16, 0xab);
      convert_activations(t, isa, x.data(), act.data(), n);
      for (size_t i = act_bytes; i < act.size(); ++i) CHECK(act[i] == 0xab);
    }
  }
}

TEST_CASE("conversions reject partial blocks and unsupported types") {
  std::vector<float> x(256);
  std::vector<uint8_t> q(512);
  CHECK_THROWS_AS(quantize_row(GgmlType::Q4_0, x.data(), q.data(), 40), ns::Error);
  CHECK_THROWS_AS(dequantize_row(GgmlType::Q8_0, q.data(), x.data(), 33), ns::Error);
  CHECK_THROWS_AS(quantize_row(GgmlType::Q4_K, x.data(), q.data(), 128), ns::Error);  // half a super-block
  CHECK_THROWS_AS(dequantize_row(GgmlType::I16, q.data(), x.data(), 256), ns::Error);
  CHECK_THROWS_AS(quantize_row(GgmlType::Q8_K, x.data(), q.data(), 256), ns::Error);  // activation-only
  CHECK_THROWS_AS(vec_dot(GgmlType::F64, Isa::scalar), ns::Error);
  try {
    quantize_row(GgmlType::I32, x.data(), q.data(), 256);
    FAIL("no error");
  } catch (const ns::Error& e) {
    // The message names the type and what is supported.
    CHECK(std::string(e.what()).find("I32") != std::string::npos);
    CHECK(std::string(e.what()).find("Q4_0") != std::string::npos);
    CHECK(std::string(e.what()).find("Q6_K") != std::string::npos);
  }
}

TEST_CASE("set_isa forces a path and clamps it to what the CPU has") {
  IsaScope scope(Isa::scalar);
  CHECK(active_isa() == Isa::scalar);
  set_isa(Isa::avx2);
  CHECK(active_isa() == std::min(Isa::avx2, detected_isa()));
  set_isa(Isa::avx512);
  CHECK(active_isa() == detected_isa());
  CHECK(std::string(isa_name(Isa::scalar)) == "scalar");
  CHECK(std::string(isa_name(Isa::avx2)) == "avx2");
  CHECK(std::string(isa_name(Isa::avx512)) == "avx512");
  MESSAGE("detected ISA: " << std::string(isa_name(detected_isa())) << "; CPU flags: " << cpu_feature_summary());
}

TEST_CASE("set_isa_override (cpu_features) forces a supported path and names the CPU's flags otherwise") {
  IsaScope scope(detected_isa());
  for (const Isa isa : kIsas) {
    CAPTURE(isa_name(isa));
    if (isa <= detected_isa()) {
      set_isa_override(isa_name(isa));
      CHECK(active_isa() == isa);
      continue;
    }
    try {
      set_isa_override(isa_name(isa));
      FAIL("no error for a path the CPU lacks");
    } catch (const ns::Error& e) {
      const std::string what = e.what();
      CHECK(e.kind() == ns::ErrorKind::invalid_input);
      CHECK(what.find(isa_name(isa)) != std::string::npos);
      CHECK(what.find("this CPU has: " + cpu_feature_summary()) != std::string::npos);
    }
  }
  set_isa_override("scalar");
  set_isa_override("auto");
  CHECK(active_isa() == detected_isa());
  try {
    set_isa_override("avx9");
    FAIL("no error for an unknown name");
  } catch (const ns::Error& e) {
    CHECK(std::string(e.what()).find("'avx9' is not one of: auto, avx512, avx2, scalar") != std::string::npos);
  }
  CHECK(active_isa() == detected_isa());
}

TEST_CASE("kernels_for prefers a format's AVX-512 kernels, else its AVX2 ones, and converts activations alike") {
  const FormatKernels& q4 = *find_format(GgmlType::Q4_0);
  const FormatKernels& q8 = *find_format(GgmlType::Q8_0);
  const FormatKernels& q41 = *find_format(GgmlType::Q4_1);
  CHECK((kernels_for(q4, Isa::scalar).vec_dot == q4.vec_dot));
  CHECK((kernels_for(q4, Isa::scalar).tile == nullptr));
  CHECK((kernels_for(q8, Isa::scalar).quantize == q8.quantize));
  if (detected_isa() >= Isa::avx2) {
    CHECK((kernels_for(q4, Isa::avx2).tile == q4.tile_avx2));
    CHECK((kernels_for(q8, Isa::avx2).quantize == q8.quantize_avx2));
  }
  if (detected_isa() >= Isa::avx512) {
    CHECK((kernels_for(q4, Isa::avx512).vec_dot == q4.vec_dot_avx512));
    CHECK((kernels_for(q4, Isa::avx512).tile == q4.tile_avx512));
    CHECK((kernels_for(q8, Isa::avx512).quantize == q8.quantize_avx2));  // the same activation bytes as AVX2
    CHECK((kernels_for(q41, Isa::avx512).tile == q41.tile_avx2));        // no AVX-512 version: AVX2's
  } else {
    // Clamped: a path the CPU lacks is never handed out.
    CHECK((kernels_for(q4, Isa::avx512).tile == kernels_for(q4, detected_isa()).tile));
  }
}
