// GGUF writer: files read back through the reader (every value type, nested
// arrays, aligned offsets, exact data bytes), the layout known before writing,
// misuse and I/O errors.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "engine/gguf/gguf_file.h"
#include "engine/gguf/gguf_writer.h"
#include "common/error.h"
#include "writer_test_util.h"

using namespace ns;
using namespace ns::gguf;
using writer_test::read_bytes;
using writer_test::ScratchDir;

namespace {

// Equal type and payload, recursively (the field that carries each type).
void check_same(const Value& a, const Value& b, const std::string& where) {
  CAPTURE(where);
  REQUIRE(a.type == b.type);
  switch (a.type) {
    case ValueType::UINT8:
    case ValueType::UINT16:
    case ValueType::UINT32:
    case ValueType::UINT64:
    case ValueType::BOOL: CHECK(a.u == b.u); break;
    case ValueType::INT8:
    case ValueType::INT16:
    case ValueType::INT32:
    case ValueType::INT64: CHECK(a.i == b.i); break;
    case ValueType::FLOAT32:
    case ValueType::FLOAT64: CHECK(a.f == b.f); break;
    case ValueType::STRING: CHECK(a.s == b.s); break;
    case ValueType::ARRAY:
      CHECK(a.elem_type == b.elem_type);
      REQUIRE(a.arr.size() == b.arr.size());
      for (size_t k = 0; k < a.arr.size(); ++k) check_same(a.arr[k], b.arr[k], where + "[" + std::to_string(k) + "]");
      break;
  }
}

// One value of every type, the extremes included, and arrays nested three deep.
std::vector<std::pair<std::string, Value>> every_value() {
  using namespace val;
  std::vector<std::pair<std::string, Value>> kv = {
      {"t.u8", u8(255)},
      {"t.i8", i8(-128)},
      {"t.u16", u16(65535)},
      {"t.i16", i16(-32768)},
      {"t.u32", u32(4294967295u)},
      {"t.i32", i32(std::numeric_limits<int32_t>::min())},
      {"t.u64", u64(std::numeric_limits<uint64_t>::max())},
      {"t.i64", i64(std::numeric_limits<int64_t>::min())},
      {"t.f32", f32(-1.5e-7f)},
      {"t.f64", f64(3.141592653589793)},
      {"t.bool.true", boolean(true)},
      {"t.bool.false", boolean(false)},
      {"t.str", str("h\xC3\xA9llo \xE2\x96\x81world")},  // UTF-8 is stored as bytes
      {"t.str.empty", str("")},
      {"t.arr.u8", array(ValueType::UINT8, {u8(0), u8(7), u8(255)})},
      {"t.arr.i16", array(ValueType::INT16, {i16(-2), i16(300)})},
      {"t.arr.u64", array(ValueType::UINT64, {u64(1ull << 40)})},
      {"t.arr.i64", array(ValueType::INT64, {i64(-5)})},
      {"t.arr.f64", array(ValueType::FLOAT64, {f64(0.25), f64(-1e300)})},
      {"t.arr.bool", array(ValueType::BOOL, {boolean(true), boolean(false)})},
      {"t.arr.f32", f32_array({1.0f, -0.5f, 1e30f})},
      {"t.arr.i32", i32_array({-1, 0, 2147483647})},
      {"t.arr.str", string_array({"a", "", "Ġthe"})},
      {"t.arr.empty", array(ValueType::UINT32, {})},
      {"t.arr.nested", array(ValueType::ARRAY,
                             {i32_array({-1, 7}), string_array({"x"}), array(ValueType::ARRAY, {f32_array({2.0f})})})},
  };
  return kv;
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> b(n);
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  return b;
}

struct TensorSpec {
  std::string name;
  std::vector<uint64_t> dims;
  GgmlType type;
  uint64_t nbytes;
};

// Tensors whose sizes are not multiples of 32 bytes, so padding is exercised.
const std::vector<TensorSpec> kTensors = {
    {"a.f32", {5, 3}, GgmlType::F32, 60},
    {"b.q8_0", {64, 3}, GgmlType::Q8_0, 2 * 34 * 3},
    {"c.f16", {7}, GgmlType::F16, 14},
    {"d.q4_0", {32, 2, 2}, GgmlType::Q4_0, 18 * 4},
    {"e.bf16", {3, 1, 1, 2}, GgmlType::BF16, 12},
};

}  // namespace

