// minimax-m3 on generated models (the goldens in tests/conformance check the
// arithmetic against the reference): the file's shape as read (per-head Q/K
// norms, dense lead, shared experts, the indexer F32 and its key in the K
// cache row); while a query's blocks number top_k or fewer the model is its
// dense twin (same seed, same weights, top_k past every prompt) to the bit,
// past it the indexer's choice counts; a prompt in one pass equals it token
// by token (so no position reads a later one) and two sequences batched equal
// each alone (family_checks.h); indexer keys the graph cannot run are refused
// naming the key; the routed experts stream through a small cache with the
// mapping's logits and under a budget smaller than the file.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/error.h"
#include "engine/layers/msa_indexer.h"
#include "engine/model/model.h"
#include "tests/unit/engine/family_checks.h"
#include "tests/unit/engine/test_models.h"

using namespace ns;

namespace {

// A dense lead layer then two MoE layers of 8 experts (2 used) and a shared
// one; 4 query heads of 32 over 2 KV heads (so 2 indexer heads of 32), 16
// dims rotated; blocks of 4 positions, the local one forced.
const std::string kShape =
    "--arch minimax-m3 --n-embd 64 --n-layer 3 --n-head 4 --n-head-kv 2 --mm3-head-dim 32 --n-ff 64 "
    "--n-expert 8 --n-expert-used 2 --rope-base 5000000 --msa-head-dim 32 --msa-block-size 4 --seed 61 ";

std::string mm3(int top_k, const std::string& types = "--type F32") {
  return test::make_model("minimax-m3-k" + std::to_string(top_k) + (types == "--type F32" ? "" : "-q"),
                          kShape + "--msa-top-k " + std::to_string(top_k) + " " + types);
}

}  // namespace

TEST_CASE("minimax-m3: the file's shape as read: per-head Q/K norms, dense lead, shared experts, the indexer") {
  auto m = Model::load(mm3(2, "--type Q8_0"), {.engine = {.context = 32, .max_batch_tokens = 16}});
  const Hparams& hp = m->hparams();
  CHECK(hp.rope_type == RopeType::neox);
  CHECK(hp.head_dim == 32);
  CHECK(hp.rope_dim == 16);
  CHECK(hp.expert_gating == ExpertGating::sigmoid);
  CHECK(hp.n_expert_shared == 1);
  CHECK(hp.n_layer_dense_lead == 1);
  CHECK(hp.expert_weights_norm);
  CHECK(hp.expert_weights_scale == 2.5f);
  CHECK(hp.indexer_n_head == 2);
  CHECK(hp.indexer_head_dim == 32);
  CHECK(hp.indexer_top_k == 2);
  CHECK(hp.indexer_block_size == 4);
  CHECK(hp.indexer_local_blocks == 1);
  const auto find = [&](const std::string& name) {
    for (const auto& t : m->files().tensors())
      if (t.name == name) return t;
    FAIL("no tensor " << name);
    return m->files().tensors().front();
  };
  CHECK(find("blk.0.attn_q_norm.weight").dims == std::vector<uint64_t>{32});  // one head's, shared
  CHECK(find("blk.0.attn_k_norm.weight").dims == std::vector<uint64_t>{32});
  CHECK(find("blk.0.ffn_gate.weight").dims == std::vector<uint64_t>{64, 64});  // the dense lead layer
  CHECK(find("blk.1.ffn_gate_shexp.weight").dims == std::vector<uint64_t>{64, 64});
  CHECK(find("blk.1.indexer.q_proj.weight").dims == std::vector<uint64_t>{64, 64});
  CHECK(find("blk.1.indexer.k_proj.weight").dims == std::vector<uint64_t>{64, 32});
  // The converter keeps the indexer F32 whatever the rest is.
  CHECK(find("blk.1.indexer.q_proj.weight").type == gguf::GgmlType::F32);
  CHECK(find("blk.1.attn_q.weight").type == gguf::GgmlType::Q8_0);
  for (const auto& t : m->files().tensors()) CHECK(t.name.find("blk.0.indexer") == std::string::npos);
  // Every tensor of the file is read.
  CHECK(m->tensors().size() == m->files().tensors().size());
}

TEST_CASE("minimax-m3: up to top_k blocks the dense twin to the bit; past them the indexer's choice counts") {
  const std::string dense_path = mm3(16);  // 16 blocks of 4: every prompt below is dense
  auto probe = Model::load(dense_path, {.engine = {.context = 32, .max_batch_tokens = 16}});
  const int64_t V = probe->n_vocab();
  const std::vector<int32_t> toks = test::some_tokens(V, 24, 5);
  const std::vector<float> dense = test::prompt_logits(dense_path, toks);
  // top_k 2 blocks of 4: positions 0..7 see every key, later ones two blocks (their own and the best other).
  const std::vector<float> sparse = test::prompt_logits(mm3(2), toks);
  CHECK(test::max_diff_rows(sparse, dense, V, 0, 8) == 0.0);
  const double later = test::max_diff_rows(sparse, dense, V, 8, 24);
  MESSAGE("max |sparse - dense| past top_k blocks = " << later);
  CHECK(later > 1e-3);
}

TEST_CASE("minimax-m3: a prompt in one pass equals it token by token, and two sequences batched equal each alone") {
  // 22 and 17 tokens at top_k 2 blocks of 4: both past the blocks a query reads, so selection runs.
  test::check_one_pass_and_batched("minimax-m3", mm3(2, "--type Q8_0"),
                                   {.options = {.engine = {.context = 64, .max_sequences = 2, .max_batch_tokens = 48}},
                                    .a_tokens = 22,
                                    .b_tokens = 17,
                                    .a_offset = 11,
                                    .b_offset = 12});
}

TEST_CASE("minimax-m3: indexer keys the graph cannot run are refused naming the key") {
  Hparams hp;
  hp.arch = "minimax-m3";
  hp.n_head_kv = 2;
  hp.rope_dim = 16;
  hp.indexer_n_head = 4;
  CHECK_THROWS_WITH_AS(msa_shape(hp, 64), doctest::Contains("must equal attention.head_count_kv"), Error);
  hp.indexer_n_head = 2;
  hp.indexer_head_dim = 32;
  hp.indexer_top_k = 2;
  CHECK_THROWS_WITH_AS(msa_shape(hp, 64), doctest::Contains("attention.indexer.block_size' is missing"), Error);
  hp.indexer_block_size = 4;
  hp.indexer_local_blocks = 3;
  CHECK_THROWS_WITH_AS(msa_shape(hp, 64), doctest::Contains("attention.indexer.local_blocks' is 3"), Error);
  hp.indexer_local_blocks = 1;
  CHECK(msa_shape(hp, 64).cache_offset == 64);
}

TEST_CASE("minimax-m3: experts streamed through a 3-slot cache give the mapping's logits") {
  test::check_small_cache_streaming("minimax-m3", mm3(2, "--type Q8_0"));
}

TEST_CASE("minimax-m3: runs under a memory budget smaller than the file") {
  const std::string path =
      test::make_model("minimax-m3-stream",
                       "--arch minimax-m3 --n-embd 512 --n-layer 7 --n-head 8 --n-head-kv 2 --n-ff 1024 --n-expert 32 "
                       "--n-expert-used 4 --msa-block-size 4 --msa-top-k 2 --type Q4_0 --seed 73");
  test::check_runs_under_budget("minimax-m3", path, 100, 1.5, "uring", 8);
}
