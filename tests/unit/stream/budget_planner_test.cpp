// The memory plan's arithmetic and its error, on tensor lists shaped like a model.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "engine/stream/budget_planner.h"
#include "engine/stream/direct_io.h"
#include "common/human_size.h"
#include "engine/gguf/gguf_file.h"
#include "engine/gguf/gguf_writer.h"
#include "common/error.h"
#include "tests/unit/error_message.h"
#include "stream_test_util.h"

using namespace ns::stream;
using ns::format_size;
using ns::parse_size;
using ns::gguf::GgmlType;
using ns::gguf::TensorInfo;

namespace {

// A model: n_layer MoE layers with n_expert experts of (gate, up, down) bytes
// each, plus resident tensors; offsets laid out back to back from data_offset.
// `routed`: the stacks (the table's routed role), `resident`: the rest.
struct Model {
  std::vector<TensorInfo> resident, routed;
  uint64_t at = 4096 * 3 + 32;  // an unaligned data start
  void add(const std::string& name, std::vector<uint64_t> dims, uint64_t nbytes, bool is_routed = false) {
    TensorInfo t;
    t.name = name;
    t.dims = std::move(dims);
    t.type = GgmlType::Q8_0;
    t.offset = at;
    t.nbytes = nbytes;
    at += (nbytes + 31) / 32 * 32;
    (is_routed ? routed : resident).push_back(t);
  }
};

Model moe_model(uint32_t n_layer, uint32_t n_expert, uint64_t proj_bytes) {
  Model m;
  m.add("token_embd.weight", {64, 1000}, 1u << 20);
  for (uint32_t l = 0; l < n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    m.add(p + "attn_q.weight", {64, 64}, 8192);
    m.add(p + "ffn_gate_inp.weight", {64, n_expert}, 4096);
    m.add(p + "ffn_gate_exps.weight", {64, 10, n_expert}, proj_bytes * n_expert, true);
    m.add(p + "ffn_up_exps.weight", {64, 10, n_expert}, proj_bytes * n_expert, true);
    m.add(p + "ffn_down_exps.weight", {64, 10, n_expert}, proj_bytes * n_expert, true);
    m.add(p + "ffn_gate_shexp.weight", {64, 10}, 5000);  // shared expert: resident
  }
  m.add("output.weight", {64, 1000}, 1u << 20);
  return m;
}

uint64_t page_span(const TensorInfo& t) { return direct_read_span(t.offset, t.nbytes); }

}  // namespace

TEST_CASE("the plan counts resident pages, streamed stacks, and fills the cache with what is left") {
  const Model m = moe_model(4, 16, 100000);
  const ExpertLayout layout = ExpertLayout::from_tensors(m.routed, "m.gguf");
  uint64_t resident = 0, streamed = 0;
  for (const TensorInfo& t : m.routed) streamed += t.nbytes;
  for (const TensorInfo& t : m.resident) resident += page_span(t);
  BudgetInputs in;
  in.kv_cache_bytes = 3u << 20;
  in.activation_bytes = 1u << 20;
  in.io_buffer_bytes = 0;
  in.overhead_bytes = 20u << 20;
  const uint64_t fixed = resident + in.kv_cache_bytes + in.activation_bytes + in.overhead_bytes;
  const uint64_t slot = layout.slot_bytes();
  CHECK(slot == 3 * direct_read_capacity(100000));

  in.memory_budget = fixed + 10 * slot + 123;  // room for exactly 10 experts
  const BudgetPlan p = plan_budget(m.resident, layout, in, "m.gguf");
  CHECK(p.resident_bytes == resident);
  CHECK(p.resident_tensors == 1 + 4 * 3 + 1);
  CHECK(p.streamed_bytes == streamed);
  CHECK(p.streamed_tensors == 12);
  CHECK(p.streamed_experts == 64);
  CHECK(p.fixed_bytes() == fixed);
  CHECK(p.cache_experts == 10);
  CHECK(p.cache_bytes == 10 * slot);
  CHECK(p.planned_bytes() <= in.memory_budget);
  CHECK(!p.all_experts_fit());
  CHECK(p.minimum_budget == fixed + 2 * slot);

  const std::string d = p.describe();
  CHECK(d.find("resident weights") != std::string::npos);
  CHECK(d.find("10 of 64 experts") != std::string::npos);
  CHECK(d.find(format_size(in.memory_budget)) != std::string::npos);

  // A budget larger than the model: the cache holds every expert, no more.
  in.memory_budget = 64ull << 30;
  const BudgetPlan big = plan_budget(m.resident, layout, in, "m.gguf");
  CHECK(big.cache_experts == 64);
  CHECK(big.all_experts_fit());
}

