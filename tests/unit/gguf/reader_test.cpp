// GGUF reader: real files from ../shared, and hand-made corrupt images whose
// errors must name the key or tensor and the offset.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/gguf/gguf_file.h"
#include "common/error.h"

using namespace ns;
using namespace ns::gguf;

namespace {

// Builds GGUF images byte by byte (independent of the project's writer, so a
// bug shared by both cannot hide).
struct Image {
  std::vector<uint8_t> b;
  template <typename T>
  Image& raw(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof(T));
    return *this;
  }
  Image& str(const std::string& s) {
    raw<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Image& header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    raw<uint32_t>(0x46554747).raw(version).raw(n_tensors).raw(n_kv);
    return *this;
  }
  Image& pad_to(size_t align) {
    while (b.size() % align) b.push_back(0);
    return *this;
  }
};

std::string parse_error(const std::vector<uint8_t>& bytes) {
  try {
    GgufFile::parse(bytes, "test.gguf");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::bad_model);
    return e.what();
  }
  return "";
}

// A small valid file: two keys, one nested array, one F32 tensor [4, 2].
Image valid_image() {
  Image im;
  im.header(3, 1, 3);
  im.str("general.architecture").raw<uint32_t>(8).str("llama");
  im.str("general.alignment").raw<uint32_t>(4).raw<uint32_t>(32);
  im.str("nested").raw<uint32_t>(9).raw<uint32_t>(9).raw<uint64_t>(2);
  im.raw<uint32_t>(5).raw<uint64_t>(2).raw<int32_t>(-1).raw<int32_t>(7);  // [-1, 7]
  im.raw<uint32_t>(8).raw<uint64_t>(1).str("x");                          // ["x"]
  im.str("w").raw<uint32_t>(2).raw<uint64_t>(4).raw<uint64_t>(2).raw<uint32_t>(0).raw<uint64_t>(0);
  im.pad_to(32);
  for (int i = 0; i < 8; ++i) im.raw<float>(static_cast<float>(i));
  return im;
}

}  // namespace

TEST_CASE("a hand-made valid file parses, nested arrays included") {
  const Image im = valid_image();
  GgufFile f = GgufFile::parse(im.b);
  CHECK(f.version() == 3);
  CHECK(f.get_string("general.architecture") == "llama");
  CHECK(f.alignment() == 32);
  const Value* nested = f.find("nested");
  REQUIRE(nested);
  REQUIRE(nested->arr.size() == 2);
  CHECK(nested->arr[0].elem_type == ValueType::INT32);
  CHECK(nested->arr[0].arr[0].i == -1);
  CHECK(nested->arr[1].arr[0].s == "x");
  REQUIRE(f.tensors().size() == 1);
  const TensorInfo& t = f.tensors()[0];
  CHECK(t.name == "w");
  CHECK(t.nbytes == 32);
  CHECK(t.offset % 32 == 0);
  float v;
  std::memcpy(&v, f.tensor_data(t) + 4 * 7, 4);
  CHECK(v == 7.0f);
}

TEST_CASE("files with the low-bit i-quant and ternary weight types parse") {
  // One [512, 2] tensor per type: 2 rows of 2 super-blocks. Ids and block
  // bytes are ggml's (ggml.h's enum, ggml-common.h's block structs).
  struct Case {
    uint32_t id;
    GgmlType type;
    const char* name;
    uint64_t block_bytes;
  };
  const Case cases[] = {{16, GgmlType::IQ2_XXS, "IQ2_XXS", 66}, {17, GgmlType::IQ2_XS, "IQ2_XS", 74},
                        {18, GgmlType::IQ3_XXS, "IQ3_XXS", 98}, {19, GgmlType::IQ1_S, "IQ1_S", 50},
                        {21, GgmlType::IQ3_S, "IQ3_S", 110},    {22, GgmlType::IQ2_S, "IQ2_S", 82},
                        {23, GgmlType::IQ4_XS, "IQ4_XS", 136},  {29, GgmlType::IQ1_M, "IQ1_M", 56},
                        {34, GgmlType::TQ1_0, "TQ1_0", 54},     {35, GgmlType::TQ2_0, "TQ2_0", 66}};
  for (const Case& c : cases) {
    CAPTURE(c.name);
    Image im;
    im.header(3, 1, 0);
    im.str("w").raw<uint32_t>(2).raw<uint64_t>(512).raw<uint64_t>(2).raw<uint32_t>(c.id).raw<uint64_t>(0);
    im.pad_to(32);
    im.b.resize(im.b.size() + 4 * c.block_bytes, 0x5a);
    GgufFile f = GgufFile::parse(im.b);
    REQUIRE(f.tensors().size() == 1);
    CHECK(f.tensors()[0].type == c.type);
    CHECK(f.tensors()[0].nbytes == 4 * c.block_bytes);
    CHECK(type_name(c.type) == c.name);
    CHECK(traits(c.type).block_elems == 256);
  }
}

