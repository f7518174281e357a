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
  const ModelOptions mo{.engine = {.context = 64, .max_sequences = 2, .max_batch_tokens = 32}};
  auto m = Model::load(glm4(1), mo);
  const int64_t V = m->n_vocab();
  const std::vector<int32_t> a = prompt(V, 12, 0), b = prompt(V, 9, 1);

  // Alone: each sequence's prompt in one pass (sequence 0 of a fresh model).
  auto alone = [&](const std::vector<int32_t>& toks) {
    auto one = Model::load(glm4(1), mo);
    std::vector<float> logits;
    one->forward(toks, 0, true, logits);
    return logits;
  };
  const std::vector<float> la = alone(a), lb = alone(b);

  // Token by token.
  std::vector<float> step, seq_a;
  for (size_t t = 0; t < a.size(); ++t) {
    m->forward(std::span(a).subspan(t, 1), static_cast<int64_t>(t), false, step);
    seq_a.insert(seq_a.end(), step.begin(), step.end());
  }
  const double d_steps = test::max_abs_diff(seq_a, la);
  MESSAGE("max |one pass - token by token| = " << d_steps);
  CHECK(d_steps < 1e-3);

  // Both sequences interleaved in one batch, on a fresh model.
  auto both = Model::load(glm4(1), mo);
  std::vector<BatchToken> batch;
  for (size_t t = 0; t < std::max(a.size(), b.size()); ++t) {
    if (t < a.size()) batch.push_back({a[t], 0, static_cast<int32_t>(t), true});
    if (t < b.size()) batch.push_back({b[t], 1, static_cast<int32_t>(t), true});
  }
  std::vector<float> mixed;
  both->forward_batch(batch, mixed);
  std::vector<float> ma, mb;
  for (size_t i = 0; i < batch.size(); ++i) {
    auto& dst = batch[i].seq == 0 ? ma : mb;
    dst.insert(dst.end(), mixed.begin() + static_cast<int64_t>(i) * V, mixed.begin() + static_cast<int64_t>(i + 1) * V);
  }
  const double d_batch = std::max(test::max_abs_diff(ma, la), test::max_abs_diff(mb, lb));
  MESSAGE("max |batched - alone| = " << d_batch);
  CHECK(d_batch < 1e-3);
}

TEST_CASE("glm4moe: the NextN block is skipped: not loaded, not planned, and the file without it is the same model") {
  const std::string with = glm4(1), without = glm4(0);
  REQUIRE(std::filesystem::file_size(with) > std::filesystem::file_size(without));
  const ModelOptions mo{.engine = {.threads = 1, .context = 32, .max_batch_tokens = 16, .memory_budget = 1ull << 30},
                        .plan_only = true};
  auto mw = Model::load(with, mo);
  auto mn = Model::load(without, mo);

  const Hparams& hp = mw->hparams();
  CHECK(hp.n_layer == 3);  // block_count 4 less the NextN block
  CHECK(hp.n_layer_nextn == 1);
  CHECK(mn->hparams().n_layer_nextn == 0);
  CHECK(hp.rope_type == RopeType::neox);
  CHECK(hp.head_dim == 32);
  CHECK(hp.rope_dim == 16);  // partial: half the head rotates
  CHECK(hp.expert_gating == ExpertGating::sigmoid);
  CHECK(hp.n_layer_dense_lead == 1);

  // The file has the NextN tensors; the model reads none of them.
  const auto nextn = [](const gguf::TensorInfo& t) { return t.name.rfind("blk.3.", 0) == 0; };
  CHECK(std::count_if(mw->files().tensors().begin(), mw->files().tensors().end(), nextn) > 0);
  CHECK(std::none_of(mw->tensors().begin(), mw->tensors().end(), nextn));
  CHECK(mw->tensors().size() == mn->tensors().size());
  CHECK(mw->n_params() == mn->n_params());
  // KV cache for the 3 layers that run: (K + V of 2 heads of 32) in F16.
  CHECK(mw->sequence_state().bytes_per_token() == 3u * (2u * 2u * 32u) * 2u);

  // The plan: the same resident tensors and streamed experts with or without
  // the block (resident bytes count the 4 KiB pages each tensor spans, which
  // moves with the file layout by up to a page per tensor).
  REQUIRE(mw->streaming().planned);
  const stream::BudgetPlan& pw = mw->streaming().plan;
  const stream::BudgetPlan& pn = mn->streaming().plan;
  CHECK(pw.resident_tensors == pn.resident_tensors);
  CHECK(pw.resident_tensors + pw.streamed_tensors == mw->tensors().size());  // exactly the ones read
  CHECK(pw.resident_bytes <= pn.resident_bytes + 4096ull * pw.resident_tensors);
  CHECK(pw.streamed_bytes == pn.streamed_bytes);
  CHECK(pw.streamed_experts == 2u * 8u);  // 2 MoE layers of 8
  CHECK(mw->streaming().layout.n_moe_layers() == 2);

  // And it computes the same logits.
  ModelOptions run;
  run.engine.context = 32;
  run.engine.max_batch_tokens = 16;
  auto rw = Model::load(with, run);
  auto rn = Model::load(without, run);
  const std::vector<int32_t> toks = prompt(rw->n_vocab(), 10, 2);
  std::vector<float> lw, ln;
  rw->forward(toks, 0, true, lw);
  rn->forward(toks, 0, true, ln);
  CHECK(lw == ln);
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
  const uint64_t budget = 100ull << 20;
  REQUIRE(std::filesystem::file_size(path) > 1.5 * budget);
  test::check_streams_within_budget(path, 100, "uring", 8);
}