TEST_CASE("a budget too small fails with the breakdown and the smallest budget that works") {
  const Model m = moe_model(2, 8, 50000);
  const ExpertLayout layout = ExpertLayout::from_tensors(m.routed, "m.gguf");
  BudgetInputs in;
  in.kv_cache_bytes = 100u << 20;
  in.overhead_bytes = 30u << 20;
  in.min_cache_experts = 3;
  in.memory_budget = 64u << 20;
  const std::string msg = ns::test::expect_error(
      ns::ErrorKind::invalid_input, [&] { plan_budget(m.resident, layout, in, "m.gguf"); },
      "a 64 MiB budget was accepted for a model needing more");
  CHECK(ns::test::contains(msg, "memory_budget 64.00 MiB is too small to run m.gguf"));
  CHECK(ns::test::contains(msg, "KV cache"));
  CHECK(ns::test::contains(msg, "100.00 MiB"));
  CHECK(ns::test::contains(msg, "3 of 16 experts"));
  // The advice, rounded up to whole MiB, is itself accepted, and a MiB less is not.
  const size_t at = msg.find("at least ");
  REQUIRE(at != std::string::npos);
  const uint64_t advice_mib = std::stoull(msg.substr(at + 9));
  in.memory_budget = advice_mib << 20;
  const BudgetPlan p = plan_budget(m.resident, layout, in, "m.gguf");
  CHECK(p.cache_experts >= 3);
  CHECK(p.minimum_budget <= in.memory_budget);
  CHECK(p.minimum_budget > ((advice_mib - 1) << 20));
}

TEST_CASE("a dense model streams nothing and needs only its fixed parts") {
  Model m;
  m.add("token_embd.weight", {64, 100}, 6800);
  m.add("blk.0.ffn_gate.weight", {64, 64}, 4352);
  const ExpertLayout layout = ExpertLayout::from_tensors(m.routed, "d.gguf");
  BudgetInputs in;
  in.memory_budget = 1u << 20;
  const BudgetPlan p = plan_budget(m.resident, layout, in, "d.gguf");
  CHECK(p.streamed_experts == 0);
  CHECK(p.cache_experts == 0);
  CHECK(p.describe().find("nothing is streamed") != std::string::npos);
}

TEST_CASE("expert stacks that do not fit together are rejected naming the tensor") {
  Model m = moe_model(2, 8, 1000);
  m.routed.erase(m.routed.begin() + 1);  // blk.0.ffn_up_exps.weight
  CHECK_THROWS_WITH_AS(ExpertLayout::from_tensors(m.routed, "m.gguf"),
                       doctest::Contains("layer 0 has routed experts but no 'blk.0.ffn_up_exps.weight'"), ns::Error);

  Model n = moe_model(1, 8, 1000);
  n.routed[1].dims[2] = 4;  // up has 4 experts, gate 8
  n.routed[1].nbytes = 4000;
  CHECK_THROWS_WITH_AS(ExpertLayout::from_tensors(n.routed, "n.gguf"), doctest::Contains("has 4 experts"), ns::Error);

  Model f = moe_model(1, 8, 1000);
  f.add("blk.0.ffn_gate_up_exps.weight", {64, 20, 8}, 16000, true);
  CHECK_THROWS_WITH_AS(ExpertLayout::from_tensors(f.routed, "f.gguf"), doctest::Contains("cannot stream"), ns::Error);

  // A tensor handed over as routed that is no stack this build streams is named, never taken as resident.
  Model g = moe_model(1, 8, 1000);
  g.add("blk.0.ffn_down_shexp.weight", {64, 10, 8}, 8000, true);
  CHECK_THROWS_WITH_AS(ExpertLayout::from_tensors(g.routed, "g.gguf"), doctest::Contains("ffn_down_shexp"), ns::Error);
}

TEST_CASE("human sizes parse as the config writes them") {
  CHECK(parse_size("8GiB") == 8ull << 30);
  CHECK(parse_size("2500MiB") == 2500ull << 20);
  CHECK(parse_size("3G") == 3ull << 30);
  CHECK(parse_size("3g") == 3ull << 30);
  CHECK(parse_size("1.5GiB") == 3ull << 29);
  CHECK(parse_size(" 1.5 GiB ") == 3ull << 29);
  CHECK(parse_size("4096") == 4096);
  CHECK(parse_size("100B") == 100);
  CHECK(parse_size("10KB") == 10000);
  CHECK(parse_size("2MB") == 2000000);
  CHECK(parse_size("1TB") == 1000000000000ull);
  CHECK(parse_size("1T") == 1ull << 40);
  CHECK(parse_size("0.001K") == 1);                           // rounded down
  CHECK(parse_size("17179869183G") == 17179869183ull << 30);  // the largest whole GiB below 2^64

  for (const char* bad : {"", "GiB", "-1G", "8XB", "abc", "1.5.5G", "99999999999999999999", "17179869184G", "1E"}) {
    const std::string text = bad;
    CAPTURE(text);
    CHECK_THROWS_WITH_AS(parse_size(bad), doctest::Contains("e.g. 8GiB"), ns::Error);
  }
}

