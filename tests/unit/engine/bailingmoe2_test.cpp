// bailingmoe2 (Ling / Ring 2.0) on generated models (the goldens in
// tests/conformance check the arithmetic against the reference): the file's
// shape as read (fused attn_qkv, per-head Q/K norms, group-limited sigmoid
// routing, shared expert, a dense lead layer), the NextN block neither loaded
// nor planned (a file without it is the same model), batched equals alone, and
// the routed experts stream through a small cache, and under a budget smaller
// than the file, with the mapping's logits.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/model/model.h"
#include "tests/unit/engine/family_checks.h"
#include "tests/unit/engine/test_models.h"

using namespace ns;

namespace {

// One dense layer then two MoE layers of 8 experts in 4 groups (2 groups, 2 experts used) with a
// shared expert, heads of 16 of which 8 rotate; then `nextn` NextN blocks.
std::string ling(int nextn, const std::string& types = "--type Q8_0") {
  return test::make_model("bailingmoe2-n" + std::to_string(nextn),
                          "--arch bailingmoe2 --n-embd 64 --n-layer 3 --n-head 4 --n-head-kv 2 --n-ff 96 "
                          "--n-expert 8 --n-expert-used 2 --ling-n-ff-expert 32 --ling-n-expert-group 4 "
                          "--ling-n-expert-group-used 2 --ling-nextn-layers " +
                              std::to_string(nextn) + " --rope-base 600000 " + types + " --seed 61");
}

}  // namespace

TEST_CASE("bailingmoe2: the NextN block is skipped: not loaded, not planned; the file without it is the same model") {
  const test::NextnModels ms = test::check_nextn_skipped("bailingmoe2", ling(1), ling(0), 3, 2u * 8u);
  const Model& mw = *ms.with;
  const Model& mn = *ms.without;

  const Hparams& hp = mw.hparams();
  CHECK(hp.rope_type == RopeType::neox);
  CHECK(hp.head_dim == 16);
  CHECK(hp.rope_dim == 8);  // partial: half the head rotates
  CHECK(hp.expert_gating == ExpertGating::sigmoid);
  CHECK(hp.n_layer_dense_lead == 1);
  CHECK(hp.n_expert_groups == 4);
  CHECK(hp.n_group_used == 2);
  CHECK(hp.n_expert_shared == 1);

  // One fused projection: Q (4 heads) + K + V (2 heads each) of 16.
  const auto qkv = std::find_if(mn.files().tensors().begin(), mn.files().tensors().end(),
                                [](const gguf::TensorInfo& t) { return t.name == "blk.0.attn_qkv.weight"; });
  REQUIRE(qkv != mn.files().tensors().end());
  CHECK(qkv->dims == std::vector<uint64_t>{64, 128});
  // KV cache for the 3 layers that run: (K + V of 2 heads of 16) in F16.
  CHECK(mw.sequence_state().bytes_per_token() == 3u * (2u * 2u * 16u) * 2u);
  // The plan holds exactly the tensors the model reads, and the 2 MoE layers.
  const stream::BudgetPlan& pw = mw.streaming().plan;
  CHECK(pw.resident_tensors + pw.streamed_tensors == mw.tensors().size());
  CHECK(mw.streaming().layout.n_moe_layers() == 2);
}

TEST_CASE("bailingmoe2: a prompt in one pass equals it token by token, and two sequences batched equal each alone") {
  test::check_one_pass_and_batched("bailingmoe2", ling(1));
}

TEST_CASE("bailingmoe2: experts streamed through a 3-slot cache give the mapping's logits") {
  test::check_small_cache_streaming("bailingmoe2", ling(1));
}

TEST_CASE("bailingmoe2: runs under a memory budget smaller than the file") {
  const std::string path =
      test::make_model("bailingmoe2-stream",
                       "--arch bailingmoe2 --n-embd 512 --n-layer 6 --n-head 8 --n-head-kv 2 --n-ff 1024 "
                       "--n-expert 32 --n-expert-used 4 --ling-n-ff-expert 1024 --ling-n-expert-group 4 "
                       "--ling-n-expert-group-used 2 --type Q4_0 --seed 63");
  test::check_runs_under_budget("bailingmoe2", path, 100, 1.5, "uring", 8);
}
