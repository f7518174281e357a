// minimax-m2 on generated models (the goldens in tests/conformance check the
// arithmetic against the reference): the file's shape as read (full-width Q/K
// norms, partial NEOX rope, sigmoid routing with its selection bias), batched
// equals alone, and the routed experts stream through a small cache, and under
// a budget smaller than the file, with the mapping's logits.
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

// Three MoE layers of 8 experts (2 used), 4 query heads of 32 over 2 KV heads, 16 dims rotated.
std::string minimax(const std::string& types = "--type Q8_0") {
  return test::make_model("minimax-m2",
                          "--arch minimax-m2 --n-embd 64 --n-layer 3 --n-head 4 --n-head-kv 2 "
                          "--mm-head-dim 32 --n-ff 64 --n-expert 8 --n-expert-used 2 "
                          "--rope-base 5000000 " +
                              types + " --seed 51");
}

}  // namespace

TEST_CASE("minimax-m2: the file's shape as read: full-width Q/K norms, partial NEOX rope, sigmoid routing") {
  auto m = Model::load(minimax(), {.engine = {.context = 32, .max_batch_tokens = 16}});
  const Hparams& hp = m->hparams();
  CHECK(hp.rope_type == RopeType::neox);
  CHECK(hp.head_dim == 32);
  CHECK(hp.rope_dim == 16);
  CHECK(hp.expert_gating == ExpertGating::sigmoid);
  CHECK(hp.n_expert_shared == 0);
  // The norms span every head of a token: [4 * 32] for Q, [2 * 32] for K.
  const auto dims = [&](const std::string& name) {
    for (const auto& t : m->files().tensors())
      if (t.name == name) return t.dims;
    return std::vector<uint64_t>{};
  };
  CHECK(dims("blk.0.attn_q_norm.weight") == std::vector<uint64_t>{128});
  CHECK(dims("blk.0.attn_k_norm.weight") == std::vector<uint64_t>{64});
  CHECK(dims("blk.2.exp_probs_b.bias") == std::vector<uint64_t>{8});
  // Every tensor of the file is read.
  CHECK(m->tensors().size() == m->files().tensors().size());
}

TEST_CASE("minimax-m2: a prompt in one pass equals it token by token, and two sequences batched equal each alone") {
  test::check_one_pass_and_batched("minimax-m2", minimax());
}

TEST_CASE("minimax-m2: experts streamed through a 3-slot cache give the mapping's logits") {
  test::check_small_cache_streaming("minimax-m2", minimax());
}

// The real CLI in a fresh process: a file about twice the budget runs, its peak
// RSS stays within the budget, and the experts were streamed.
TEST_CASE("minimax-m2: runs under a memory budget smaller than the file") {
  const std::string path =
      test::make_model("minimax-m2-stream",
                       "--arch minimax-m2 --n-embd 512 --n-layer 6 --n-head 8 --n-head-kv 2 --mm-head-dim 64 "
                       "--n-ff 1024 --n-expert 32 --n-expert-used 4 --type Q4_0 --seed 53");
  test::check_runs_under_budget("minimax-m2", path, 100, 1.5, "uring", 8);
}
