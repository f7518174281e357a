// What the tests of every architecture family check alike, written once; each
// check names the family (CAPTURE and its MESSAGE lines), so a failure says whose:
// - check_one_pass_and_batched(): a prompt in one pass equals it fed token by
//   token, and two sequences interleaved in one forward_batch equal each one
//   run alone on a fresh model.
// - check_small_cache_streaming(): the routed experts read through a cache of
//   3 slots (pread and uring) give the mapping's logits bit for bit, and the
//   cache evicted.
// - check_runs_under_budget(): a file `file_over_budget` times larger than the
//   budget runs under it in the real CLI (streaming_checks.h).
// - check_nextn_skipped(): a file with one NextN block against the same model
//   without it: the block is in the file, neither loaded nor planned, and the
//   logits are the same. It returns the two plan-only models for the family's
//   own checks (its hparams, its tensors).
// - prompt_logits() and max_diff_rows(): a prompt's logits in one pass, and how
//   far two such runs are over a range of positions (the sparse-attention
//   families: equal to the dense twin until the selection begins).
// The family's model files come from its test (test_models.h's make_model).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/model/model.h"

namespace ns::test {

struct PassChecks {
  ModelOptions options{.engine = {.context = 64, .max_sequences = 2, .max_batch_tokens = 32}};
  std::optional<ModelOptions> alone;  // the alone runs' options where they differ from `options`
  // The two prompts: some_tokens(n_vocab, tokens, offset) (test_models.h).
  int a_tokens = 12, b_tokens = 9;
  int64_t a_offset = 0, b_offset = 101;
  double steps_below = 1e-3;          // |one pass - token by token| < this
  std::optional<double> batch_below;  // |batched - alone| < this; none: exactly 0
};
void check_one_pass_and_batched(const std::string& family, const std::string& path, const PassChecks& c = {});

void check_small_cache_streaming(const std::string& family, const std::string& path, int prompt_tokens = 12);

void check_runs_under_budget(const std::string& family, const std::string& path, int budget_mib,
                             double file_over_budget, const std::string& io_mode, int n_tokens);

struct NextnModels {
  std::unique_ptr<Model> with, without;  // plan only: a 1 GiB budget, a context of 32, passes of 16 tokens
};
// `n_layer`: the layers that run (the NextN block is block n_layer); `streamed_experts`: the routed experts planned.
NextnModels check_nextn_skipped(const std::string& family, const std::string& with, const std::string& without,
                                int64_t n_layer, uint64_t streamed_experts);

// Every position's logits of `toks` in one pass on a fresh model (a context of 64, passes of 32 tokens).
std::vector<float> prompt_logits(const std::string& path, const std::vector<int32_t>& toks);
// max |a - b| over positions [p0, p1) of V logits each.
double max_diff_rows(const std::vector<float>& a, const std::vector<float>& b, int64_t V, int64_t p0, int64_t p1);

}  // namespace ns::test
