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
#include "tests/unit/engine/streaming_checks.h"
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

std::vector<int32_t> prompt(int64_t n_vocab, int n, int salt) { return test::some_tokens(n_vocab, n, salt * 101); }

}  // namespace

TEST_CASE("bailingmoe2: the NextN block is skipped: not loaded, not planned; the file without it is the same model") {
  const std::string with = ling(1), without = ling(0);
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
  CHECK(hp.head_dim == 16);
  CHECK(hp.rope_dim == 8);  // partial: half the head rotates
  CHECK(hp.expert_gating == ExpertGating::sigmoid);
  CHECK(hp.n_layer_dense_lead == 1);
  CHECK(hp.n_expert_groups == 4);
  CHECK(hp.n_group_used == 2);
  CHECK(hp.n_expert_shared == 1);

  // The file has the NextN tensors; the model reads none of them.
  const auto nextn = [](const gguf::TensorInfo& t) { return t.name.rfind("blk.3.", 0) == 0; };
  CHECK(std::count_if(mw->files().tensors().begin(), mw->files().tensors().end(), nextn) > 0);
  CHECK(std::none_of(mw->tensors().begin(), mw->tensors().end(), nextn));
  CHECK(mw->tensors().size() == mn->tensors().size());
  CHECK(mw->n_params() == mn->n_params());
  // One fused projection: Q (4 heads) + K + V (2 heads each) of 16.
  const auto qkv = std::find_if(mn->files().tensors().begin(), mn->files().tensors().end(),
                                [](const gguf::TensorInfo& t) { return t.name == "blk.0.attn_qkv.weight"; });
  REQUIRE(qkv != mn->files().tensors().end());
  CHECK(qkv->dims == std::vector<uint64_t>{64, 128});
  // KV cache for the 3 layers that run: (K + V of 2 heads of 16) in F16.
  CHECK(mw->sequence_state().bytes_per_token() == 3u * (2u * 2u * 16u) * 2u);

  REQUIRE(mw->streaming().planned);
  const stream::BudgetPlan& pw = mw->streaming().plan;
  const stream::BudgetPlan& pn = mn->streaming().plan;
  CHECK(pw.resident_tensors == pn.resident_tensors);
  CHECK(pw.resident_tensors + pw.streamed_tensors == mw->tensors().size());
  CHECK(pw.streamed_bytes == pn.streamed_bytes);
  CHECK(pw.streamed_experts == 2u * 8u);  // 2 MoE layers of 8
  CHECK(mw->streaming().layout.n_moe_layers() == 2);

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

TEST_CASE("bailingmoe2: a prompt in one pass equals it token by token, and two sequences batched equal each alone") {
  const ModelOptions mo{.engine = {.context = 64, .max_sequences = 2, .max_batch_tokens = 32}};
  auto m = Model::load(ling(1), mo);
  const int64_t V = m->n_vocab();
  const std::vector<int32_t> a = prompt(V, 12, 0), b = prompt(V, 9, 1);

  auto alone = [&](const std::vector<int32_t>& toks) {
    auto one = Model::load(ling(1), mo);
    std::vector<float> logits;
    one->forward(toks, 0, true, logits);
    return logits;
  };
  const std::vector<float> la = alone(a), lb = alone(b);

  std::vector<float> step, seq_a;
  for (size_t t = 0; t < a.size(); ++t) {
    m->forward(std::span(a).subspan(t, 1), static_cast<int64_t>(t), false, step);
    seq_a.insert(seq_a.end(), step.begin(), step.end());
  }
  const double d_steps = test::max_abs_diff(seq_a, la);
  MESSAGE("max |one pass - token by token| = " << d_steps);
  CHECK(d_steps < 1e-3);

  auto both = Model::load(ling(1), mo);
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
  CHECK(d_batch == 0.0);
}

TEST_CASE("bailingmoe2: experts streamed through a 3-slot cache give the mapping's logits") {
  test::check_streamed_equals_mapped(ling(1), 12);
  const auto streamed = test::streamed_logits(ling(1), "uring", 12);
  CHECK(streamed.first == test::streamed_logits(ling(1), "mmap", 12).first);
  CHECK(streamed.second.cache.evictions > 0);
}

TEST_CASE("bailingmoe2: runs under a memory budget smaller than the file") {
  const std::string path =
      test::make_model("bailingmoe2-stream",
                       "--arch bailingmoe2 --n-embd 512 --n-layer 6 --n-head 8 --n-head-kv 2 --n-ff 1024 "
                       "--n-expert 32 --n-expert-used 4 --ling-n-ff-expert 1024 --ling-n-expert-group 4 "
                       "--ling-n-expert-group-used 2 --type Q4_0 --seed 63");
  const uint64_t budget = 100ull << 20;
  REQUIRE(std::filesystem::file_size(path) > 1.5 * budget);
  test::check_streams_within_budget(path, 100, "uring", 8);
}
