// Architecture settings (ArchTraits, engine/spec/hparams.h): every
// architecture the registry names reads a file that leaves the quirk keys out
// (expert_gating_func, expert_feed_forward_length,
// attention.sliding_window_pattern, the hybrids' layer pattern) with the
// defaults the reference's loader assumes for it, and its rope form.
#include <doctest/doctest.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "engine/arch/architecture.h"
#include "engine/gguf/gguf_file.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/spec/hparams.h"
#include "common/error.h"

using namespace ns;
namespace val = ns::gguf::val;

namespace {

// The reference's reading of a file of each architecture with the quirk keys absent
// (llama.cpp src/llama-model.cpp, load_hparams; the rope type from llama_model_rope_type).
struct Expected {
  RopeType rope;
  ExpertGating gating;             // expert_gating_func absent
  int64_t n_ff_expert;             // feed_forward_length 64, expert_used_count 2, expert_feed_forward_length absent
  std::vector<uint8_t> swa;        // attention.sliding_window 8 set, its pattern absent
  std::vector<uint8_t> recurrent;  // full_attention_interval absent (4)
  YarnMscale yarn_mscale;
};

const std::map<std::string, Expected>& expected() {
  using R = RopeType;
  using G = ExpertGating;
  const std::vector<uint8_t> none, hybrid = {1, 1, 1, 0};
  static const std::map<std::string, Expected> m = {
      {"llama", {R::norm, G::softmax, 64, none, none, YarnMscale::plain}},
      {"deepseek2", {R::norm, G::softmax, 64, none, none, YarnMscale::mscale_all_dim}},
      {"kimi-linear", {R::norm, G::softmax, 64, none, none, YarnMscale::plain}},
      {"kimi-k3", {R::norm, G::softmax, 64, none, none, YarnMscale::plain}},
      {"qwen2moe", {R::neox, G::softmax, 32, none, none, YarnMscale::plain}},
      {"qwen3moe", {R::neox, G::softmax, 32, none, none, YarnMscale::plain}},
      {"qwen3next", {R::neox, G::softmax, 32, none, hybrid, YarnMscale::plain}},
      {"qwen35moe", {R::imrope, G::softmax, 32, none, hybrid, YarnMscale::plain}},
      {"glm4moe", {R::neox, G::sigmoid, 32, none, none, YarnMscale::plain}},
      {"gpt-oss", {R::neox, G::softmax, 64, {1, 0, 1, 0}, none, YarnMscale::plain}},
      // The reference's graph refuses a minimax-m2 file without expert_gating_func; read as the sigmoid it is.
      {"minimax-m2", {R::neox, G::sigmoid, 64, none, none, YarnMscale::plain}},
      // Likewise bailingmoe2, whose expert_gating_func the reference requires.
      {"bailingmoe2", {R::neox, G::sigmoid, 64, none, none, YarnMscale::plain}},
      {"bailingmoe3", {R::norm, G::sigmoid, 64, none, none, YarnMscale::plain}},
      // deepseek32's reference loader requires expert_gating_func; glm-dsa's defaults to sigmoid.
      {"deepseek32", {R::norm, G::softmax, 64, none, none, YarnMscale::mscale_all_dim}},
      {"glm-dsa", {R::norm, G::sigmoid, 64, none, none, YarnMscale::mscale_all_dim}},
      // minimax-m3's converter always writes expert_gating_func (sigmoid); read as the sigmoid it is.
      {"minimax-m3", {R::neox, G::sigmoid, 64, none, none, YarnMscale::plain}},
      // deepseek4: every layer slides by the architecture itself (no swa_layers); sqrtsoftplus, which it requires.
      {"deepseek4", {R::norm, G::sqrt_softplus, 64, none, none, YarnMscale::plain}},
  };
  return m;
}

std::vector<std::string> registered() {
  std::vector<std::string> names;
  std::stringstream in(supported_architectures());
  for (std::string name; std::getline(in, name, ',');) names.push_back(name.substr(name.find_first_not_of(' ')));
  return names;
}

// A header only: the shape keys every architecture reads, none of the quirk keys.
Hparams read_minimal(const std::string& arch) {
  gguf::GgufWriter w;
  const std::string a = arch + ".";
  w.set("general.architecture", val::str(arch));
  w.set(a + "embedding_length", val::u32(64));
  w.set(a + "block_count", val::u32(4));
  w.set(a + "attention.head_count", val::u32(4));
  w.set(a + "feed_forward_length", val::u32(64));
  w.set(a + "expert_count", val::u32(4));
  w.set(a + "expert_used_count", val::u32(2));
  w.set(a + "attention.sliding_window", val::u32(8));
  // imrope's interleaved sections, which that form needs (the others would refuse them as M-RoPE).
  if (arch == "qwen35moe") w.set(a + "rope.dimension_sections", val::i32_array({2, 2, 2, 0}));
  const std::vector<uint8_t> header = w.serialize_header();
  return read_hparams(gguf::GgufFile::parse(header, arch));
}

}  // namespace

TEST_CASE("arch traits: every registered architecture reads the keys its file leaves out as the reference does") {
  const std::vector<std::string> names = registered();
  REQUIRE(names.size() == expected().size());
  for (const std::string& arch : names) {
    CAPTURE(arch);
    const auto e = expected().find(arch);
    REQUIRE_MESSAGE(e != expected().end(), "a registered architecture this test does not know: add its row");
    const Hparams hp = read_minimal(arch);
    CHECK(hp.rope_type == e->second.rope);
    CHECK(hp.expert_gating == e->second.gating);
    CHECK(hp.n_ff_expert == e->second.n_ff_expert);
    CHECK(hp.swa_layers == e->second.swa);
    CHECK(hp.recurrent_layers == e->second.recurrent);
    CHECK(hp.yarn_mscale == e->second.yarn_mscale);
  }
}

TEST_CASE("arch traits: imrope needs its sections, other forms refuse multimodal ones") {
  gguf::GgufWriter w;
  w.set("general.architecture", val::str("qwen35moe"));
  w.set("qwen35moe.embedding_length", val::u32(64));
  w.set("qwen35moe.block_count", val::u32(4));
  w.set("qwen35moe.attention.head_count", val::u32(4));
  const std::vector<uint8_t> header = w.serialize_header();
  CHECK_THROWS_WITH_AS(read_hparams(gguf::GgufFile::parse(header, "f.gguf")),
                       doctest::Contains("rope.dimension_sections' is missing (qwen35moe needs"), Error);

  gguf::GgufWriter m;
  m.set("general.architecture", val::str("glm4moe"));
  m.set("glm4moe.embedding_length", val::u32(64));
  m.set("glm4moe.block_count", val::u32(4));
  m.set("glm4moe.attention.head_count", val::u32(4));
  m.set("glm4moe.rope.dimension_sections", val::i32_array({8, 4, 4, 0}));
  const std::vector<uint8_t> mh = m.serialize_header();
  CHECK_THROWS_WITH_AS(read_hparams(gguf::GgufFile::parse(mh, "g.gguf")), doctest::Contains("M-RoPE"), Error);
}