TEST_CASE("every metadata type and tensor round-trips through the reader") {
  for (uint32_t alignment : {0u, 1u, 64u}) {  // 0: leave general.alignment unset (default 32)
    CAPTURE(alignment);
    ScratchDir dir;
    const std::string path = dir.file("all.gguf");
    const auto kv = every_value();
    std::vector<std::vector<uint8_t>> data;

    GgufWriter w;
    w.set("general.architecture", val::str("test"));
    if (alignment) w.set("general.alignment", val::u32(alignment));
    for (const auto& [k, v] : kv) w.set(k, v);
    for (size_t i = 0; i < kTensors.size(); ++i) {
      const auto& t = kTensors[i];
      CHECK(w.add_tensor(t.name, t.dims, t.type) == i);
      data.push_back(random_bytes(t.nbytes, static_cast<uint32_t>(i)));
    }
    const uint64_t planned = w.file_size();
    const uint64_t planned_data_offset = w.data_offset();
    w.open(path);
    for (size_t i = 0; i < kTensors.size(); ++i) {
      REQUIRE(w.current_tensor() == i);
      w.write_tensor(kTensors[i].name, data[i]);
    }
    CHECK(!w.current_tensor());
    w.close();

    CHECK(std::filesystem::file_size(path) == planned);
    const auto f = GgufFile::open(path);
    const uint64_t align = alignment ? alignment : 32;
    CHECK(f->version() == 3);
    CHECK(f->alignment() == align);
    CHECK(f->data_offset() == planned_data_offset);
    CHECK(f->file_size() == planned);
    CHECK(f->metadata().size() == kv.size() + 1 + (alignment ? 1 : 0));
    for (const auto& [k, v] : kv) {
      const Value* got = f->find(k);
      REQUIRE_MESSAGE(got, k);
      check_same(v, *got, k);
    }
    REQUIRE(f->tensors().size() == kTensors.size());
    for (size_t i = 0; i < kTensors.size(); ++i) {
      const TensorInfo& t = f->tensors()[i];
      CAPTURE(t.name);
      CHECK(t.name == kTensors[i].name);
      CHECK(t.dims == kTensors[i].dims);
      CHECK(t.type == kTensors[i].type);
      CHECK(t.nbytes == kTensors[i].nbytes);
      CHECK(t.offset % align == 0);
      CHECK(t.offset == w.tensor(i).offset);
      CHECK(std::memcmp(f->tensor_data(t), data[i].data(), t.nbytes) == 0);
    }
  }
}

TEST_CASE("the file starts with the serialized header and pads with zeros") {
  ScratchDir dir;
  const std::string path = dir.file("pad.gguf");
  GgufWriter w;
  w.set("k", val::str("v"));
  w.add_tensor("x", {3}, GgmlType::F32);  // 12 bytes + 20 of padding
  w.add_tensor("y", {1}, GgmlType::F32);
  const std::vector<uint8_t> header = w.serialize_header();
  CHECK(header.size() == w.header_bytes());
  w.open(path);
  const std::vector<uint8_t> x = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, y = {13, 14, 15, 16};
  w.write_data(x);
  w.write_data(y);
  w.close();
  const auto bytes = read_bytes(path);
  REQUIRE(bytes.size() == w.data_offset() + 64);
  CHECK(std::equal(header.begin(), header.end(), bytes.begin()));
  for (uint64_t k = header.size(); k < w.data_offset(); ++k) CHECK(bytes[k] == 0);
  const uint64_t d = w.data_offset();
  CHECK(std::equal(x.begin(), x.end(), bytes.begin() + static_cast<long>(d)));
  for (uint64_t k = d + 12; k < d + 32; ++k) CHECK(bytes[k] == 0);
  CHECK(std::equal(y.begin(), y.end(), bytes.begin() + static_cast<long>(d + 32)));
  for (uint64_t k = d + 36; k < d + 64; ++k) CHECK(bytes[k] == 0);
}