TEST_CASE("sizes format in the largest binary unit") {
  CHECK(format_size(0) == "0 B");
  CHECK(format_size(1023) == "1023 B");
  CHECK(format_size(1024) == "1.00 KiB");
  CHECK(format_size(2500ull << 20) == "2.44 GiB");
  CHECK(format_size(3ull << 29) == "1.50 GiB");
}

TEST_CASE("disk-bound estimate: bytes per token at one sequence and at the batch that touches every expert") {
  ns::stream::BudgetPlan plan;
  plan.streamed_experts = 16;         // 2 MoE layers of 8 experts
  plan.streamed_bytes = 16ull << 20;  // 1 MiB each
  plan.cache_experts = 4;             // a quarter cached
  const double mib = 1 << 20;
  const auto e = ns::stream::estimate_disk_bound(plan, 2, 8, 2, 3 * mib);
  CHECK(e.hit_rate == doctest::Approx(0.25));
  CHECK(e.bytes_per_expert == doctest::Approx(mib));
  // 2 layers x 2 experts, three quarters of them read.
  CHECK(e.bytes_per_token_batch1 == doctest::Approx(3 * mib));
  CHECK(e.tok_s_batch1 == doctest::Approx(1.0));
  // p = 2/8: 1 - 0.75^B >= 0.99 first at B = 17.
  CHECK(e.full_batch == 17);
  const double touched = 1 - std::pow(0.75, 17);
  CHECK(e.bytes_per_token_full == doctest::Approx(16 * mib * touched * 0.75 / 17));
  CHECK(e.tok_s_full == doctest::Approx(3 * mib / e.bytes_per_token_full));
  // 17 tokens share a step that reads about 4 times what one token reads (16 experts vs 4).
  CHECK(e.tok_s_full > 4 * e.tok_s_batch1);
  // Everything cached: nothing to read.
  plan.cache_experts = 16;
  CHECK(ns::stream::estimate_disk_bound(plan, 2, 8, 2, 3 * mib).bytes_per_token_batch1 == 0);
}

TEST_CASE("Q1_0, Q2_0 and NVFP4 expert stacks: the reader sizes them as ggml does and the plan streams those bytes") {
  // One MoE layer, 4 experts with rows of 256 elements: a Q1_0 row is 2
  // blocks of 18 bytes (fp16 d + 128 sign bits), a Q2_0 row 4 blocks of 18
  // (fp16 d + 64 2-bit codes), an NVFP4 row 4 blocks of 36 (4 UE4M3 scales +
  // 64 nibbles): ggml-common.h's block structs, derived here by hand.
  using ns::gguf::GgufFile;
  using ns::gguf::GgufWriter;
  stream_test::ScratchDir dir;
  const std::string path = dir.file("lowbit.gguf");
  GgufWriter w;
  w.set("general.architecture", ns::gguf::val::str("llama"));
  w.add_tensor("token_embd.weight", {256, 40}, GgmlType::Q8_0);
  w.add_tensor("blk.0.ffn_gate_inp.weight", {256, 4}, GgmlType::F32);
  w.add_tensor("blk.0.ffn_gate_exps.weight", {256, 24, 4}, GgmlType::Q1_0);
  w.add_tensor("blk.0.ffn_up_exps.weight", {256, 24, 4}, GgmlType::Q2_0);
  w.add_tensor("blk.0.ffn_down_exps.weight", {256, 256, 4}, GgmlType::NVFP4);
  w.open(path);
  for (size_t i = 0; i < w.n_tensors(); ++i) w.write_data(std::vector<uint8_t>(w.tensor(i).nbytes, 0x11));
  w.close();

  const auto f = GgufFile::open(path);
  const uint64_t gate = 24 * 2 * 18, up = 24 * 4 * 18, down = 256 * 4 * 36;  // one expert each
  CHECK(f->find_tensor("blk.0.ffn_gate_exps.weight")->nbytes == 4 * gate);
  CHECK(f->find_tensor("blk.0.ffn_up_exps.weight")->nbytes == 4 * up);
  CHECK(f->find_tensor("blk.0.ffn_down_exps.weight")->nbytes == 4 * down);
  const ExpertLayout layout = ExpertLayout::from_tensors(stream_test::stacks_of(f->tensors()), path);
  CHECK(layout.largest_expert_bytes() == gate + up + down);
  CHECK(layout.total_bytes() == 4 * (gate + up + down));
  BudgetInputs in;
  in.memory_budget = 64ull << 20;
  std::vector<TensorInfo> resident;
  for (const TensorInfo& t : f->tensors())
    if (t.dims.size() != 3) resident.push_back(t);
  const BudgetPlan p = plan_budget(resident, layout, in, path);
  CHECK(p.streamed_bytes == 4 * (gate + up + down));
  CHECK(p.streamed_experts == 4);
  CHECK(p.all_experts_fit());
}