TEST_CASE("files with the ggml 2026 types Q1_0, Q2_0 and NVFP4 parse, and rows that split a block are refused") {
  // One [512, 2] tensor per type. Ids are ggml.h's (NVFP4 = 40, Q1_0 = 41,
  // Q2_0 = 42); blocks are ggml-common.h's: Q1_0 128 elements in fp16 d + 16
  // bytes of signs, Q2_0 64 in fp16 d + 16 bytes of 2-bit codes, NVFP4 64 in 4
  // UE4M3 scales + 32 bytes of nibbles.
  struct Case {
    uint32_t id;
    GgmlType type;
    const char* name;
    uint32_t block_elems;
    uint64_t block_bytes;
  };
  const Case cases[] = {{40, GgmlType::NVFP4, "NVFP4", 64, 36},
                        {41, GgmlType::Q1_0, "Q1_0", 128, 18},
                        {42, GgmlType::Q2_0, "Q2_0", 64, 18}};
  for (const Case& c : cases) {
    CAPTURE(c.name);
    const uint64_t blocks = 2 * 512 / c.block_elems;
    Image im;
    im.header(3, 1, 0);
    im.str("w").raw<uint32_t>(2).raw<uint64_t>(512).raw<uint64_t>(2).raw<uint32_t>(c.id).raw<uint64_t>(0);
    im.pad_to(32);
    im.b.resize(im.b.size() + blocks * c.block_bytes, 0x5a);
    GgufFile f = GgufFile::parse(im.b);
    REQUIRE(f.tensors().size() == 1);
    CHECK(f.tensors()[0].type == c.type);
    CHECK(f.tensors()[0].nbytes == blocks * c.block_bytes);
    CHECK(type_name(c.type) == c.name);
    CHECK(traits(c.type).block_elems == c.block_elems);

    // A row of 96 elements is not a whole number of these blocks.
    Image bad;
    bad.header(3, 1, 0);
    bad.str("w").raw<uint32_t>(2).raw<uint64_t>(96).raw<uint64_t>(2).raw<uint32_t>(c.id).raw<uint64_t>(0);
    bad.pad_to(32);
    bad.b.resize(bad.b.size() + 1024, 0x5a);
    CHECK_THROWS_WITH_AS(GgufFile::parse(bad.b), doctest::Contains("block size"), ns::Error);
  }
}

TEST_CASE("every truncation of a valid file is rejected with an offset") {
  const Image im = valid_image();
  for (size_t n = 0; n < im.b.size(); ++n) {
    std::vector<uint8_t> cut(im.b.begin(), im.b.begin() + n);
    const std::string err = parse_error(cut);
    CAPTURE(n);
    CHECK(err.find("offset") != std::string::npos);
  }
}