TEST_CASE("chunked writes give the same file as whole-tensor writes") {
  ScratchDir dir;
  auto declare = [](GgufWriter& w) {
    w.set("general.alignment", val::u32(32));
    for (const auto& t : kTensors) w.add_tensor(t.name, t.dims, t.type);
  };
  std::vector<uint8_t> all;
  for (size_t i = 0; i < kTensors.size(); ++i) {
    const auto b = random_bytes(kTensors[i].nbytes, 100 + static_cast<uint32_t>(i));
    all.insert(all.end(), b.begin(), b.end());
  }
  {
    GgufWriter w;
    declare(w);
    w.open(dir.file("whole.gguf"));
    size_t at = 0;
    for (const auto& t : kTensors) {
      w.write_tensor(t.name, std::span(all).subspan(at, t.nbytes));
      at += t.nbytes;
    }
    w.close();
  }
  {
    // A small buffer and odd chunks that straddle tensor boundaries.
    GgufWriter w(4096);
    declare(w);
    w.open(dir.file("chunks.gguf"));
    for (size_t at = 0; at < all.size(); at += 7)
      w.write_data(std::span(all).subspan(at, std::min<size_t>(7, all.size() - at)));
    w.close();
  }
  CHECK(read_bytes(dir.file("whole.gguf")) == read_bytes(dir.file("chunks.gguf")));
}

TEST_CASE("a tensor larger than the write buffer streams through") {
  ScratchDir dir;
  const std::string path = dir.file("big.gguf");
  GgufWriter w(4096);
  w.add_tensor("big", {4096, 64}, GgmlType::F32);  // 1 MiB, 256 buffers
  w.open(path);
  std::vector<uint8_t> row(4096 * 4);
  for (uint32_t r = 0; r < 64; ++r) {
    for (size_t k = 0; k < row.size(); ++k) row[k] = static_cast<uint8_t>(k * 31 + r);
    w.write_data(row);
  }
  w.close();
  const auto f = GgufFile::open(path);
  const TensorInfo& t = f->tensors().at(0);
  const uint8_t* p = f->tensor_data(t);
  CHECK(p[0] == 0);
  CHECK(p[63 * row.size() + 5] == static_cast<uint8_t>(5 * 31 + 63));
}

TEST_CASE("general.alignment set after the tensors re-lays them out") {
  ScratchDir dir;
  const std::string path = dir.file("align.gguf");
  GgufWriter w;
  w.add_tensor("a", {3}, GgmlType::F32);
  w.add_tensor("b", {3}, GgmlType::F32);
  CHECK(w.tensor(1).offset - w.tensor(0).offset == 32);
  w.set("general.alignment", val::u32(256));
  CHECK(w.tensor(1).offset - w.tensor(0).offset == 256);
  CHECK(w.data_offset() % 256 == 0);
  CHECK(w.file_size() == w.data_offset() + 512);
  w.open(path);
  w.write_data(std::vector<uint8_t>(24, 0xAB));
  w.close();
  const auto f = GgufFile::open(path);
  CHECK(f->alignment() == 256);
  CHECK(f->tensors().at(1).offset == w.tensor(1).offset);
  CHECK(f->tensor_data(f->tensors().at(1))[11] == 0xAB);
  CHECK(f->file_size() == w.file_size());
}

TEST_CASE("setting a key again replaces its value in place") {
  GgufWriter w;
  w.set("a", val::u32(1));
  w.set("b", val::u32(2));
  w.set("a", val::str("again"));
  CHECK(w.n_metadata() == 2);
  REQUIRE(w.find("a"));
  CHECK(w.find("a")->s == "again");
  // Key order is the insertion order: "a" still comes first.
  GgufWriter expected;
  expected.set("a", val::str("again"));
  expected.set("b", val::u32(2));
  CHECK(w.serialize_header() == expected.serialize_header());
}

