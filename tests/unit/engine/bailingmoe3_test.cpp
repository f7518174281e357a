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
#include "tests/unit/engine/streaming_checks.h"
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

std::vector<int32_t> prompt(int64_t n_vocab, int n, int salt) { return test::some_tokens(n_vocab, n, salt * 101); }

const gguf::TensorInfo* tensor(const Model& m, const std::string& name) {
  const auto& ts = m.files().tensors();
  const auto it = std::find_if(ts.begin(), ts.end(), [&](const gguf::TensorInfo& t) { return t.name == name; });
  return it == ts.end() ? nullptr : &*it;
}

}  // namespace

TEST_CASE("bailingmoe3: the shape as read; the NextN block is skipped and the file without it is the same model") {
  const std::string with = ling3(1), without = ling3(0);
  REQUIRE(std::filesystem::file_size(with) > std::filesystem::file_size(without));
  const ModelOptions mo{.engine = {.threads = 1, .context = 32, .max_batch_tokens = 16, .memory_budget = 1ull << 30},
                        .plan_only = true};
  auto mw = Model::load(with, mo);
  auto mn = Model::load(without, mo);

  const Hparams& hp = mw->hparams();
  CHECK(hp.n_layer == 3);  // block_count 4 less the NextN block
  CHECK(hp.n_layer_nextn == 1);
  CHECK(mn->hparams().n_layer_nextn == 0);
  CHECK(hp.n_head_kv_layers == std::vector<int64_t>{0, 0, 1, 1});  // one per block, the NextN block MLA
  CHECK(hp.rope_type == RopeType::norm);
  CHECK(hp.rope_dim == 8);
  CHECK(hp.expert_gating == ExpertGating::sigmoid);
  CHECK(hp.expert_weights_norm);
  CHECK(hp.kda_gate_lower_bound == -5.0f);
  CHECK(hp.n_ff_shexp == 96);

  // KDA: full-rank decay and output gates; ssm_a [1, n_head]. MLA: the per-head gate, split k_b/v_b.
  CHECK(tensor(*mn, "blk.0.ssm_f_a.weight")->dims == std::vector<uint64_t>{64, 64});
  CHECK(tensor(*mn, "blk.0.ssm_f_b.weight") == nullptr);
  CHECK(tensor(*mn, "blk.0.ssm_g_a.weight")->dims == std::vector<uint64_t>{64, 64});
  CHECK(tensor(*mn, "blk.0.ssm_a")->dims == std::vector<uint64_t>{1, 4});
  CHECK(tensor(*mn, "blk.2.attn_gate.weight")->dims == std::vector<uint64_t>{64, 4});
  CHECK(tensor(*mn, "blk.2.attn_k_b.weight") != nullptr);
  CHECK(tensor(*mn, "blk.1.ffn_up_shexp.weight")->dims == std::vector<uint64_t>{64, 96});

  // The file has the NextN tensors; the model reads none of them.
  const auto nextn = [](const gguf::TensorInfo& t) { return t.name.rfind("blk.3.", 0) == 0; };
  CHECK(std::count_if(mw->files().tensors().begin(), mw->files().tensors().end(), nextn) > 0);
  CHECK(tensor(*mw, "blk.3.nextn.eh_proj.weight") != nullptr);
  CHECK(std::none_of(mw->tensors().begin(), mw->tensors().end(), nextn));
  CHECK(mw->tensors().size() == mn->tensors().size());
  CHECK(mw->n_params() == mn->n_params());

  REQUIRE(mw->streaming().planned);
  const stream::BudgetPlan& pw = mw->streaming().plan;
  const stream::BudgetPlan& pn = mn->streaming().plan;
  CHECK(pw.resident_tensors == pn.resident_tensors);
  CHECK(pw.streamed_bytes == pn.streamed_bytes);
  CHECK(pw.streamed_experts == 2u * 8u);  // 2 MoE layers of 8

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

TEST_CASE("bailingmoe3: a prompt in one pass equals it token by token, and two sequences batched equal each alone") {
  for (const std::string extra : {"--type Q8_0", "--ling3-q-lora-rank 32 --type F32"}) {
    CAPTURE(extra);
    const std::string path = ling3(1, extra);
    const ModelOptions mo{.engine = {.context = 64, .max_sequences = 2, .max_batch_tokens = 32}};
    auto m = Model::load(path, mo);
    const int64_t V = m->n_vocab();
    const std::vector<int32_t> a = prompt(V, 12, 0), b = prompt(V, 9, 1);

    auto alone = [&](const std::vector<int32_t>& toks) {
      auto one = Model::load(path, mo);
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

    auto both = Model::load(path, mo);
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
      dst.insert(dst.end(), mixed.begin() + static_cast<int64_t>(i) * V,
                 mixed.begin() + static_cast<int64_t>(i + 1) * V);
    }
    const double d_batch = std::max(test::max_abs_diff(ma, la), test::max_abs_diff(mb, lb));
    MESSAGE("max |batched - alone| = " << d_batch);
    CHECK(d_batch == 0.0);
  }
}

TEST_CASE("bailingmoe3: experts streamed through a 3-slot cache give the mapping's logits") {
  test::check_streamed_equals_mapped(ling3(1), 12);
  const auto streamed = test::streamed_logits(ling3(1), "uring", 12);
  CHECK(streamed.first == test::streamed_logits(ling3(1), "mmap", 12).first);
  CHECK(streamed.second.cache.evictions > 0);
}

TEST_CASE("bailingmoe3: runs under a memory budget smaller than the file") {
  const std::string path =
      test::make_model("bailingmoe3-stream",
                       "--arch bailingmoe3 --n-embd 512 --n-layer 6 --n-head 8 --n-ff 1024 --n-expert 32 "
                       "--n-expert-used 4 --ling3-group 3 --ling3-kda-head-dim 64 --ling3-n-ff-expert 1024 "
                       "--ling3-n-ff-shexp 1024 --type Q4_0 --seed 73");
  const uint64_t budget = 100ull << 20;
  REQUIRE(std::filesystem::file_size(path) > 1.5 * budget);
  test::check_streams_within_budget(path, 100, "uring", 8);
}
