// gpt-oss specifics: the metadata the generator writes read back (sliding
// pattern, YaRN, head size), the sliding layers' ring cache (its size, and
// logits unchanged when the ring wraps), several sequences in one forward
// pass = each alone, experts streamed through a small cache bit for bit, and
// a model larger than its memory budget run under it. Logits against the
// reference are in tests/conformance (generated-model goldens); the engine's
// batched = alone and resume in engine_test.cpp.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "engine/model/model.h"
#include "tests/unit/engine/family_checks.h"
#include "tests/unit/engine/streaming_checks.h"
#include "tests/unit/engine/test_models.h"

using namespace ns;

namespace {

std::vector<int32_t> tokens(int n, int salt, int64_t n_vocab) { return test::some_tokens(n_vocab, n, salt * 131); }

// Every position's logits of `toks` fed in chunks of `chunk` tokens.
std::vector<float> chunked_logits(Model& m, const std::vector<int32_t>& toks, size_t chunk) {
  std::vector<float> all, part;
  for (size_t at = 0; at < toks.size(); at += chunk) {
    const size_t n = std::min(chunk, toks.size() - at);
    m.forward(std::span(toks).subspan(at, n), static_cast<int64_t>(at), true, part);
    all.insert(all.end(), part.begin(), part.end());
  }
  return all;
}

}  // namespace

TEST_CASE("gpt-oss: metadata read back, and the sliding layers keep a ring of rows, not the context") {
  const ModelOptions mo{.engine = {.context = 256, .max_sequences = 2, .max_batch_tokens = 4}};
  auto m = Model::load(test::gpt_oss_model(), mo);
  const Hparams& hp = m->hparams();
  CHECK(hp.n_swa == 8);
  CHECK(hp.swa_layers == std::vector<uint8_t>{1, 0, 1, 0});  // the reference's default: even layers slide
  CHECK(hp.head_dim == 32);
  CHECK(hp.rope_scaling == RopeScaling::yarn);
  CHECK(hp.rope_freq_scale == doctest::Approx(1.0 / 32));
  CHECK(hp.rope_base_swa == hp.rope_base);
  const SequenceState& st = m->sequence_state();
  CHECK(st.n_sliding_layers() == 2);
  CHECK(st.rows(0) == 16);                       // window - 1 + max_batch = 11, rounded up to 16
  CHECK(st.rows(1) == 256);                      // a full layer: the context
  const uint64_t kv_row = 2u * (2u * 32u) * 2u;  // K and V of 2 heads of 32, F16
  CHECK(st.bytes_per_token() == 2u * kv_row);    // the two full layers only
  CHECK(st.sliding_bytes_per_sequence() == 2u * 16u * kv_row);
  CHECK(st.attention_bytes() == 2u * (256u * st.bytes_per_token() + st.sliding_bytes_per_sequence()));

  // attention.sliding_window_pattern = 3 written: layer il slides when il % 3 < 2.
  const std::string period3 =
      test::make_model("gpt-oss-period3",
                       "--arch gpt-oss --n-embd 64 --n-layer 4 --n-head 4 --n-head-kv 2 --oss-head-dim 32 --n-ff 64 "
                       "--n-expert 8 --n-expert-used 2 --oss-sliding-window 8 --oss-swa-period 3 --oss-yarn-factor 0 "
                       "--oss-expert-bias false --type Q8_0 --seed 42");
  auto p3 = Model::load(period3, mo);
  CHECK(p3->hparams().swa_layers == std::vector<uint8_t>{1, 1, 0, 1});
  CHECK(p3->hparams().rope_scaling == RopeScaling::none);
  CHECK(p3->sequence_state().n_sliding_layers() == 3);
  // Runs without the optional expert biases, past the window.
  for (float v : chunked_logits(*p3, tokens(20, 6, p3->n_vocab()), 4)) REQUIRE(std::isfinite(v));
}

