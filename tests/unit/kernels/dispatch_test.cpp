// The format table and ISA switch: which types have kernels, their vec-dot
// types, block geometry agreeing with the GGUF type table, exact output sizes,
// and set_isa's clamping.
#include "engine/kernels/formats.h"
#include "engine/util/error.h"
#include "kernel_test_util.h"

using namespace ns::kernels;
using namespace ns::kernels::test;

TEST_CASE("the five formats have kernels, others do not") {
  for (const GgmlType t : kTypes) CHECK(is_supported(t));
  for (const GgmlType t :
       {GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q4_K, GgmlType::Q8_K, GgmlType::IQ4_NL, GgmlType::I32, GgmlType::F64})
    CHECK_FALSE(is_supported(t));
  CHECK_FALSE(is_supported(static_cast<GgmlType>(1000)));
}

TEST_CASE("vec-dot types follow ggml's CPU choices") {
  CHECK(vec_dot_type(GgmlType::F32) == GgmlType::F32);
  CHECK(vec_dot_type(GgmlType::F16) == GgmlType::F16);
  CHECK(vec_dot_type(GgmlType::BF16) == GgmlType::BF16);
  CHECK(vec_dot_type(GgmlType::Q8_0) == GgmlType::Q8_0);
  CHECK(vec_dot_type(GgmlType::Q4_0) == GgmlType::Q8_0);
  CHECK_THROWS_AS(vec_dot_type(GgmlType::Q6_K), ns::Error);
}

TEST_CASE("table rows agree with the GGUF type table") {
  for (const GgmlType t : kTypes) {
    const FormatKernels* f = find_format(t);
    REQUIRE(f != nullptr);
    CHECK(f->type == t);
    CHECK((f->dequantize != nullptr));
    CHECK((f->quantize != nullptr));
  }
  CHECK(ns::gguf::traits(GgmlType::Q8_0).block_elems == q8_0::kBlockElems);
  CHECK(ns::gguf::traits(GgmlType::Q8_0).block_bytes == q8_0::kBlockBytes);
  CHECK(ns::gguf::traits(GgmlType::Q4_0).block_elems == q4_0::kBlockElems);
  CHECK(ns::gguf::traits(GgmlType::Q4_0).block_bytes == q4_0::kBlockBytes);
}

TEST_CASE("quantize_row and convert_activations write exactly one row's bytes") {
  const int64_t n = 64;
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
  std::vector<float> x(64);
  std::vector<uint8_t> q(256);
  CHECK_THROWS_AS(quantize_row(GgmlType::Q4_0, x.data(), q.data(), 40), ns::Error);
  CHECK_THROWS_AS(dequantize_row(GgmlType::Q8_0, q.data(), x.data(), 33), ns::Error);
  CHECK_THROWS_AS(dequantize_row(GgmlType::Q4_K, q.data(), x.data(), 256), ns::Error);
  CHECK_THROWS_AS(vec_dot(GgmlType::IQ2_XXS, Isa::scalar), ns::Error);
  try {
    quantize_row(GgmlType::Q5_K, x.data(), q.data(), 256);
    FAIL("no error");
  } catch (const ns::Error& e) {
    // The message names the type and what is supported.
    CHECK(std::string(e.what()).find("Q5_K") != std::string::npos);
    CHECK(std::string(e.what()).find("Q4_0") != std::string::npos);
  }
}

TEST_CASE("set_isa forces scalar and clamps avx2 to what the CPU has") {
  IsaScope scope(Isa::scalar);
  CHECK(active_isa() == Isa::scalar);
  set_isa(Isa::avx2);
  CHECK(active_isa() == detected_isa());
  CHECK(std::string(isa_name(Isa::scalar)) == "scalar");
  CHECK(std::string(isa_name(Isa::avx2)) == "avx2");
  MESSAGE("detected ISA: " << std::string(isa_name(detected_isa())));
}
