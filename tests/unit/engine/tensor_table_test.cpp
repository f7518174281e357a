// The architectures' tensor tables (engine/spec/tensor_table.h): a generated
// file holds exactly what the table lists, in its order; the engine loads all
// of it; the loader keeps each tensor's role, so the routed stacks it reports
// (what the expert layout streams) and the routers (what the predictor reads)
// are the table's; and the loader reports a missing or misshapen tensor by name.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "engine/arch/architecture.h"
#include "engine/gguf/gguf_file.h"
#include "engine/gguf/gguf_set.h"
#include "engine/spec/hparams.h"
#include "engine/spec/metadata_keys.h"
#include "engine/spec/tensor_table.h"
#include "engine/spec/tensor_loader.h"
#include "engine/stream/expert_layout.h"
#include "common/error.h"
#include "tests/unit/engine/test_models.h"

using namespace ns;

namespace {

// One small file of each architecture described by a table (and variants whose lists differ).
std::vector<std::string> table_models() {
  const std::string tiny = "--n-embd 64 --n-layer 2 --n-head 4 --n-head-kv 2 --type Q8_0 ";
  return {
      test::dense_model(),
      test::moe_model(),
      test::make_model("table-llama-tied", "--arch llama --tied-output " + tiny + "--n-ff 64"),
      test::make_model("table-qwen2moe", "--arch qwen2moe " + tiny + "--n-ff 32 --n-expert 4 --n-expert-used 2"),
      test::make_model("table-qwen3moe",
                       "--arch qwen3moe " + tiny + "--head-dim 32 --n-ff 32 --n-expert 4 --n-expert-used 2"),
      test::make_model("table-ds2-split", "--arch deepseek2 " + tiny + "--n-ff 64 --n-expert 4 --n-expert-used 2"),
      test::make_model("table-ds2-kv_b", "--arch deepseek2 --mla-layout kv_b --q-lora-rank 0 " + tiny +
                                             "--n-ff 64 --n-expert 4 --n-expert-used 2"),
      test::make_model("table-glm4moe", "--arch glm4moe " + tiny + "--n-ff 64 --n-expert 4 --n-expert-used 2"),
      test::make_model("table-minimax-m2", "--arch minimax-m2 " + tiny + "--n-ff 32 --n-expert 4 --n-expert-used 2"),
      test::make_model("table-minimax-m3", "--arch minimax-m3 " + tiny + "--n-ff 64 --n-expert 4 --n-expert-used 2"),
      test::make_model("table-bailingmoe2", "--arch bailingmoe2 " + tiny +
                                                "--n-ff 64 --n-expert 4 --n-expert-used 2 "
                                                "--ling-n-expert-group 2 --ling-n-expert-group-used 1"),
      test::make_model("table-bailingmoe3", "--arch bailingmoe3 --ling3-group 2 --ling3-q-lora-rank 32 " + tiny +
                                                "--n-ff 64 --n-expert 4 --n-expert-used 2"),
      test::make_model("table-deepseek32", "--arch deepseek32 " + tiny + "--n-ff 64 --n-expert 4 --n-expert-used 2"),
      test::make_model("table-glm-dsa",
                       "--arch glm-dsa --dsa-types 1,0 " + tiny + "--n-ff 64 --n-expert 4 --n-expert-used 2"),
      test::make_model("table-deepseek4",
                       "--arch deepseek4 " + tiny +
                           "--n-ff 32 --n-expert 4 --n-expert-used 2 "
                           "--dsv4-head-dim 32 --dsv4-rope-dim 16 --dsv4-q-lora-rank 32 --dsv4-o-lora-rank 32 "
                           "--dsv4-ratios 4,128 --dsv4-hash-layers 1"),
      test::make_model("table-kimi-linear",
                       "--arch kimi-linear --mla-every 2 " + tiny + "--n-ff 64 --n-expert 4 --n-expert-used 2"),
      test::make_model("table-kimi-k3", "--arch kimi-k3 --mla-every 2 --attn-res-block 1 --expert-latent 32 " + tiny +
                                            "--n-ff 64 --n-expert 4 --n-expert-used 2"),
  };
}

}  // namespace

TEST_CASE("tensor table: a generated file holds what the table lists, in order") {
  for (const std::string& path : table_models()) {
    CAPTURE(path);
    const auto f = gguf::GgufFile::open(path);
    Hparams hp = read_hparams(*f);
    hp.n_vocab = static_cast<int64_t>(f->find_tensor("token_embd.weight")->dims[1]);
    const TensorTable table = tensor_table(hp, f->find_tensor("output.weight") == nullptr);
    std::vector<const TensorSpec*> written;
    for (const TensorSpec& s : table.specs()) {
      CHECK(s.into.index() == 0);  // a description: bound to nothing
      // Each entry knows its block (describe_blocks), as its name says.
      CHECK(s.name.starts_with("blk.") == (s.block >= 0));
      if (s.block >= 0) CHECK(s.name.starts_with(block_prefix(s.block)));
      if (s.presence != Presence::tolerated) written.push_back(&s);
    }
    REQUIRE(written.size() == f->tensors().size());
    for (size_t i = 0; i < written.size(); ++i) {
      CHECK(f->tensors()[i].name == written[i]->name);
      CHECK(f->tensors()[i].dims == written[i]->dims);
    }
  }
}

