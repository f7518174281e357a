// deepseek4 (DeepSeek V4) on generated models (the golden in tests/conformance
// checks the arithmetic against the reference): the file's shape as read
// (compression ratios, hash-routed layers as I32 tables, sqrtsoftplus, the
// clamp), a prompt in one pass equal to it token by token and two sequences
// batched equal to each alone across compressed blocks of 4 and 128, and the
// routed experts streamed
// through a small cache and under a budget smaller than the file with the
// mapping's logits.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "common/error.h"
#include "engine/model/model.h"
#include "tests/unit/engine/family_checks.h"
#include "tests/unit/engine/test_models.h"

using namespace ns;

namespace {

// Blocks compressing by 0, 4 and 128, the first hash-routed; a window of 8, the indexer keeping 4 blocks.
std::string v4(const std::string& types = "--type Q8_0") {
  return test::make_model("deepseek4",
                          "--arch deepseek4 --n-embd 64 --n-layer 3 --n-head 4 --n-ff 32 --n-expert 8 "
                          "--n-expert-used 2 --dsv4-head-dim 32 --dsv4-rope-dim 16 --dsv4-q-lora-rank 32 "
                          "--dsv4-o-lora-rank 16 --dsv4-ratios 0,4,128 --dsv4-hash-layers 1 "
                          "--dsv4-window 8 --dsv4-top-k 4 " +
                              types + " --seed 71");
}

std::vector<int32_t> prompt(int64_t n_vocab, int n, int salt) { return test::some_tokens(n_vocab, n, salt * 101); }

}  // namespace

TEST_CASE("deepseek4: the file's shape as read: ratios, hash tables, sqrtsoftplus, the clamp") {
  auto m = Model::load(v4(), {.engine = {.context = 32, .max_batch_tokens = 16}});
  const Hparams& hp = m->hparams();
  CHECK(hp.dsv4.hc == 4);
  CHECK(hp.dsv4.compress_ratios == std::vector<int64_t>{0, 4, 128});
  CHECK(hp.dsv4.hash_layers == 1);
  CHECK(hp.expert_gating == ExpertGating::sqrt_softplus);
  CHECK(hp.swiglu_clamp_exp.size() == 3);
  CHECK(hp.n_swa == 8);
  const auto info = [&](const std::string& name) {
    for (const auto& t : m->files().tensors())
      if (t.name == name) return t;
    FAIL("no tensor " << name);
    return gguf::TensorInfo{};
  };
  CHECK(info("blk.0.ffn_gate_tid2eid.weight").type == gguf::GgmlType::I32);
  CHECK(info("blk.1.indexer.attn_q_b.weight").dims == std::vector<uint64_t>{32, 8 * 64});
  CHECK(info("blk.2.attn_compressor_ape.weight").dims == std::vector<uint64_t>{32, 128});
  // Every tensor of the file is read.
  CHECK(m->tensors().size() == m->files().tensors().size());
}

TEST_CASE("deepseek4: a prompt in one pass equals it token by token, and two sequences batched equal each alone") {
  // 140 and 131 tokens: both cross a block of 128 and many blocks of 4 beyond the window and the top-k.
  test::check_one_pass_and_batched(
      "deepseek4", v4(),
      {.options = {.engine = {.context = 160, .max_sequences = 2, .max_batch_tokens = 320}},
       .a_tokens = 140,
       .b_tokens = 131});
}