TEST_CASE("bad declarations are rejected with the name and the reason") {
  GgufWriter w;
  auto error_of = [](auto&& fn) -> std::string {
    try {
      fn();
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::invalid_input);
      return e.what();
    }
    FAIL("no error");
    return "";
  };
  CHECK(error_of([&] { w.add_tensor("q", {33, 2}, GgmlType::Q8_0); }).find("block of 32") != std::string::npos);
  CHECK(error_of([&] { w.add_tensor("z", {0}, GgmlType::F32); }).find("'z'") != std::string::npos);
  CHECK(error_of([&] {
          w.add_tensor("five", {1, 1, 1, 1, 1}, GgmlType::F32);
        }).find("dimensions") != std::string::npos);
  CHECK(error_of([&] { w.add_tensor(std::string(64, 'n'), {1}, GgmlType::F32); }).find("63") != std::string::npos);
  CHECK(error_of([&] { w.add_tensor("t", {1}, static_cast<GgmlType>(99)); }).find("99") != std::string::npos);
  w.add_tensor("dup", {1}, GgmlType::F32);
  CHECK(error_of([&] { w.add_tensor("dup", {1}, GgmlType::F32); }).find("twice") != std::string::npos);
  CHECK(error_of([&] { w.set("general.alignment", val::u32(48)); }).find("power of two") != std::string::npos);
  CHECK(error_of([&] { w.set("general.alignment", val::u64(32)); }).find("UINT32") != std::string::npos);
  Value big = val::u8(0);
  big.u = 256;
  CHECK(error_of([&] { w.set("k.u8", big); }).find("'k.u8'") != std::string::npos);
  CHECK(error_of([&] {
          w.set("k.arr", val::array(ValueType::INT32, {val::i32(1), val::str("x")}));
        }).find("element 1") != std::string::npos);
  CHECK(error_of([&] {
          w.set("k.nested", val::array(ValueType::ARRAY, {val::array(ValueType::INT8, {val::i8(1), val::u8(2)})}));
        }).find("'k.nested[0]'") != std::string::npos);
  CHECK(w.n_metadata() == 0);  // nothing half-set
}

TEST_CASE("wrong byte counts and out-of-order writes are rejected") {
  ScratchDir dir;
  GgufWriter w;
  w.add_tensor("first", {4}, GgmlType::F32);
  w.add_tensor("second", {2}, GgmlType::F32);
  w.open(dir.file("w.gguf"));
  const std::vector<uint8_t> eight(8), sixteen(16), twenty(20);
  CHECK_THROWS_WITH_AS(w.write_tensor("second", eight), doctest::Contains("'first'"), Error);
  CHECK_THROWS_WITH_AS(w.write_tensor("first", eight), doctest::Contains("holds 16 bytes, got 8"), Error);
  CHECK_THROWS_AS(w.set("late", val::u8(1)), Error);
  CHECK_THROWS_AS(w.add_tensor("late", {1}, GgmlType::F32), Error);
  w.write_tensor("first", sixteen);
  CHECK_THROWS_WITH_AS(w.write_data(sixteen), doctest::Contains("too many"), Error);
}

TEST_CASE("an incomplete file is reported by close() and removed") {
  ScratchDir dir;
  const std::string path = dir.file("incomplete.gguf");
  {
    GgufWriter w;
    w.add_tensor("a", {8}, GgmlType::F32);
    w.add_tensor("b", {8}, GgmlType::F32);
    w.open(path);
    w.write_data(std::vector<uint8_t>(10));
    CHECK_THROWS_WITH_AS(w.close(), doctest::Contains("tensor 'a' has 10 of 32 bytes"), Error);
    CHECK(std::filesystem::exists(path));
  }
  CHECK(!std::filesystem::exists(path));  // the destructor removed it
}

TEST_CASE("I/O failures throw Error(io) naming the path") {
  SUBCASE("missing directory") {
    GgufWriter w;
    try {
      w.open("/nonexistent-dir/x.gguf");
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::io);
      CHECK(std::string(e.what()).find("/nonexistent-dir/x.gguf") != std::string::npos);
    }
  }
  struct stat st {};
  if (::stat("/dev/full", &st) != 0 || !S_ISCHR(st.st_mode)) {
    MESSAGE("/dev/full is absent: ENOSPC cases skipped");
    return;
  }
  SUBCASE("ENOSPC while streaming a tensor") {
    GgufWriter w(4096);
    w.add_tensor("big", {4096}, GgmlType::F32);
    w.open("/dev/full");
    try {
      w.write_data(std::vector<uint8_t>(4096 * 4));
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::io);
      CHECK(std::string(e.what()).find("/dev/full") != std::string::npos);
      CHECK(std::string(e.what()).find(std::strerror(ENOSPC)) != std::string::npos);
    }
    CHECK_THROWS_AS(w.write_data(std::vector<uint8_t>(4)), Error);  // the writer is closed after a failure
  }
  SUBCASE("ENOSPC at the final flush") {
    GgufWriter w;
    w.add_tensor("small", {4}, GgmlType::F32);
    w.open("/dev/full");
    w.write_data(std::vector<uint8_t>(16));
    CHECK_THROWS_WITH_AS(w.close(), doctest::Contains("/dev/full"), Error);
  }
}