TEST_CASE("tensor table: the loaded roles say what is streamed and where the routers are") {
  for (const std::string& path : table_models()) {
    CAPTURE(path);
    const auto set = gguf::GgufSet::open(path);
    Hparams hp = read_hparams(set->metadata());
    hp.n_vocab = static_cast<int64_t>(set->find_tensor("token_embd.weight")->dims[1]);
    const TensorTable table = tensor_table(hp, set->find_tensor("output.weight") == nullptr);
    TensorLoader loader(*set);
    const auto arch = make_architecture(hp, loader);
    // The routed stacks the loader reports are the table's routed entries the model runs (NextN blocks skipped) ...
    std::vector<std::string> routed, reported;
    std::vector<int64_t> router_blocks;
    for (const TensorSpec& s : table.specs()) {
      if (s.presence == Presence::skipped) continue;
      if (is_routed(s.role)) routed.push_back(s.name);
      if (s.role == TensorRole::router) router_blocks.push_back(s.block);
    }
    for (const gguf::TensorInfo& t : loader.routed_tensors()) reported.push_back(t.name);
    CHECK(reported == routed);
    CHECK(loader.routed_tensors().size() + loader.resident_tensors().size() == loader.used_tensors().size());
    // ... and they lay out as the expert cache's stacks: every MoE block has its three.
    const auto layout = stream::ExpertLayout::from_tensors(loader.routed_tensors(), path);
    CHECK(layout.n_stacks() == routed.size());
    CHECK(static_cast<int64_t>(layout.n_moe_layers()) == static_cast<int64_t>(router_blocks.size()));
    // Each MoE block's router, a view of the mapping with a row per expert; none elsewhere.
    const std::vector<kernels::MatrixView> routers = loader.routers(hp.n_layer);
    REQUIRE(static_cast<int64_t>(routers.size()) == hp.n_layer);
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      CAPTURE(il);
      const bool has = std::find(router_blocks.begin(), router_blocks.end(), il) != router_blocks.end();
      CHECK(routers[static_cast<size_t>(il)].rows == (has ? hp.n_expert : 0));
      CHECK(layout.is_moe_layer(static_cast<uint32_t>(il)) == has);
    }
  }
}

// The generator writes and the engine reads the "<arch>." keys through one table (engine/spec/metadata_keys.h):
// every such key of a generated file is one of its entries, and no entry is listed twice.
TEST_CASE("metadata keys: a generated file's <arch>. keys are all in the shared table") {
  const std::set<std::string_view> table(keys::all.begin(), keys::all.end());
  CHECK(table.size() == keys::all.size());
  for (const std::string& path : table_models()) {
    CAPTURE(path);
    const auto f = gguf::GgufFile::open(path);
    const std::string a = f->get_string("general.architecture") + ".";
    for (const auto& [key, value] : f->metadata()) {
      if (!key.starts_with(a)) continue;
      CAPTURE(key);
      CHECK(table.count(std::string_view(key).substr(a.size())) == 1);
    }
  }
}

TEST_CASE("tensor table: the loader fills bound entries and names what is missing or misshapen") {
  const auto f = gguf::GgufSet::open(test::dense_model());
  TensorLoader loader(*f);
  std::vector<float> norm, absent;
  kernels::MatrixView q;
  TensorTable t;
  t.vector("blk.0.attn_norm.weight", 64, TensorRole::norm, &norm);
  t.matrix("blk.0.attn_q.weight", 64, 64, TensorRole::input, &q);
  t.vector("blk.0.attn_q.bias", 64, TensorRole::bias, &absent, Presence::optional);
  t.vector("blk.0.ffn_norm.weight", 64, TensorRole::norm, nullptr);  // described only
  t.load(loader);
  CHECK(norm.size() == 64);
  CHECK(q.rows == 64);
  CHECK(q.cols == 64);
  CHECK(absent.empty());
  // Only the bound entries were asked for.
  CHECK(loader.used_tensors().size() == 2);

  TensorTable missing;
  missing.vector("blk.0.attn_q.bias", 64, TensorRole::bias, &absent);
  CHECK_THROWS_WITH_AS(missing.load(loader), doctest::Contains("'blk.0.attn_q.bias' [64] is missing"), Error);
  TensorTable misshapen;
  misshapen.matrix("blk.0.attn_k.weight", 64, 64, TensorRole::input, &q);
  CHECK_THROWS_WITH_AS(misshapen.load(loader), doctest::Contains("expected shape [64, 64], the file has [64, 32]"),
                       Error);
}

TEST_CASE("tensor table: an unknown architecture is refused") {
  Hparams hp;
  hp.arch = "no-such-architecture";
  CHECK_THROWS_AS(tensor_table(hp, false), Error);
}