TEST_CASE("deepseek4: the cache as the reference lays it out: a raw ring, compact blocks, compressor rings") {
  // Pooled (a prefix-cache spare): the blocks of sequences with ranges not aligned to a ratio must not collide.
  auto m =
      Model::load(v4(), {.engine = {.context = 256, .max_sequences = 2, .max_batch_tokens = 16, .prefix_cache = 1}});
  const SequenceState& st = m->sequence_state();
  const uint64_t hd = 32, ihd = 64, all = 3;                    // head, indexer key; two sequences and a spare
  CHECK(st.n_sliding_layers() == 3);                            // every layer: the raw keys of the window
  for (int64_t il = 0; il < 3; ++il) CHECK(st.rows(il) == 24);  // window 8 - 1 + 16, rounded up to 8
  // Per token: a ratio-4 block (its key and the indexer's) over 4, a ratio-128 key over 128 (rounded up).
  CHECK(st.bytes_per_token() == (hd + ihd) * 2 / 4 + 1);
  // Per sequence: the rings of raw keys, and the compressors' state (kv and score, F32): 8 positions of
  // 2 x head_dim and of 2 x the indexer's at ratio 4, 128 positions of head_dim at ratio 128.
  const uint64_t rings = 3 * 24 * hd * 2 + (8 * 2 * (2 * hd) + 8 * 2 * (2 * ihd) + 128 * 2 * hd) * 4;
  CHECK(st.sliding_bytes_per_sequence() == rings);
  const uint64_t pool = static_cast<uint64_t>(st.pool_rows());
  CHECK(st.attention_bytes() == pool / 4 * (hd + ihd) * 2 + (pool + 127) / 128 * hd * 2 + all * rings);
  CHECK(st.attention_bytes() < pool * 3 * 2 * (10 * hd + 9 * ihd) / 8);  // the former row per position and layer / 8

  // Sequences reserved at odd offsets run as alone (their blocks are their own); passes of 16 tokens at most.
  const int64_t V = m->n_vocab();
  const std::vector<int32_t> a = prompt(V, 150, 2), b = prompt(V, 137, 3);
  const auto feed = [&](Model& model, int32_t seq, const std::vector<int32_t>& toks, size_t from, size_t to) {
    std::vector<float> all, logits;
    for (size_t at = from; at < to; at += 16) {
      std::vector<BatchToken> batch;
      for (size_t t = at; t < std::min(to, at + 16); ++t)
        batch.push_back({toks[t], seq, static_cast<int32_t>(t), true});
      model.forward_batch(batch, logits);
      all.insert(all.end(), logits.begin(), logits.end());
    }
    return all;
  };
  auto one = Model::load(v4(), {.engine = {.context = 256, .max_batch_tokens = 16}});
  const std::vector<float> la = feed(*one, 0, a, 0, a.size()), lb = feed(*one, 0, b, 0, b.size());
  REQUIRE(m->reserve_rows(2, 5));  // the spare first: the others' ranges start at 5 and 155
  REQUIRE(m->reserve_rows(0, 150));
  REQUIRE(m->reserve_rows(1, 137));
  std::vector<float> ma, mb, logits;
  for (size_t at = 0; at < a.size(); at += 8) {
    std::vector<BatchToken> batch;
    for (size_t t = at; t < at + 8; ++t) {
      if (t < a.size()) batch.push_back({a[t], 0, static_cast<int32_t>(t), true});
      if (t < b.size()) batch.push_back({b[t], 1, static_cast<int32_t>(t), true});
    }
    m->forward_batch(batch, logits);
    for (size_t i = 0; i < batch.size(); ++i) {
      auto& dst = batch[i].seq == 0 ? ma : mb;
      dst.insert(dst.end(), logits.begin() + static_cast<int64_t>(i) * V,
                 logits.begin() + static_cast<int64_t>(i + 1) * V);
    }
  }
  CHECK(test::max_abs_diff(ma, la) == 0.0);
  CHECK(test::max_abs_diff(mb, lb) == 0.0);

  // A copy after P tokens (mid-block: the compressors' rings carry the block's first positions) continues as
  // the sequence it was copied from: blocks, rings and the raw window all copied. The copy must be of the
  // exact state after P (SequenceState::copy_sequence), so sequence 0 is fed P tokens again first.
  const size_t P = 130;
  REQUIRE(m->reserve_rows(1, 150));
  feed(*m, 0, a, 0, P);
  m->copy_sequence(0, 1, static_cast<int64_t>(P));
  feed(*m, 0, b, 0, 40);  // sequence 0 moves on: the copy is its own
  const std::vector<float> tail = feed(*m, 1, a, P, a.size());
  CHECK(test::max_abs_diff(tail, std::vector<float>(la.begin() + static_cast<int64_t>(P) * V, la.end())) == 0.0);
}

TEST_CASE("deepseek4: experts streamed through a 3-slot cache give the mapping's logits") {
  test::check_small_cache_streaming("deepseek4", v4());
}

TEST_CASE("deepseek4: runs under a memory budget a third of the file") {
  const std::string path =
      test::make_model("deepseek4-stream",
                       "--arch deepseek4 --n-embd 512 --n-layer 6 --n-head 8 --n-ff 1024 --n-expert 64 "
                       "--n-expert-used 4 --dsv4-ratios 0,4,128,4,128,4 --dsv4-o-groups 4 --type Q4_0 --seed 73");
  test::check_runs_under_budget("deepseek4", path, 100, 3, "uring", 8);
}
