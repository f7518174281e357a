// The checks every family's tests share (contract in family_checks.h).
#include "tests/unit/engine/family_checks.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <span>
#include <vector>

#include "tests/unit/engine/streaming_checks.h"
#include "tests/unit/engine/test_models.h"

namespace ns::test {

void check_one_pass_and_batched(const std::string& family, const std::string& path, const PassChecks& c) {
  CAPTURE(family);
  CAPTURE(path);
  auto m = Model::load(path, c.options);
  const int64_t V = m->n_vocab();
  const std::vector<int32_t> a = some_tokens(V, c.a_tokens, c.a_offset), b = some_tokens(V, c.b_tokens, c.b_offset);

  // Alone: each prompt in one pass, sequence 0 of a fresh model.
  auto alone = [&](const std::vector<int32_t>& toks) {
    auto one = Model::load(path, c.alone.value_or(c.options));
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
  const double d_steps = max_abs_diff(seq_a, la);
  MESSAGE(family << ": max |one pass - token by token| = " << d_steps);
  CHECK(d_steps < c.steps_below);

  // Both sequences interleaved in one batch, on a fresh model.
  auto both = Model::load(path, c.options);
  std::vector<BatchToken> batch;
  for (size_t t = 0; t < std::max(a.size(), b.size()); ++t) {
    if (t < a.size()) batch.push_back({a[t], 0, static_cast<int32_t>(t), true});
    if (t < b.size()) batch.push_back({b[t], 1, static_cast<int32_t>(t), true});
  }
  std::vector<float> mixed, ma, mb;
  both->forward_batch(batch, mixed);
  for (size_t i = 0; i < batch.size(); ++i) {
    auto& dst = batch[i].seq == 0 ? ma : mb;
    dst.insert(dst.end(), mixed.begin() + static_cast<int64_t>(i) * V, mixed.begin() + static_cast<int64_t>(i + 1) * V);
  }
  const double d_batch = std::max(max_abs_diff(ma, la), max_abs_diff(mb, lb));
  MESSAGE(family << ": max |batched - alone| = " << d_batch);
  if (c.batch_below) {
    CHECK(d_batch < *c.batch_below);
  } else {
    CHECK(d_batch == 0.0);
  }
}

void check_small_cache_streaming(const std::string& family, const std::string& path, int prompt_tokens) {
  CAPTURE(family);
  check_streamed_equals_mapped(path, prompt_tokens);
  const auto streamed = streamed_logits(path, "uring", prompt_tokens);
  CHECK(streamed.first == streamed_logits(path, "mmap", prompt_tokens).first);
  CHECK(streamed.second.cache.evictions > 0);
}

void check_runs_under_budget(const std::string& family, const std::string& path, int budget_mib,
                             double file_over_budget, const std::string& io_mode, int n_tokens) {
  CAPTURE(family);
  const uint64_t budget = static_cast<uint64_t>(budget_mib) << 20;
  REQUIRE(std::filesystem::file_size(path) > file_over_budget * budget);
  check_streams_within_budget(path, budget_mib, io_mode, n_tokens);
}

NextnModels check_nextn_skipped(const std::string& family, const std::string& with, const std::string& without,
                                int64_t n_layer, uint64_t streamed_experts) {
  CAPTURE(family);
  REQUIRE(std::filesystem::file_size(with) > std::filesystem::file_size(without));
  const ModelOptions mo{.engine = {.threads = 1, .context = 32, .max_batch_tokens = 16, .memory_budget = 1ull << 30},
                        .plan_only = true};
  NextnModels r{Model::load(with, mo), Model::load(without, mo)};
  const Model& mw = *r.with;
  const Model& mn = *r.without;
  CHECK(mw.hparams().n_layer == n_layer);  // block_count less the NextN block
  CHECK(mw.hparams().n_layer_nextn == 1);
  CHECK(mn.hparams().n_layer_nextn == 0);

  // The file has the NextN tensors; the model reads none of them.
  const std::string block = "blk." + std::to_string(n_layer) + ".";
  const auto nextn = [&](const gguf::TensorInfo& t) { return t.name.rfind(block, 0) == 0; };
  CHECK(std::count_if(mw.files().tensors().begin(), mw.files().tensors().end(), nextn) > 0);
  CHECK(std::none_of(mw.tensors().begin(), mw.tensors().end(), nextn));
  CHECK(mw.tensors().size() == mn.tensors().size());
  CHECK(mw.n_params() == mn.n_params());

  // The plan: the same resident tensors and streamed experts with or without the block.
  REQUIRE(mw.streaming().planned);
  const stream::BudgetPlan& pw = mw.streaming().plan;
  const stream::BudgetPlan& pn = mn.streaming().plan;
  CHECK(pw.resident_tensors == pn.resident_tensors);
  CHECK(pw.streamed_bytes == pn.streamed_bytes);
  CHECK(pw.streamed_experts == streamed_experts);

  // And it computes the same logits.
  ModelOptions run;
  run.engine.context = 32;
  run.engine.max_batch_tokens = 16;
  auto rw = Model::load(with, run);
  auto rn = Model::load(without, run);
  const std::vector<int32_t> toks = some_tokens(rw->n_vocab(), 10, 202);
  std::vector<float> lw, ln;
  rw->forward(toks, 0, true, lw);
  rn->forward(toks, 0, true, ln);
  CHECK(lw == ln);
  return r;
}

std::vector<float> prompt_logits(const std::string& path, const std::vector<int32_t>& toks) {
  auto m = Model::load(path, {.engine = {.context = 64, .max_batch_tokens = 32}});
  std::vector<float> out;
  m->forward(toks, 0, true, out);
  return out;
}

double max_diff_rows(const std::vector<float>& a, const std::vector<float>& b, int64_t V, int64_t p0, int64_t p1) {
  double d = 0;
  for (int64_t i = p0 * V; i < p1 * V; ++i) d = std::max(d, std::fabs(double(a[i]) - b[i]));
  return d;
}

}  // namespace ns::test
