// nightshift-make-model, run as a program and its output read back with the
// reader: names, shapes, types and metadata; determinism; the built-in and
// copied vocabularies; and the property benchmarks rely on (tests/bench/README.md, "Honest benchmark models"):
// quantized weights are zero-mean and random tokens spread over the experts.
#include <doctest/doctest.h>

#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/gguf/gguf_file.h"
#include "writer_test_util.h"

using namespace ns::gguf;
using writer_test::read_bytes;
using writer_test::ScratchDir;

namespace {

const std::string kTool = std::string(NS_BINARY_DIR) + "/tools/nightshift-make-model";

struct Run {
  int exit_code;
  std::string output;  // stdout and stderr
};

Run make_model(const std::string& args) {
  REQUIRE_MESSAGE(std::filesystem::exists(kTool), "build the nightshift-make-model target: " << kTool);
  ScratchDir log_dir;
  const std::string log = log_dir.file("log");
  const int status = std::system((kTool + " " + args + " > " + log + " 2>&1").c_str());
  const auto bytes = read_bytes(log);
  Run r{WIFEXITED(status) ? WEXITSTATUS(status) : -1, std::string(bytes.begin(), bytes.end())};
  return r;
}

std::shared_ptr<GgufFile> make_and_open(const ScratchDir& dir, const std::string& name, const std::string& args) {
  const std::string path = dir.file(name);
  const Run r = make_model(args + " --out " + path);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return GgufFile::open(path);
}

// The test's own decoding of the formats (independent of engine/kernels).
float half_to_float(uint16_t h) {
  const int exp = (h >> 10) & 0x1f;
  const int mant = h & 0x3ff;
  float v =
      exp == 0 ? std::ldexp(static_cast<float>(mant), -24) : std::ldexp(static_cast<float>(mant | 0x400), exp - 25);
  if (exp == 31) v = INFINITY;
  return (h & 0x8000) ? -v : v;
}

std::vector<float> dequantize(const GgufFile& f, const TensorInfo& t) {
  const uint8_t* p = f.tensor_data(t);
  const uint64_t n = t.n_elements();
  std::vector<float> out;
  out.reserve(n);
  auto u16 = [](const uint8_t* q) { return static_cast<uint16_t>(q[0] | (q[1] << 8)); };
  switch (t.type) {
    case GgmlType::F32:
      out.resize(n);
      std::memcpy(out.data(), p, n * 4);
      break;
    case GgmlType::F16:
      for (uint64_t k = 0; k < n; ++k) out.push_back(half_to_float(u16(p + 2 * k)));
      break;
    case GgmlType::BF16:
      for (uint64_t k = 0; k < n; ++k) {
        const uint32_t bits = static_cast<uint32_t>(u16(p + 2 * k)) << 16;
        float v;
        std::memcpy(&v, &bits, 4);
        out.push_back(v);
      }
      break;
    case GgmlType::Q8_0:
      for (uint64_t b = 0; b < n / 32; ++b, p += 34) {
        const float d = half_to_float(u16(p));
        for (int k = 0; k < 32; ++k) out.push_back(d * static_cast<int8_t>(p[2 + k]));
      }
      break;
    case GgmlType::Q4_0:
      for (uint64_t b = 0; b < n / 32; ++b, p += 18) {
        const float d = half_to_float(u16(p));
        for (int k = 0; k < 16; ++k) out.push_back(d * ((p[2 + k] & 0xF) - 8));
        for (int k = 0; k < 16; ++k) out.push_back(d * ((p[2 + k] >> 4) - 8));
      }
      break;
    case GgmlType::MXFP4:
      // OCP MX: E8M0 byte e is 2^(e - 127); E2M1 code s e1 e0 m is sign s
      // and magnitude 0, 0.5, 1, 1.5, 2, 3, 4 or 6; nibbles ordered as Q4_0.
      for (uint64_t b = 0; b < n / 32; ++b, p += 17) {
        static const float e2m1[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
        auto v = [&](int code) { return (code & 8 ? -1 : 1) * std::ldexp(e2m1[code & 7], p[0] - 127); };
        for (int k = 0; k < 16; ++k) out.push_back(v(p[1 + k] & 0xF));
        for (int k = 0; k < 16; ++k) out.push_back(v(p[1 + k] >> 4));
      }
      break;
    case GgmlType::Q1_0:
      // ggml-common.h: fp16 d, then 128 sign bits, bit j % 8 of byte j / 8; +d where set.
      for (uint64_t b = 0; b < n / 128; ++b, p += 18) {
        const float d = half_to_float(u16(p));
        for (int k = 0; k < 128; ++k) out.push_back((p[2 + k / 8] >> (k % 8)) & 1 ? d : -d);
      }
      break;
    case GgmlType::Q2_0:
      // fp16 d, then 64 2-bit codes q, bits 2 (k % 4) of byte k / 4: d (q - 1).
      for (uint64_t b = 0; b < n / 64; ++b, p += 18) {
        const float d = half_to_float(u16(p));
        for (int k = 0; k < 64; ++k) out.push_back(d * static_cast<float>(((p[2 + k / 4] >> (2 * (k % 4))) & 3) - 1));
      }
      break;
    case GgmlType::NVFP4:
      // Four UE4M3 bytes (exponent bias 7, 3 mantissa bits) scale 16-element
      // sub-blocks of E2M1 codes; sub-block s: low nibbles of bytes 8 s .. 8 s + 7, then their high nibbles.
      for (uint64_t b = 0; b < n / 64; ++b, p += 36) {
        static const float e2m1[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
        for (int s = 0; s < 4; ++s) {
          const int e = (p[s] >> 3) & 15, m = p[s] & 7;
          const float scale = e == 0 ? std::ldexp(static_cast<float>(m), -9) : std::ldexp(1 + m / 8.0f, e - 7);
          auto v = [&](int code) { return (code & 8 ? -1 : 1) * e2m1[code & 7] * scale; };
          for (int k = 0; k < 8; ++k) out.push_back(v(p[4 + 8 * s + k] & 0xF));
          for (int k = 0; k < 8; ++k) out.push_back(v(p[4 + 8 * s + k] >> 4));
        }
      }
      break;
    default: FAIL("unexpected type " << type_name(t.type));
  }
  return out;
}

struct Stats {
  double mean, std;
};
Stats stats(const std::vector<float>& v) {
  double s = 0, s2 = 0;
  for (float x : v) s += x;
  const double mean = s / static_cast<double>(v.size());
  for (float x : v) s2 += (x - mean) * (x - mean);
  return {mean, std::sqrt(s2 / static_cast<double>(v.size()))};
}

}  // namespace

TEST_CASE("the default model is a llama with the built-in BPE vocabulary") {
  ScratchDir dir;
  const auto f = make_and_open(dir, "default.gguf", "--seed 1 --name unit");
  CHECK(f->get_string("general.architecture") == "llama");
  CHECK(f->get_string("general.name") == "unit");
  CHECK(f->get_u64("general.alignment") == 32);
  CHECK(f->get_u64("general.file_type") == 7);  // mostly Q8_0
  CHECK(f->get_u64("llama.context_length") == 2048);
  CHECK(f->get_u64("llama.embedding_length") == 128);
  CHECK(f->get_u64("llama.block_count") == 3);
  CHECK(f->get_u64("llama.feed_forward_length") == 256);
  CHECK(f->get_u64("llama.attention.head_count") == 4);
  CHECK(f->get_u64("llama.attention.head_count_kv") == 2);
  CHECK(f->get_f64("llama.rope.freq_base") == 10000.0);
  CHECK(f->get_f64("llama.attention.layer_norm_rms_epsilon") == doctest::Approx(1e-5));
  CHECK(f->get_u64("llama.rope.dimension_count") == 32);
  CHECK(!f->has("llama.expert_count"));

  // Tensors: names, ggml-order shapes and types, in llama.cpp's order.
  std::vector<std::string> expected = {"token_embd.weight", "output_norm.weight", "output.weight"};
  for (int i = 0; i < 3; ++i)
    for (const char* s :
         {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"})
      expected.push_back("blk." + std::to_string(i) + "." + s + ".weight");
  REQUIRE(f->tensors().size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) CHECK(f->tensors()[i].name == expected[i]);
  auto shape = [&](const std::string& n) { return f->find_tensor(n)->dims; };
  auto type = [&](const std::string& n) { return f->find_tensor(n)->type; };
  CHECK(shape("token_embd.weight") == std::vector<uint64_t>{128, 512});
  CHECK(shape("output.weight") == std::vector<uint64_t>{128, 512});
  CHECK(shape("blk.2.attn_k.weight") == std::vector<uint64_t>{128, 64});
  CHECK(shape("blk.2.attn_output.weight") == std::vector<uint64_t>{128, 128});
  CHECK(shape("blk.0.ffn_up.weight") == std::vector<uint64_t>{128, 256});
  CHECK(shape("blk.0.ffn_down.weight") == std::vector<uint64_t>{256, 128});
  CHECK(shape("blk.1.ffn_norm.weight") == std::vector<uint64_t>{128});
  for (const auto& t : f->tensors()) {
    CAPTURE(t.name);
    CHECK(t.type == (t.dims.size() == 1 ? GgmlType::F32 : GgmlType::Q8_0));
  }
  CHECK(type("output_norm.weight") == GgmlType::F32);

  // The vocabulary: GPT-2 byte tokens, learned merges, two control tokens.
  CHECK(f->get_string("tokenizer.ggml.model") == "gpt2");
  CHECK(f->get_string("tokenizer.ggml.pre") == "gpt-2");
  const auto tokens = f->get_string_array("tokenizer.ggml.tokens");
  const auto types = f->get_i32_array("tokenizer.ggml.token_type");
  const auto merges = f->get_string_array("tokenizer.ggml.merges");
  REQUIRE(tokens.size() == 512);
  CHECK(f->get_u64("llama.vocab_size") == 512);
  REQUIRE(types.size() == 512);
  CHECK(tokens[0] == "!");
  CHECK(tokens[187] == "\xC3\xBF");  // ÿ, the last printable byte
  CHECK(tokens[188] == "\xC4\x80");  // byte 0 -> U+0100
  CHECK(tokens[220] == "\xC4\xA0");  // byte ' ' -> U+0120 'Ġ', as in GPT-2's vocabulary
  CHECK(std::set<std::string>(tokens.begin(), tokens.end()).size() == 512);
  REQUIRE(merges.size() == 254);
  std::map<std::string, size_t> id;
  for (size_t k = 0; k < tokens.size(); ++k) id[tokens[k]] = k;
  for (size_t m = 0; m < merges.size(); ++m) {
    CAPTURE(merges[m]);
    const size_t space = merges[m].find(' ');
    REQUIRE(space != std::string::npos);
    const std::string a = merges[m].substr(0, space), b = merges[m].substr(space + 1);
    REQUIRE(id.count(a));
    REQUIRE(id.count(b));
    CHECK(tokens[256 + m] == a + b);  // merge m makes token 256 + m ...
    CHECK(id[a] < 256 + m);           // ... from tokens that exist before it
    CHECK(id[b] < 256 + m);
  }
  CHECK(id.count("\xC4\xA0the"));  // " the": the text is English
  CHECK(f->get_u64("tokenizer.ggml.bos_token_id") == 510);
  CHECK(f->get_u64("tokenizer.ggml.eos_token_id") == 511);
  CHECK(tokens[510] == "<|bos|>");
  CHECK(tokens[511] == "<|eos|>");
  CHECK(types[510] == 3);
  CHECK(types[511] == 3);
  CHECK(std::count(types.begin(), types.end(), 1) == 510);
  CHECK(f->get_bool_or("tokenizer.ggml.add_bos_token", false));
}

TEST_CASE("--vocab-pre relabels the built-in vocabulary's pre-tokenizer and keeps the rest") {
  ScratchDir dir;
  const auto gpt2 = make_and_open(dir, "gpt2.gguf", "--seed 1");
  const auto kimi = make_and_open(dir, "kimi.gguf", "--seed 1 --vocab-pre kimi-k2");
  CHECK(kimi->get_string("tokenizer.ggml.pre") == "kimi-k2");
  CHECK(kimi->get_string_array("tokenizer.ggml.tokens") == gpt2->get_string_array("tokenizer.ggml.tokens"));
  CHECK(kimi->get_string_array("tokenizer.ggml.merges") == gpt2->get_string_array("tokenizer.ggml.merges"));
  // A --vocab file keeps its own pre-tokenizer.
  const Run both = make_model("--vocab " + dir.file("gpt2.gguf") + " --vocab-pre kimi-k2 --out " + dir.file("x.gguf"));
  CHECK(both.exit_code == 4);
  CHECK(both.output.find("--vocab-pre applies to the built-in vocabulary only") != std::string::npos);
}

TEST_CASE("MoE shapes, --tensor-type overrides and --tied-output") {
  ScratchDir dir;
  const auto f = make_and_open(dir, "moe.gguf",
                               "--n-expert 4 --n-expert-used 2 --n-ff 64 --n-layer 2 --type Q4_0 --tied-output "
                               "--tensor-type token_embd=F16 --tensor-type ffn_down_exps=Q8_0 "
                               "--tensor-type norm=BF16 --tensor-type 'blk\\.1\\..*attn_[qk]=F32'");
  CHECK(f->get_u64("general.file_type") == 2);  // mostly Q4_0
  CHECK(f->get_u64("llama.expert_count") == 4);
  CHECK(f->get_u64("llama.expert_used_count") == 2);
  CHECK(!f->find_tensor("output.weight"));
  CHECK(f->tensors().size() == 2 + 2 * 10);
  auto t = [&](const std::string& n) {
    const TensorInfo* info = f->find_tensor(n);
    REQUIRE_MESSAGE(info, n);
    return *info;
  };
  CHECK(t("blk.0.ffn_gate_inp.weight").dims == std::vector<uint64_t>{128, 4});
  CHECK(t("blk.0.ffn_gate_inp.weight").type == GgmlType::F32);  // routers stay F32
  CHECK(t("blk.0.ffn_gate_exps.weight").dims == std::vector<uint64_t>{128, 64, 4});
  CHECK(t("blk.0.ffn_up_exps.weight").dims == std::vector<uint64_t>{128, 64, 4});
  CHECK(t("blk.0.ffn_down_exps.weight").dims == std::vector<uint64_t>{64, 128, 4});
  CHECK(t("blk.0.ffn_gate_exps.weight").type == GgmlType::Q4_0);
  CHECK(t("blk.1.ffn_down_exps.weight").type == GgmlType::Q8_0);
  CHECK(t("token_embd.weight").type == GgmlType::F16);
  CHECK(t("blk.0.attn_norm.weight").type == GgmlType::F32);  // norms stay F32 whatever the overrides
  CHECK(t("output_norm.weight").type == GgmlType::F32);
  CHECK(t("blk.1.attn_q.weight").type == GgmlType::F32);  // regex
  CHECK(t("blk.1.attn_k.weight").type == GgmlType::F32);
  CHECK(t("blk.1.attn_v.weight").type == GgmlType::Q4_0);
  CHECK(t("blk.0.attn_q.weight").type == GgmlType::Q4_0);
  CHECK(!f->find_tensor("blk.0.ffn_gate.weight"));
}

TEST_CASE("MXFP4: --type and --tensor-type write it, with its block bytes and file type") {
  ScratchDir dir;
  const auto all =
      make_and_open(dir, "mxfp4.gguf", "--n-expert 4 --n-expert-used 2 --n-ff 64 --n-layer 1 --type mxfp4");
  CHECK(all->get_u64("general.file_type") == 38);  // LLAMA_FTYPE_MOSTLY_MXFP4_MOE
  const TensorInfo& gate = *all->find_tensor("blk.0.ffn_gate_exps.weight");
  CHECK(gate.type == GgmlType::MXFP4);
  CHECK(gate.nbytes == 128 / 32 * 17 * 64 * 4);
  CHECK(all->find_tensor("blk.0.ffn_gate_inp.weight")->type == GgmlType::F32);

  // Experts in MXFP4, the rest Q8_0: the layout of the MXFP4 MoE releases.
  const auto experts = make_and_open(dir, "experts.gguf",
                                     "--n-expert 4 --n-expert-used 2 --n-ff 64 --n-layer 2 --type Q8_0 "
                                     "--tensor-type _exps=MXFP4");
  CHECK(experts->get_u64("general.file_type") == 7);  // mostly Q8_0
  for (const auto& t : experts->tensors()) {
    CAPTURE(t.name);
    if (t.name.find("_exps") != std::string::npos) {
      CHECK(t.type == GgmlType::MXFP4);
      const Stats s = stats(dequantize(*experts, t));
      CHECK(std::isfinite(s.std));
      CHECK(s.std > 0);
    } else if (t.dims.size() > 1 && t.name.find("ffn_gate_inp") == std::string::npos) {
      CHECK(t.type == GgmlType::Q8_0);
    }
  }
}

TEST_CASE("Q1_0, Q2_0 and NVFP4: --type and --tensor-type write them, with their block bytes and file types") {
  // n_embd 128 (the generator's default): one Q1_0 block or two Q2_0 / NVFP4 blocks per gate row.
  ScratchDir dir;
  struct Case {
    const char* type;
    GgmlType ggml;
    uint64_t file_type, row_bytes;
  };
  const Case cases[] = {
      {"q1_0", GgmlType::Q1_0, 40, 18}, {"Q2_0", GgmlType::Q2_0, 41, 2 * 18}, {"nvfp4", GgmlType::NVFP4, 39, 2 * 36}};
  for (const Case& c : cases) {
    CAPTURE(c.type);
    const auto all =
        make_and_open(dir, std::string(c.type) + ".gguf",
                      "--n-expert 4 --n-expert-used 2 --n-ff 128 --n-layer 1 --type " + std::string(c.type));
    CHECK(all->get_u64("general.file_type") == c.file_type);  // LLAMA_FTYPE_MOSTLY_<type>
    const TensorInfo& gate = *all->find_tensor("blk.0.ffn_gate_exps.weight");
    CHECK(gate.type == c.ggml);
    CHECK(gate.nbytes == c.row_bytes * 128 * 4);

    // Experts in the type, the rest Q8_0; the experts decode (by the test's
    // own reading of ggml's layout) to zero-mean values at the fan-in scale.
    const auto experts = make_and_open(dir, std::string(c.type) + "-experts.gguf",
                                       "--n-expert 4 --n-expert-used 2 --n-ff 128 --n-layer 2 --type Q8_0 "
                                       "--tensor-type _exps=" +
                                           std::string(c.type));
    for (const auto& t : experts->tensors()) {
      if (t.name.find("_exps") == std::string::npos) continue;
      CAPTURE(t.name);
      CHECK(t.type == c.ggml);
      const Stats s = stats(dequantize(*experts, t));
      CHECK(std::isfinite(s.std));
      CHECK(s.std > 0);
      CHECK(std::fabs(s.mean) < 0.1 * s.std);
    }
  }
}

TEST_CASE("same flags and seed give identical bytes, whatever the thread count") {
  ScratchDir dir;
  const std::string flags = " --n-expert 4 --n-expert-used 2 --n-ff 64 --type Q4_0 --tensor-type output=BF16 ";
  REQUIRE(make_model(flags + "--seed 7 --threads 1 --out " + dir.file("a")).exit_code == 0);
  REQUIRE(make_model(flags + "--seed 7 --threads 2 --out " + dir.file("b")).exit_code == 0);
  REQUIRE(make_model(flags + "--seed 8 --out " + dir.file("c")).exit_code == 0);
  const auto a = read_bytes(dir.file("a")), b = read_bytes(dir.file("b")), c = read_bytes(dir.file("c"));
  CHECK(a == b);
  REQUIRE(a.size() == c.size());
  CHECK(a != c);
  // Only the weights differ: the header (up to the data) is the same.
  const uint64_t data = GgufFile::open(dir.file("a"))->data_offset();
  CHECK(std::equal(a.begin(), a.begin() + static_cast<long>(data), c.begin()));
  // Every tensor changes with the seed.
  const auto fa = GgufFile::open(dir.file("a")), fc = GgufFile::open(dir.file("c"));
  for (size_t i = 0; i < fa->tensors().size(); ++i) {
    const TensorInfo& t = fa->tensors()[i];
    CAPTURE(t.name);
    CHECK(std::memcmp(fa->tensor_data(t), fc->tensor_data(fc->tensors()[i]), t.nbytes) != 0);
  }
}

TEST_CASE("--print-size-only prints the exact size and writes nothing") {
  ScratchDir dir;
  for (const std::string flags :
       {"--n-expert 8 --n-expert-used 2 --type Q4_0 --tied-output", "--type BF16 --tensor-type ffn=F32 --n-layer 1"}) {
    CAPTURE(flags);
    const Run size = make_model(flags + " --print-size-only --out " + dir.file("never"));
    REQUIRE(size.exit_code == 0);
    CHECK(!std::filesystem::exists(dir.file("never")));
    REQUIRE(make_model(flags + " --out " + dir.file("m")).exit_code == 0);
    CHECK(std::stoull(size.output) == std::filesystem::file_size(dir.file("m")));
  }
}

TEST_CASE("weights are zero-mean after quantization and scaled by fan-in") {
  ScratchDir dir;
  for (const char* type : {"Q4_0", "Q8_0", "BF16", "MXFP4"}) {
    CAPTURE(type);
    const auto f = make_and_open(dir, std::string(type) + ".gguf",
                                 std::string("--n-embd 256 --n-ff 256 --n-layer 2 --n-expert 4 --n-expert-used 2 "
                                             "--type ") +
                                     type);
    for (const auto& t : f->tensors()) {
      CAPTURE(t.name);
      const Stats s = stats(dequantize(*f, t));
      if (t.dims.size() == 1) {  // norms: 1 + small noise
        CHECK(s.mean == doctest::Approx(1.0).epsilon(0.02));
        CHECK(s.std > 0.01);
        CHECK(s.std < 0.1);
        continue;
      }
      // The mean is far below what a quantization bias would give (Q4_0's -0.5
      // quanta is ~0.1 std) and within a few standard errors of zero.
      CHECK(std::abs(s.mean) < 0.01 * s.std);
      const double fan_in = static_cast<double>(t.dims[0]);
      if (t.name.find("attn_q") != std::string::npos || t.name.find("ffn_up") != std::string::npos ||
          t.name.find("ffn_gate") != std::string::npos)
        CHECK(s.std == doctest::Approx(1.0 / std::sqrt(fan_in)).epsilon(0.05));
      if (t.name == "token_embd.weight") CHECK(s.std == doctest::Approx(1.0).epsilon(0.05));
      // Projections into the residual stream are smaller still (1/sqrt(2 n_layer)).
      if (t.name.find("down") != std::string::npos || t.name.find("attn_output") != std::string::npos)
        CHECK(s.std == doctest::Approx(0.5 / std::sqrt(fan_in)).epsilon(0.05));
    }
  }
}

TEST_CASE("--random-expert-codes: MXFP4 experts as random codes, zero-mean, near the normal rows' deviation") {
  ScratchDir dir;
  const std::string flags =
      "--n-embd 256 --n-ff 128 --n-layer 2 --n-expert 8 --n-expert-used 2 --type Q8_0 "
      "--tensor-type _exps=MXFP4 --seed 5";
  const auto normal = make_and_open(dir, "normal.gguf", flags);
  const auto codes = make_and_open(dir, "codes.gguf", flags + " --random-expert-codes --threads 1");
  const auto again = make_and_open(dir, "again.gguf", flags + " --random-expert-codes --threads 2");
  CHECK(read_bytes(dir.file("codes.gguf")) == read_bytes(dir.file("again.gguf")));
  REQUIRE(normal->tensors().size() == codes->tensors().size());
  int expert_tensors = 0;
  for (size_t i = 0; i < codes->tensors().size(); ++i) {
    const TensorInfo& t = codes->tensors()[i];
    const TensorInfo& n = normal->tensors()[i];
    CAPTURE(t.name);
    const bool differ = std::memcmp(codes->tensor_data(t), normal->tensor_data(n), t.nbytes) != 0;
    if (t.name.find("_exps") == std::string::npos) {
      CHECK(!differ);  // only the routed experts change
      continue;
    }
    ++expert_tensors;
    CHECK(differ);
    const Stats c = stats(dequantize(*codes, t)), q = stats(dequantize(*normal, n));
    CHECK(std::abs(c.mean) < 0.01 * c.std);
    // One exponent per tensor, a power of two from the target at most: within sqrt(2).
    CHECK(c.std > q.std / 1.45);
    CHECK(c.std < q.std * 1.45);
  }
  CHECK(expert_tensors == 6);  // gate, up, down in each of the 2 layers
}

TEST_CASE("random tokens spread over the experts") {
  // Layer 0's router applied to normalized embeddings of 64 tokens: a bias
  // common to all tokens would send them to the same few experts.
  ScratchDir dir;
  const auto f =
      make_and_open(dir, "route.gguf", "--n-expert 16 --n-expert-used 2 --n-ff 32 --n-layer 1 --type Q4_0 --seed 3");
  const TensorInfo& emb = *f->find_tensor("token_embd.weight");
  const auto embedding = dequantize(*f, emb);
  const auto norm = dequantize(*f, *f->find_tensor("blk.0.ffn_norm.weight"));
  const auto router = dequantize(*f, *f->find_tensor("blk.0.ffn_gate_inp.weight"));
  const size_t n_embd = emb.dims[0], n_vocab = emb.dims[1], n_expert = 16;
  std::vector<int> load(n_expert, 0);
  for (size_t k = 0; k < 64; ++k) {
    const float* e = &embedding[(k * 7 + 3) % n_vocab * n_embd];
    double ss = 0;
    for (size_t j = 0; j < n_embd; ++j) ss += e[j] * e[j];
    const double inv_rms = 1.0 / std::sqrt(ss / static_cast<double>(n_embd) + 1e-5);
    std::vector<std::pair<double, size_t>> logits;
    for (size_t x = 0; x < n_expert; ++x) {
      double l = 0;
      for (size_t j = 0; j < n_embd; ++j) l += router[x * n_embd + j] * e[j] * inv_rms * norm[j];
      logits.push_back({l, x});
    }
    std::partial_sort(logits.begin(), logits.begin() + 2, logits.end(), std::greater<>());
    ++load[logits[0].second];
    ++load[logits[1].second];
  }
  const auto distinct = std::count_if(load.begin(), load.end(), [](int c) { return c > 0; });
  const int busiest = *std::max_element(load.begin(), load.end());
  MESSAGE("experts used: " << distinct << " of 16, busiest takes " << busiest << " of 128 picks");
  CHECK(distinct >= 14);
  CHECK(busiest <= 24);  // an even spread gives 8 each
}

TEST_CASE("--vocab copies every tokenizer key of a vocabulary file") {
  const std::string vocab = std::string(NS_SHARED_DIR) + "/vocab/ggml-vocab-llama-spm.gguf";
  if (!std::filesystem::exists(vocab)) {
    MESSAGE("skipped: " << vocab << " is absent");
    return;
  }
  ScratchDir dir;
  const auto f = make_and_open(dir, "spm.gguf", "--vocab " + vocab);
  const auto src = GgufFile::open(vocab);
  size_t copied = 0;
  for (const auto& [key, value] : src->metadata()) {
    if (key.rfind("tokenizer.", 0) != 0) continue;
    CAPTURE(key);
    const Value* got = f->find(key);
    REQUIRE(got);
    CHECK(got->type == value.type);
    CHECK(got->elem_type == value.elem_type);
    CHECK(got->arr.size() == value.arr.size());
    CHECK(got->u == value.u);
    CHECK(got->s == value.s);
    for (size_t k = 0; k < value.arr.size(); ++k) {
      if (value.arr[k].s != got->arr[k].s || value.arr[k].f != got->arr[k].f || value.arr[k].i != got->arr[k].i) {
        FAIL("element " << k << " differs");
        break;
      }
    }
    ++copied;
  }
  CHECK(copied == 10);
  size_t in_output = 0;
  for (const auto& [key, value] : f->metadata()) in_output += key.rfind("tokenizer.", 0) == 0;
  CHECK(in_output == copied);
  CHECK(f->get_u64("llama.vocab_size") == 32000);
  CHECK(f->find_tensor("token_embd.weight")->dims == std::vector<uint64_t>{128, 32000});
}

TEST_CASE("impossible requests fail with the exit code and a message naming the fix") {
  ScratchDir dir;
  const std::string out = " --out " + dir.file("x.gguf");
  struct Case {
    std::string flags;
    int exit_code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"--n-embd 100 --n-head 3", 4, "--n-head"},
      {"--n-head 4 --n-head-kv 3", 4, "--n-head-kv"},
      {"--n-expert 8", 4, "--n-expert-used"},
      {"--type IQ3_S", 4, "Q4_0"},
      {"--n-embd 256 --n-ff 512 --type IQ2_XXS", 4, "--imatrix"},
      {"--n-embd 256 --n-ff 512 --type Q4_K --imatrix " NS_SOURCE_DIR
       "/tests/conformance/imatrix/tiny-ds2-k2.imatrix.gguf",
       4, "--imatrix-include"},
      {"--n-ff 100", 4, "block of 32"},
      {"--tensor-type token_embd", 4, "PATTERN=TYPE"},
      {"--arch nonesuch", 4, "llama"},
      {"--vocab /nonexistent.gguf", 2, "nonexistent"},
      {"--vocab-pre \"\"", 4, "--vocab-pre"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.flags);
    const Run r = make_model(c.flags + out);
    CHECK(r.exit_code == c.exit_code);
    CHECK(r.output.find(c.message) != std::string::npos);
    CHECK(!std::filesystem::exists(dir.file("x.gguf")));
  }
  const Run no_out = make_model("--seed 1");
  CHECK(no_out.exit_code == 2);
  CHECK(no_out.output.find("--out") != std::string::npos);
}
