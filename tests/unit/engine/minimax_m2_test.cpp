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
#include "tests/unit/engine/streaming_checks.h"
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

std::vector<int32_t> prompt(int64_t n_vocab, int n, int salt) { return test::some_tokens(n_vocab, n, salt * 101); }

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
  const ModelOptions mo{.engine = {.context = 64, .max_sequences = 2, .max_batch_tokens = 32}};
  auto m = Model::load(minimax(), mo);
  const int64_t V = m->n_vocab();
  const std::vector<int32_t> a = prompt(V, 12, 0), b = prompt(V, 9, 1);

  auto alone = [&](const std::vector<int32_t>& toks) {
    auto one = Model::load(minimax(), mo);
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

  auto both = Model::load(minimax(), mo);
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

TEST_CASE("minimax-m2: experts streamed through a 3-slot cache give the mapping's logits") {
  test::check_streamed_equals_mapped(minimax(), 12);
  const auto streamed = test::streamed_logits(minimax(), "uring", 12);
  CHECK(streamed.first == test::streamed_logits(minimax(), "mmap", 12).first);
  CHECK(streamed.second.cache.evictions > 0);
}

// The real CLI in a fresh process: a file about twice the budget runs, its peak
// RSS stays within the budget, and the experts were streamed.
TEST_CASE("minimax-m2: runs under a memory budget smaller than the file") {
  const std::string path =
      test::make_model("minimax-m2-stream",
                       "--arch minimax-m2 --n-embd 512 --n-layer 6 --n-head 8 --n-head-kv 2 --mm-head-dim 64 "
                       "--n-ff 1024 --n-expert 32 --n-expert-used 4 --type Q4_0 --seed 53");
  const uint64_t budget = 100ull << 20;
  REQUIRE(std::filesystem::file_size(path) > 1.5 * budget);
  test::check_streams_within_budget(path, 100, "uring", 8);
}