TEST_CASE("corrupt files name the problem") {
  SUBCASE("bad magic") { CHECK(parse_error({'G', 'G', 'M', 'L', 0, 0, 0, 0}).find("magic") != std::string::npos); }
  SUBCASE("unsupported version") {
    Image im;
    im.header(7, 0, 0);
    CHECK(parse_error(im.b).find("version 7") != std::string::npos);
  }
  SUBCASE("huge string length") {
    Image im;
    im.header(3, 0, 1).raw<uint64_t>(~0ull);
    CHECK(parse_error(im.b).find("metadata key #0") != std::string::npos);
  }
  SUBCASE("unknown value type names the key") {
    Image im;
    im.header(3, 0, 1).str("my.key").raw<uint32_t>(99);
    CHECK(parse_error(im.b).find("'my.key'") != std::string::npos);
  }
  SUBCASE("array count larger than the file") {
    Image im;
    im.header(3, 0, 1).str("arr").raw<uint32_t>(9).raw<uint32_t>(0).raw<uint64_t>(1ull << 40);
    CHECK(parse_error(im.b).find("'arr'") != std::string::npos);
  }
  SUBCASE("unknown tensor type names the tensor") {
    Image im;
    im.header(3, 1, 0).str("blk.0.w").raw<uint32_t>(1).raw<uint64_t>(32).raw<uint32_t>(77).raw<uint64_t>(0);
    const std::string err = parse_error(im.b);
    CHECK(err.find("'blk.0.w'") != std::string::npos);
    CHECK(err.find("type id 77") != std::string::npos);
  }
  SUBCASE("tensor past end of file") {
    Image im;
    im.header(3, 1, 0).str("big").raw<uint32_t>(1).raw<uint64_t>(1024).raw<uint32_t>(0).raw<uint64_t>(0);
    im.pad_to(32);
    const std::string err = parse_error(im.b);
    CHECK(err.find("'big'") != std::string::npos);
    CHECK(err.find("4096 bytes") != std::string::npos);
  }
  // A corrupt offset near 2^64 wraps offset + size (or data start + offset):
  // named as an overflow, never as a false "needs N bytes at offset <wrapped>".
  const auto wrapped = [](uint64_t elements, uint64_t offset) {
    Image im;
    im.header(3, 1, 0).str("wrap").raw<uint32_t>(1).raw<uint64_t>(elements).raw<uint32_t>(0).raw<uint64_t>(offset);
    im.pad_to(32);
    const std::string err = parse_error(im.b);
    CHECK(err.find("tensor 'wrap' data offset " + std::to_string(offset)) != std::string::npos);
    CHECK(err.find("overflows 64 bits") != std::string::npos);
    CHECK(err.find("needs") == std::string::npos);
  };
  SUBCASE("tensor offset whose end wraps past 2^64") { wrapped(1024, ~0ull - 4095); }
  SUBCASE("tensor offset that wraps the data section start") { wrapped(8, ~0ull - 31); }
  SUBCASE("row not a multiple of the block size") {
    Image im;
    im.header(3, 1, 0).str("q").raw<uint32_t>(1).raw<uint64_t>(33).raw<uint32_t>(8).raw<uint64_t>(0);
    CHECK(parse_error(im.b).find("block size 32") != std::string::npos);
  }
  SUBCASE("duplicate key") {
    Image im;
    im.header(3, 0, 2).str("k").raw<uint32_t>(4).raw<uint32_t>(1).str("k").raw<uint32_t>(4).raw<uint32_t>(2);
    CHECK(parse_error(im.b).find("duplicate metadata key 'k'") != std::string::npos);
  }
  SUBCASE("bad alignment") {
    Image im;
    im.header(3, 0, 1).str("general.alignment").raw<uint32_t>(4).raw<uint32_t>(3);
    CHECK(parse_error(im.b).find("power of two") != std::string::npos);
  }
}

TEST_CASE("typed getters explain type mismatches") {
  const Image im = valid_image();
  GgufFile f = GgufFile::parse(im.b, "m.gguf");
  CHECK_THROWS_WITH_AS(f.get_u64("general.architecture"), doctest::Contains("should be an integer"), Error);
  CHECK_THROWS_WITH_AS(f.get_string("missing.key"), doctest::Contains("'missing.key' is missing"), Error);
  CHECK(f.get_u64_or("missing.key", 5) == 5);
}

TEST_CASE("open() reports missing files clearly") {
  CHECK_THROWS_WITH_AS(GgufFile::open("/nonexistent/model.gguf"), doctest::Contains("/nonexistent/model.gguf"), Error);
}

TEST_CASE("the shared models and vocabularies parse") {
  const std::filesystem::path shared = NS_SHARED_DIR;
  if (!std::filesystem::exists(shared / "models")) {
    MESSAGE("skipped: " << shared << " is absent (the shared models live beside the repository)");
    return;
  }
  int n = 0;
  for (const char* dir : {"models", "vocab"}) {
    for (const auto& e : std::filesystem::directory_iterator(shared / dir)) {
      if (e.path().extension() != ".gguf") continue;
      auto f = GgufFile::open(e.path().string());
      CHECK(f->has("tokenizer.ggml.model"));
      for (const auto& t : f->tensors()) CHECK(t.offset + t.nbytes <= f->file_size());
      ++n;
    }
  }
  CHECK(n >= 5);
  auto f = GgufFile::open((shared / "models/tiny-mixtral-bpe-q4_0.gguf").string());
  CHECK(f->get_string("general.architecture") == "llama");
  CHECK(f->get_u64("llama.expert_count") == 8);
  const TensorInfo* t = f->find_tensor("blk.0.ffn_gate_exps.weight");
  REQUIRE(t);
  CHECK(t->shape_string() == "[128, 256, 8]");
  CHECK(t->type == GgmlType::Q4_0);
}
