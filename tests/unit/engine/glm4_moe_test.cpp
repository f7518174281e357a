// glm4moe on generated models (the goldens in tests/conformance check the
// arithmetic against the reference): batched equals alone, the NextN block the
// file carries is neither loaded, streamed nor planned (a file without it is
// the same model), and the routed experts stream through a small cache, and
// under a budget smaller than the file, with the mapping's logits.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/model/model.h"
#include "tests/unit/engine/family_checks.h"
#include "tests/unit/engine/streaming_checks.h"
#include "tests/unit/engine/test_models.h"

using namespace ns;

namespace {

// One dense layer then two MoE layers of 8 experts (2 used) with a shared
// expert, head 32 of which 16 rotate, Q/K norms; then `nextn` NextN blocks.
std::string glm4(int nextn, const std::string& types = "--type Q8_0") {
  return test::make_model("glm4moe-n" + std::to_string(nextn),
                          "--arch glm4moe --n-embd 64 --n-layer 3 --n-head 4 --n-head-kv 2 --glm-head-dim 32 "
                          "--n-ff 96 --n-expert 8 --n-expert-used 2 --glm-n-ff-expert 32 --glm-nextn-layers " +
                              std::to_string(nextn) + " --rope-base 1000000 " + types + " --seed 41");
}

std::vector<int32_t> prompt(int64_t n_vocab, int n, int salt) { return test::some_tokens(n_vocab, n, salt * 101); }

}  // namespace

TEST_CASE("glm4moe: a prompt in one pass equals it token by token, and two sequences batched equal each alone") {
  test::check_one_pass_and_batched("glm4moe", glm4(1), {.batch_below = 1e-3});
}

TEST_CASE("glm4moe: the NextN block is skipped: not loaded, not planned, and the file without it is the same model") {
  const test::NextnModels ms = test::check_nextn_skipped("glm4moe", glm4(1), glm4(0), 3, 2u * 8u);
  const Model& mw = *ms.with;
  const Model& mn = *ms.without;

  const Hparams& hp = mw.hparams();
  CHECK(hp.rope_type == RopeType::neox);
  CHECK(hp.head_dim == 32);
  CHECK(hp.rope_dim == 16);  // partial: half the head rotates
  CHECK(hp.expert_gating == ExpertGating::sigmoid);
  CHECK(hp.n_layer_dense_lead == 1);
  // KV cache for the 3 layers that run: (K + V of 2 heads of 32) in F16.
  CHECK(mw.sequence_state().bytes_per_token() == 3u * (2u * 2u * 32u) * 2u);

  // The plan holds exactly the tensors the model reads, and the 2 MoE layers; resident bytes count the 4 KiB
  // pages each tensor spans, which moves with the file layout by up to a page per tensor.
  const stream::BudgetPlan& pw = mw.streaming().plan;
  const stream::BudgetPlan& pn = mn.streaming().plan;
  CHECK(pw.resident_tensors + pw.streamed_tensors == mw.tensors().size());
  CHECK(pw.resident_bytes <= pn.resident_bytes + 4096ull * pw.resident_tensors);
  CHECK(mw.streaming().layout.n_moe_layers() == 2);
}

TEST_CASE("glm4moe: experts streamed through a 3-slot cache give the mapping's logits") {
  const std::string path = glm4(1);
  auto run = [&](const std::string& io_mode, uint32_t slots) {
    auto m = test::load_streamed(path, io_mode, slots);
    std::vector<float> logits, last;
    m->forward(prompt(m->n_vocab(), 12, 3), 0, true, logits);
    last.assign(logits.end() - m->n_vocab(), logits.end());
    for (int i = 0; i < 4; ++i) {
      const int32_t id[1] = {static_cast<int32_t>(std::max_element(last.begin(), last.end()) - last.begin())};
      m->forward(id, 12 + i, false, last);
      logits.insert(logits.end(), last.begin(), last.end());
    }
    if (io_mode != "mmap") {
      const stream::StreamStats st = m->stream_stats();
      CHECK(st.cache.evictions > 0);
      CHECK(m->streaming().layout.n_moe_layers() == 2);  // the NextN block's experts are not in the layout
    }
    return logits;
  };
  CHECK(run("uring", 3) == run("mmap", 0));
}

// The real CLI in a fresh process: a file about twice the budget runs, its peak
// RSS stays within the budget, and the experts were streamed.
TEST_CASE("glm4moe: runs under a memory budget smaller than the file") {
  const std::string path =
      test::make_model("glm4moe-stream",
                       "--arch glm4moe --n-embd 512 --n-layer 6 --n-head 8 --n-head-kv 2 --glm-head-dim 64 "
                       "--n-ff 1024 --n-expert 32 --n-expert-used 4 --glm-n-ff-expert 1024 --type Q4_0 --seed 43");
  test::check_runs_under_budget("glm4moe", path, 100, 1.5, "uring", 8);
}
