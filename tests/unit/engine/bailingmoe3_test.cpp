// bailingmoe3 (Ling / Ring 3.0) on generated models (the goldens in
// tests/conformance check the arithmetic against the reference): the file's
// shape as read (KDA and MLA layers from head_count_kv's one entry per block,
// the per-head attn_gate, full-rank ssm_f_a/ssm_g_a, the shared expert's own
// width), the NextN block neither loaded nor planned (a file without it is
// the same model), one pass equals token by token, batched equals alone, the
// routed experts stream through a small cache and under a budget smaller than
// the file with the mapping's logits, and the keys it refuses.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "common/error.h"
#include "engine/gguf/gguf_file.h"
#include "engine/model/model.h"
#include "tests/unit/engine/family_checks.h"
#include "tests/unit/engine/test_models.h"

using namespace ns;

namespace {

// Layers KDA, KDA, MLA (group 3): one dense layer then two MoE layers of 8
// experts (2 used), a shared-expert FFN 96 wide; then `nextn` NextN blocks.
std::string ling3(int nextn, const std::string& extra = "--type Q8_0") {
  return test::make_model("bailingmoe3-n" + std::to_string(nextn) + "-" + std::to_string(extra.size()),
                          "--arch bailingmoe3 --n-embd 64 --n-layer 3 --n-head 4 --n-ff 96 --n-expert 8 "
                          "--n-expert-used 2 --ling3-group 3 --ling3-kda-head-dim 16 --ling3-n-ff-expert 32 "
                          "--ling3-n-ff-shexp 96 --ling3-kv-lora-rank 32 --ling3-qk-rope-dim 8 "
                          "--ling3-qk-nope-dim 32 --ling3-v-head-dim 32 --ling3-nextn-layers " +
                              std::to_string(nextn) + " --rope-base 600000 " + extra + " --seed 71");
}

const gguf::TensorInfo* tensor(const Model& m, const std::string& name) {
  const auto& ts = m.files().tensors();
  const auto it = std::find_if(ts.begin(), ts.end(), [&](const gguf::TensorInfo& t) { return t.name == name; });
  return it == ts.end() ? nullptr : &*it;
}

}  // namespace

TEST_CASE("bailingmoe3: the shape as read; the NextN block is skipped and the file without it is the same model") {
  const test::NextnModels ms = test::check_nextn_skipped("bailingmoe3", ling3(1), ling3(0), 3, 2u * 8u);
  const Model& mw = *ms.with;
  const Model& mn = *ms.without;

  const Hparams& hp = mw.hparams();
  CHECK(hp.n_head_kv_layers == std::vector<int64_t>{0, 0, 1, 1});  // one per block, the NextN block MLA
  CHECK(hp.rope_type == RopeType::norm);
  CHECK(hp.rope_dim == 8);
  CHECK(hp.expert_gating == ExpertGating::sigmoid);
  CHECK(hp.expert_weights_norm);
  CHECK(hp.kda_gate_lower_bound == -5.0f);
  CHECK(hp.n_ff_shexp == 96);

  // KDA: full-rank decay and output gates; ssm_a [1, n_head]. MLA: the per-head gate, split k_b/v_b.
  CHECK(tensor(mn, "blk.0.ssm_f_a.weight")->dims == std::vector<uint64_t>{64, 64});
  CHECK(tensor(mn, "blk.0.ssm_f_b.weight") == nullptr);
  CHECK(tensor(mn, "blk.0.ssm_g_a.weight")->dims == std::vector<uint64_t>{64, 64});
  CHECK(tensor(mn, "blk.0.ssm_a")->dims == std::vector<uint64_t>{1, 4});
  CHECK(tensor(mn, "blk.2.attn_gate.weight")->dims == std::vector<uint64_t>{64, 4});
  CHECK(tensor(mn, "blk.2.attn_k_b.weight") != nullptr);
  CHECK(tensor(mn, "blk.1.ffn_up_shexp.weight")->dims == std::vector<uint64_t>{64, 96});
  CHECK(tensor(mw, "blk.3.nextn.eh_proj.weight") != nullptr);  // the NextN block's own tensors are in the file
}

TEST_CASE("bailingmoe3: a prompt in one pass equals it token by token, and two sequences batched equal each alone") {
  for (const std::string extra : {"--type Q8_0", "--ling3-q-lora-rank 32 --type F32"}) {
    CAPTURE(extra);
    test::check_one_pass_and_batched("bailingmoe3", ling3(1, extra));
  }
}

TEST_CASE("bailingmoe3: experts streamed through a 3-slot cache give the mapping's logits") {
  test::check_small_cache_streaming("bailingmoe3", ling3(1));
}

TEST_CASE("bailingmoe3: runs under a memory budget smaller than the file") {
  const std::string path =
      test::make_model("bailingmoe3-stream",
                       "--arch bailingmoe3 --n-embd 512 --n-layer 6 --n-head 8 --n-ff 1024 --n-expert 32 "
                       "--n-expert-used 4 --ling3-group 3 --ling3-kda-head-dim 64 --ling3-n-ff-expert 1024 "
                       "--ling3-n-ff-shexp 1024 --type Q4_0 --seed 73");
  test::check_runs_under_budget("bailingmoe3", path, 100, 1.5, "uring", 8);
}
