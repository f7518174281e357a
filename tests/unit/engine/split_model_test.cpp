// Split models (gguf-split shards, engine/gguf/gguf_set.h): a generated model
// written as shards by gguf::write_split gives the unsplit file's tensors and
// logits, bit for bit, mapped (mmap), read with pread and through io_uring
// with a cache smaller than the experts; any shard's path opens the set; a
// missing shard, a shard of another split, a tensor in two shards and a wrong
// tensor count are refused naming the shard.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "common/error.h"
#include "engine/gguf/gguf_set.h"
#include "engine/gguf/gguf_split.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/model/model.h"
#include "engine/model_report.h"
#include "engine/stream/reader.h"
#include "tests/unit/engine/streaming_checks.h"
#include "tests/unit/engine/test_models.h"
#include "tests/unit/error_message.h"
#include "tests/unit/jobs/temp_dir.h"

namespace ns {
namespace {

namespace fs = std::filesystem;

// 4 MoE layers of 16 experts (4 used): a 3-slot cache evicts and re-reads.
std::string split_source_model() {
  return test::make_model("split-moe-q4",
                          "--arch llama --n-embd 128 --n-layer 4 --n-head 4 --n-head-kv 2 --n-ff 256 "
                          "--n-expert 16 --n-expert-used 4 --type Q4_0 --seed 11");
}

std::vector<std::string> split(const std::string& src, const test::TempDir& dir, const std::string& name,
                               size_t max_tensors, bool metadata_only_first = false) {
  return gguf::write_split(*gguf::GgufSet::open(src), dir.file(name), {max_tensors, metadata_only_first});
}

// `src` rewritten to `dst` with `kv` set (replacing) and `extra` tensors of other files appended.
void rewrite(const gguf::GgufFile& src, const std::string& dst,
             const std::vector<std::pair<std::string, gguf::Value>>& kv,
             const std::vector<std::pair<const gguf::GgufFile*, const gguf::TensorInfo*>>& extra = {}) {
  gguf::GgufWriter w;
  for (const auto& [k, v] : src.metadata()) w.set(k, v);
  for (const auto& [k, v] : kv) w.set(k, v);
  for (const auto& t : src.tensors()) w.add_tensor(t.name, t.dims, t.type);
  for (const auto& [f, t] : extra) w.add_tensor(t->name, t->dims, t->type);
  w.open(dst);
  for (const auto& t : src.tensors()) w.write_tensor(t.name, {src.tensor_data(t), t.nbytes});
  for (const auto& [f, t] : extra) w.write_tensor(t->name, {f->tensor_data(*t), t->nbytes});
  w.close();
}

// The same tensors, in the same order, with the same bytes; the same metadata but for split.*.
void check_same_model(const gguf::GgufSet& whole, const gguf::GgufSet& set) {
  REQUIRE(set.tensors().size() == whole.tensors().size());
  for (size_t i = 0; i < whole.tensors().size(); ++i) {
    const gguf::TensorInfo &a = whole.tensors()[i], &b = set.tensors()[i];
    CAPTURE(a.name);
    CHECK(b.name == a.name);
    CHECK(b.dims == a.dims);
    CHECK(b.type == a.type);
    REQUIRE(b.nbytes == a.nbytes);
    CHECK(std::memcmp(whole.tensor_data(a), set.tensor_data(b), a.nbytes) == 0);
    CHECK(set.find_tensor(a.name) == &b);
  }
  std::set<std::string> keys_a, keys_b;
  for (const auto& [k, v] : whole.metadata().metadata()) keys_a.insert(k);
  for (const auto& [k, v] : set.metadata().metadata())
    if (k.rfind("split.", 0) != 0) keys_b.insert(k);
  CHECK(keys_a == keys_b);
}

TEST_CASE("split model: any shard's path opens the whole set, the unsplit file's tensors and metadata") {
  const std::string src = split_source_model();
  const auto whole = gguf::GgufSet::open(src);
  CHECK(whole->n_shards() == 1);
  CHECK(!whole->split());
  for (bool metadata_only_first : {false, true}) {
    CAPTURE(metadata_only_first);
    test::TempDir dir;
    const auto shards = split(src, dir, "m", 7, metadata_only_first);
    REQUIRE(shards.size() >= 4);
    CHECK(fs::path(shards[0]).filename() == "m-00001-of-" + std::string(5 - std::to_string(shards.size()).size(), '0') +
                                                std::to_string(shards.size()) + ".gguf");
    for (const std::string& given : {shards.front(), shards[2], shards.back()}) {
      CAPTURE(given);
      const auto set = gguf::GgufSet::open(given);
      CHECK(set->split());
      CHECK(set->n_shards() == shards.size());
      CHECK(set->paths() == shards);
      CHECK(set->path() == shards.front());
      CHECK(set->shard(0).tensors().size() == (metadata_only_first ? 0u : 7u));
      uint64_t bytes = 0;
      for (const auto& p : shards) bytes += fs::file_size(p);
      CHECK(set->total_bytes() == bytes);
      check_same_model(*whole, *set);
      // Each tensor knows its shard: its offset is inside that file.
      for (const auto& t : set->tensors()) CHECK(t.offset + t.nbytes <= set->shard(t.file).file_size());
    }
  }
}

TEST_CASE("split model: the same logits as the unsplit file, mapped, with pread and io_uring through a small cache") {
  const std::string src = split_source_model();
  test::TempDir dir;
  // 5 tensors a shard: the layers' expert stacks are spread over several shards.
  const auto shards = split(src, dir, "moe", 5, true);
  const auto set = gguf::GgufSet::open(shards.front());
  std::set<uint32_t> expert_files;
  for (const auto& t : set->tensors())
    if (t.name.find("_exps.") != std::string::npos) expert_files.insert(t.file);
  REQUIRE(expert_files.size() >= 3);

  const auto base = test::streamed_logits(src, "mmap", 12);
  const auto mapped = test::streamed_logits(shards.front(), "mmap", 12);
  CHECK(mapped.first == base.first);
  std::vector<std::string> modes{"pread"};
  if (stream::probe_uring().available)
    modes.push_back("uring");
  else
    MESSAGE("io_uring unavailable here (" << stream::probe_uring().reason << "): the uring case is not run");
  for (const std::string& mode : modes) {
    CAPTURE(mode);
    // 3 slots for 64 (layer, expert) pairs: reads from every shard, evictions, re-reads.
    const auto r = test::streamed_logits(shards.back(), mode, 12, 3);
    CHECK(r.first == base.first);
    CHECK(r.second.bytes_read() > 0);
    CHECK(r.second.cache.evictions > 0);
  }
  // A cache that holds every expert reads them all at load (preload), from every shard.
  auto full = test::load_streamed(shards[1], "pread", 0);
  CHECK(full->streaming().streaming());
  CHECK(full->stream_stats().bytes_read() >= full->streaming().layout.total_bytes());
}

TEST_CASE("split model: shards on two devices get a reader of twice the queue depth, and the same logits") {
  const std::string src = split_source_model();
  test::TempDir dir;
  if (!fs::is_directory("/dev/shm")) {
    MESSAGE("skipped: no /dev/shm to put a shard on another device");
    return;
  }
  test::TempDir other("/dev/shm");
  struct stat a {
  }, b{};
  REQUIRE(::stat(dir.path().c_str(), &a) == 0);
  REQUIRE(::stat(other.path().c_str(), &b) == 0);
  if (a.st_dev == b.st_dev) {
    MESSAGE("skipped: " << dir.path() << " and /dev/shm are on one device");
    return;
  }
  const auto shards = split(src, dir, "moe", 6);
  const std::string moved = other.file("shard2.gguf");
  fs::copy_file(shards[1], moved);
  fs::remove(shards[1]);
  fs::create_symlink(moved, shards[1]);
  const auto set = gguf::GgufSet::open(shards.front());
  CHECK(set->n_devices() == 2);
  CHECK(set->shard(1).device() == static_cast<uint64_t>(b.st_dev));

  const auto base = test::streamed_logits(src, "mmap", 12);
  for (const char* mode : {"pread", "uring"}) {
    CAPTURE(mode);
    auto m = test::load_streamed(shards.front(), mode, 3);
    REQUIRE(m->streaming().reader != nullptr);
    CHECK(m->streaming().reader->options().queue_depth == 2u * EngineOptions{}.io_queue_depth);
    CHECK(test::streamed_logits(shards.front(), mode, 12, 3).first == base.first);
  }
}

TEST_CASE("split model: a missing shard, another split's shard, a tensor twice and a wrong count are refused") {
  const std::string src = split_source_model();
  test::TempDir dir;
  const auto shards = split(src, dir, "m", 8);
  REQUIRE(shards.size() >= 4);
  const std::string& third = shards[2];

  SUBCASE("a missing shard") {
    fs::remove(third);
    for (const std::string& given : {shards.front(), shards.back()}) {
      const std::string msg = test::expect_error(
          ErrorKind::bad_model, [&] { gguf::GgufSet::open(given); }, "a set without shard 3 opened");
      CHECK(test::contains(msg, third));
      CHECK(test::contains(msg, "shard 3 of " + std::to_string(shards.size())));
      CHECK(test::contains(msg, "missing"));
      CHECK(test::contains(msg, "download"));
    }
    // The model loaders say the same.
    const std::string msg = test::expect_error(
        ErrorKind::bad_model, [&] { Model::load(shards.front(), {.engine = {.threads = 1, .context = 16}}); },
        "loaded");
    CHECK(test::contains(msg, third));
  }
  SUBCASE("a shard of another split of the model, under this split's name") {
    const auto other = split(src, dir, "other", 5);
    REQUIRE(other.size() != shards.size());
    fs::copy_file(other[2], third, fs::copy_options::overwrite_existing);
    const std::string msg = test::expect_error(
        ErrorKind::bad_model, [&] { gguf::GgufSet::open(shards.front()); }, "a mixed set opened");
    CHECK(test::contains(msg, third));
    CHECK(test::contains(msg, "split.count " + std::to_string(other.size())));
    CHECK(test::contains(msg, "download the set again"));
  }
  SUBCASE("a shard whose split.no is not its name's") {
    const auto f = gguf::GgufFile::open(shards[1]);
    rewrite(*f, third + ".tmp", {});
    fs::rename(third + ".tmp", third);  // shard 2's bytes (split.no 1) named as shard 3
    const std::string msg = test::expect_error(
        ErrorKind::bad_model, [&] { gguf::GgufSet::open(shards.front()); }, "opened");
    CHECK(test::contains(msg, third));
    CHECK(test::contains(msg, "split.no 1"));
  }
  SUBCASE("a tensor in two shards") {
    const auto f3 = gguf::GgufFile::open(third);
    const auto f1 = gguf::GgufFile::open(shards[0]);
    const gguf::TensorInfo* dup = &f1->tensors().front();
    rewrite(*f3, third + ".tmp", {}, {{f1.get(), dup}});
    fs::rename(third + ".tmp", third);
    const std::string msg = test::expect_error(
        ErrorKind::bad_model, [&] { gguf::GgufSet::open(shards.back()); }, "a duplicate opened");
    CHECK(test::contains(msg, third));
    CHECK(test::contains(msg, shards[0]));
    CHECK(test::contains(msg, "'" + dup->name + "'"));
  }
  SUBCASE("split.tensors.count does not add up") {
    const auto f0 = gguf::GgufFile::open(shards[0]);
    const int64_t n = f0->get_i64_or(gguf::kSplitTensorsCount, 0);
    rewrite(*f0, shards[0] + ".tmp", {{gguf::kSplitTensorsCount, gguf::val::i32(static_cast<int32_t>(n + 1))}});
    fs::rename(shards[0] + ".tmp", shards[0]);
    const std::string msg = test::expect_error(
        ErrorKind::bad_model, [&] { gguf::GgufSet::open(third); }, "a wrong count opened");
    CHECK(test::contains(msg, shards[0]));
    CHECK(test::contains(msg, "split.tensors.count says " + std::to_string(n + 1)));
    CHECK(test::contains(msg, "hold " + std::to_string(n)));
  }
  SUBCASE("a shard renamed out of the naming") {
    const std::string renamed = dir.file("renamed.gguf");
    fs::rename(shards.front(), renamed);
    const std::string msg = test::expect_error(
        ErrorKind::bad_model, [&] { gguf::GgufSet::open(renamed); }, "a renamed shard opened");
    CHECK(test::contains(msg, renamed));
    CHECK(test::contains(msg, "naming"));
  }
}

TEST_CASE("split model: a set of one shard and the naming") {
  const auto n = gguf::parse_split_name("/m/Kimi-K2-Q2-00003-of-00013.gguf");
  REQUIRE(n.has_value());
  CHECK(n->prefix == "/m/Kimi-K2-Q2");
  CHECK(n->no == 2);
  CHECK(n->count == 13);
  CHECK(gguf::split_shard_path(n->prefix, 0, 13) == "/m/Kimi-K2-Q2-00001-of-00013.gguf");
  CHECK(!gguf::parse_split_name("/m/model.gguf"));
  CHECK(!gguf::parse_split_name("/m/model-00000-of-00013.gguf"));
  CHECK(!gguf::parse_split_name("/m/model-00014-of-00013.gguf"));
  CHECK(!gguf::parse_split_name("/m/00001-of-00002.gguf"));

  // All tensors fit one shard: a set of one, which is just the model.
  test::TempDir dir;
  const std::string src = test::dense_model();
  const auto one = split(src, dir, "one", 1000);
  REQUIRE(one.size() == 1);
  const auto set = gguf::GgufSet::open(one.front());
  CHECK(set->n_shards() == 1);
  check_same_model(*gguf::GgufSet::open(src), *set);

  // A file gguf-split --merge wrote keeps split.count 0: one file, whatever its name.
  const std::string merged = dir.file("merged-00001-of-00003.gguf");
  rewrite(*gguf::GgufFile::open(src), merged, {{gguf::kSplitCount, gguf::val::u16(0)}});
  const auto m = gguf::GgufSet::open(merged);
  CHECK(m->n_shards() == 1);
  CHECK(!m->split());
  CHECK(m->tensors().size() == set->tensors().size());
}

TEST_CASE("split model: model info lists the shards, their bytes and devices; run and logits take any shard") {
  const std::string src = split_source_model();
  test::TempDir dir;
  const auto shards = split(src, dir, "moe", 6);
  // A shard reached through a symlink: its device is the target's.
  const std::string target = dir.file("elsewhere.bin");
  fs::rename(shards[1], target);
  fs::create_symlink(target, shards[1]);

  const ModelReport whole = describe_model(src, {});
  const ModelReport r = describe_model(shards.back(), {});
  REQUIRE(r.shards.size() == shards.size());
  uint64_t sum = 0;
  for (size_t i = 0; i < shards.size(); ++i) {
    CAPTURE(shards[i]);
    struct stat st {};
    REQUIRE(::stat(shards[i].c_str(), &st) == 0);
    CHECK(r.shards[i].path == shards[i]);
    CHECK(r.shards[i].bytes == static_cast<uint64_t>(st.st_size));
    CHECK(r.shards[i].device_major == major(st.st_dev));
    CHECK(r.shards[i].device_minor == minor(st.st_dev));
    sum += r.shards[i].bytes;
  }
  CHECK(r.shards[1].resolved_path == fs::canonical(target).string());
  CHECK(r.file_bytes == sum);
  CHECK(whole.shards.size() == 1);
  CHECK(r.parameters == whole.parameters);
  CHECK(r.tensors == whole.tensors);
  CHECK(r.bytes_per_expert == whole.bytes_per_expert);

  // The CLI in a fresh process: model info's shard list, and the same logits from any shard.
  const nlohmann::json info = test::run_cli_json("model info --json " + shards[2]);
  if (info.is_null()) {
    MESSAGE("skipped the CLI part: build the nightshift target first");
    return;
  }
  REQUIRE(info.at("shards").size() == shards.size());
  CHECK(info.at("shards")[1].at("resolved_path").get<std::string>() == fs::canonical(target).string());
  CHECK(!test::run_cli_json("model info --json " + src).contains("shards"));
  // Every field but "model" (the file's name).
  const auto logits = [](const std::string& model, const std::string& mode) {
    nlohmann::json o = test::run_cli_json("logits -m " + model + " --io-mode " + mode +
                                          " --json --greedy 4 --threads 2 -c 64 -p 'The quick brown fox'");
    o.erase("model");
    return o;
  };
  const nlohmann::json base = logits(src, "mmap");
  CHECK(base.at("greedy").size() == 4);
  for (const char* mode : {"mmap", "pread", "uring"}) {
    CAPTURE(mode);
    CHECK(logits(shards[2], mode) == base);
  }
}

}  // namespace
}  // namespace ns