TEST_CASE("gpt-oss: logits do not change when a sliding layer's ring wraps") {
  // max_batch 4: rings of 16 rows, wrapped several times by 70 tokens in
  // chunks of 4; max_batch 128: rings of 136 rows (no wrap), one forward pass.
  const std::vector<int32_t> toks = tokens(70, 1, 512);
  ModelOptions mo{.engine = {.context = 256, .max_batch_tokens = 4}};
  auto small = Model::load(test::gpt_oss_model(), mo);
  REQUIRE(small->sequence_state().rows(0) == 16);
  const std::vector<float> wrapped = chunked_logits(*small, toks, 4);
  mo.engine.max_batch_tokens = 128;
  auto big = Model::load(test::gpt_oss_model(), mo);
  const std::vector<float> straight = chunked_logits(*big, toks, 4);
  CHECK(wrapped == straight);  // same chunks, so the same arithmetic: only the rows differ
  std::vector<float> whole;
  big->forward(toks, 0, true, whole);
  REQUIRE(whole.size() == straight.size());
  double max_diff = 0;
  for (size_t i = 0; i < whole.size(); ++i) max_diff = std::max(max_diff, double(std::fabs(whole[i] - straight[i])));
  MESSAGE("whole prompt vs chunks of 4: max |dlogit| " << max_diff);
  CHECK(max_diff < 1e-3);
}

TEST_CASE("gpt-oss: several sequences in one forward pass give each the logits it gets alone") {
  auto m = Model::load(test::gpt_oss_model(), {.engine = {.context = 128, .max_sequences = 3, .max_batch_tokens = 96}});
  const int64_t n_vocab = m->n_vocab();
  const std::vector<std::vector<int32_t>> prompts = {tokens(30, 2, n_vocab), tokens(19, 3, n_vocab),
                                                     tokens(25, 4, n_vocab)};
  // Alone: each in sequence slot 0, from position 0.
  std::vector<std::vector<float>> alone;
  for (const auto& p : prompts) {
    std::vector<float> l;
    m->forward(p, 0, true, l);
    alone.push_back(l);
  }
  // Together: interleaved in one batch, each in its own slot.
  std::vector<BatchToken> batch;
  std::vector<std::pair<size_t, size_t>> where;  // (prompt, position) of each row
  for (size_t i = 0; i < 30; ++i)
    for (size_t s = 0; s < prompts.size(); ++s)
      if (i < prompts[s].size()) {
        batch.push_back({prompts[s][i], static_cast<int32_t>(s), static_cast<int32_t>(i), true});
        where.emplace_back(s, i);
      }
  std::vector<float> together;
  m->forward_batch(batch, together);
  double max_diff = 0;
  for (size_t r = 0; r < where.size(); ++r) {
    const auto [s, i] = where[r];
    for (int64_t v = 0; v < n_vocab; ++v)
      max_diff = std::max(max_diff, double(std::fabs(together[r * n_vocab + v] - alone[s][i * n_vocab + v])));
  }
  MESSAGE("max |together - alone| = " << max_diff);
  CHECK(max_diff < 1e-4);
}

TEST_CASE("gpt-oss: experts (with their resident biases) streamed through a small cache give the mapping's logits") {
  test::check_streamed_equals_mapped(test::gpt_oss_model(), 20);
}

TEST_CASE("gpt-oss: peak RSS stays within memory_budget for a model larger than it") {
  // ~215 MB: 8 layers of 32 MXFP4 experts (1024 x 512), Q8_0 elsewhere.
  const std::string path =
      test::make_model("gpt-oss-stream",
                       "--arch gpt-oss --n-embd 1024 --n-layer 8 --n-head 16 --n-head-kv 4 --oss-head-dim 64 "
                       "--n-ff 512 --n-expert 32 --n-expert-used 4 --oss-sliding-window 16 --type Q8_0 "
                       "--tensor-type _exps=MXFP4 --seed 43");
  test::check_runs_under_budget("gpt-oss", path, 120, 1.5, "pread", 8);
}
