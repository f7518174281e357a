// Generates small random-weight models for engine tests with the project's
// own generator binary (built alongside the tests), cached per build; and what
// the engine tests do with them alike: prompts, greedy and unfiltered sampling,
// logits compared, requests run through a batch, the CLI run in a fresh process.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <functional>
#include <filesystem>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include <unistd.h>

#include "engine/api/generation.h"
#include "engine/model/model.h"

namespace ns::test {

inline std::string make_model(const std::string& name, const std::string& flags) {
  const std::filesystem::path dir = std::filesystem::path(NS_BINARY_DIR) / "test-models";
  std::filesystem::create_directories(dir);
  // One file per name and flags, made again when the generator binary is newer than it: a changed generator
  // never leaves a stale model, and rebuilds do not add files.
  const std::filesystem::path generator = std::filesystem::path(NS_BINARY_DIR) / "tools" / "nightshift-make-model";
  const size_t key = std::hash<std::string>{}(flags);
  const std::filesystem::path out = dir / (name + "-" + std::to_string(key % 1000000007) + ".gguf");
  std::error_code ec;
  const auto made = std::filesystem::last_write_time(out, ec);
  if (ec || made < std::filesystem::last_write_time(generator)) {
    const std::string tmp = out.string() + "." + std::to_string(getpid()) + ".tmp";  // test binaries run in parallel
    const std::string cmd = generator.string() + " " + flags + " --out " + tmp + " > /dev/null";
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("model generator failed: " + cmd);
    std::filesystem::rename(tmp, out);
  }
  return out.string();
}

// Small dense and MoE llama models.
inline std::string dense_model() {
  return make_model("dense-q8",
                    "--arch llama --n-embd 64 --n-layer 2 --n-head 4 --n-head-kv 2 --n-ff 128 --type Q8_0 --seed 3");
}
inline std::string moe_model() {
  return make_model("moe-q4",
                    "--arch llama --n-embd 64 --n-layer 2 --n-head 4 --n-head-kv 2 --n-ff 96 --n-expert 8 "
                    "--n-expert-used 2 --type Q4_0 --seed 4");
}

// A mixed K-quant MoE model, as the K-quant GGUFs people download are laid out.
inline std::string kquant_moe_model() {
  return make_model("moe-kquant",
                    "--arch llama --n-embd 256 --n-layer 2 --n-head 4 --n-head-kv 2 --n-ff 256 "
                    "--n-expert 4 --n-expert-used 2 --type Q4_K --tensor-type token_embd=Q8_0 "
                    "--tensor-type attn_v=Q6_K --tensor-type ffn_down=Q5_K --tensor-type attn_q=Q3_K "
                    "--tensor-type attn_k=Q2_K --seed 9");
}

// MoE with MXFP4 experts and Q8_0 elsewhere, as the MXFP4 MoE releases are laid out.
inline std::string mxfp4_moe_model() {
  return make_model("moe-mxfp4",
                    "--arch llama --n-embd 128 --n-layer 2 --n-head 4 --n-head-kv 2 --n-ff 96 "
                    "--n-expert 8 --n-expert-used 2 --type Q8_0 --tensor-type _exps=MXFP4 --seed 12");
}

// The stack the kimi-linear and kimi-k3 models share: KDA layers with an MLA
// layer every second layer (K M K M), a dense first layer, 8 routed experts.
inline std::string kimi_stack(const std::string& arch) {
  return "--arch " + arch +
         " --n-embd 64 --n-layer 4 --n-head 2 --n-ff 128 --n-expert 8 --n-expert-used 2 "
         "--mla-every 2 --kda-head-dim 32 --conv-kernel 4 --kl-n-ff-expert 64 --kl-kv-lora-rank 32 "
         "--kl-qk-rope-dim 16 --kl-qk-nope-dim 32 --kl-v-head-dim 32";
}

// kimi-linear: the kimi stack, MXFP4 routed experts and Q8_0 elsewhere.
inline std::string kimi_linear_model() {
  return make_model("kimi-linear", kimi_stack("kimi-linear") + " --type Q8_0 --tensor-type _exps=MXFP4 --seed 21");
}

// kimi-k3: the kimi stack with every K3 part on: attention residuals every 2
// layers, latent MoE (32 of 64) with the routed norm, the MLA output gate,
// situ, the lower-bound KDA gate; MXFP4 routed experts and Q8_0 elsewhere.
inline std::string kimi_k3_model() {
  return make_model("kimi-k3", kimi_stack("kimi-k3") +
                                   " --attn-res-block 2 --expert-latent 32 --routed-norm true "
                                   "--attn-gate true --type Q8_0 --tensor-type _exps=MXFP4 --seed 31");
}

// kimi-k3 with its optional parts off: no attention residuals, full-width
// experts, no attn_gate, no lower-bound gate, situ without the up-branch beta.
inline std::string kimi_k3_plain_model() {
  return make_model("kimi-k3-plain", kimi_stack("kimi-k3") +
                                         " --attn-res-block 0 --expert-latent 0 --attn-gate false "
                                         "--kda-lower-bound 0 --situ-linear-beta 0 --type Q8_0 --seed 32");
}

// qwen3next / qwen35moe: Gated DeltaNet layers with a gated full-attention
// layer every second layer (G A G A), 2 key heads shared by 4 value heads,
// partial RoPE, routed experts plus the gated shared expert; MXFP4 routed
// experts and Q8_0 elsewhere.
// `extra`: more generator flags (the file name keeps them apart).
inline std::string qwen_next_model(const std::string& arch, const std::string& extra = "") {
  return make_model(arch,
                    extra + " --arch " + arch +
                        " --n-embd 64 --n-layer 4 --n-head 4 --n-head-kv 2 --n-ff 64 "
                        "--n-expert 8 --n-expert-used 2 --full-attn-every 2 --qn-head-dim 32 --qn-rope-dim 8 "
                        "--gdn-head-dim 16 --gdn-k-heads 2 --gdn-v-heads 4 --gdn-conv-kernel 4 --qn-n-ff-shexp 64 "
                        "--qn-rope-sections 1,1,1,1 --type Q8_0 --tensor-type _exps=MXFP4 --seed 41");
}

// gpt-oss: 4 layers alternating an 8-token sliding window and full attention,
// sinks, biases everywhere, YaRN; MXFP4 routed experts and Q8_0 elsewhere.
inline std::string gpt_oss_model() {
  return make_model("gpt-oss",
                    "--arch gpt-oss --n-embd 64 --n-layer 4 --n-head 4 --n-head-kv 2 --oss-head-dim 32 "
                    "--n-ff 64 --n-expert 8 --n-expert-used 2 --oss-sliding-window 8 --rope-base 150000 "
                    "--n-ctx 4096 --type Q8_0 --tensor-type _exps=MXFP4 --vocab-pre gpt-4o --seed 41");
}

// deepseek2 quantized as the 1.8-bit K2 GGUFs are (routed gate/up IQ1_S, down
// IQ2_XXS, attention Q4_K/Q6_K, shared experts and the rest Q8_0), with the
// importance matrix llama-imatrix made for this shape: the golden
// tiny-ds2-k2-iq1s (tests/conformance/reference/make_goldens.sh), whose bytes
// are llama-quantize's.
inline std::string k2_lowbit_model() {
  return make_model("k2-lowbit",
                    "--arch deepseek2 --n-embd 256 --n-layer 4 --n-head 8 --n-ff 512 --n-expert 8 "
                    "--n-expert-used 2 --q-lora-rank 256 --kv-lora-rank 64 --qk-rope-dim 16 "
                    "--qk-nope-dim 32 --v-head-dim 32 --n-ff-expert 256 --n-shared-expert 1 "
                    "--n-dense-lead 1 --n-ctx 4096 --seed 7 --type Q8_0 "
                    "--tensor-type 'ffn_(gate|up)_exps=IQ1_S' --tensor-type ffn_down_exps=IQ2_XXS "
                    "--tensor-type 'attn_(q_a|q_b|kv_a_mqa).weight=Q4_K' --tensor-type attn_output=Q6_K "
                    "--imatrix " NS_SOURCE_DIR
                    "/tests/conformance/imatrix/tiny-ds2-k2.imatrix.gguf "
                    "--imatrix-include _exps");
}

// `n` token ids spread over the vocabulary; another `offset` gives another prompt.
inline std::vector<int32_t> some_tokens(int64_t n_vocab, int n, int64_t offset = 0) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(static_cast<int32_t>((i * 7919 + 13 + offset) % n_vocab));
  return t;
}

inline double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(double(a[i]) - b[i]));
  return d;
}

// A sequence restarted at position 0 in the same slot starts from zero state
// (recurrent layers): `a` after `b` gives a's logits again, and b's differ.
// Returns a's logits (every position).
inline std::vector<float> check_restart_is_fresh(Model& m, const std::vector<int32_t>& a,
                                                 const std::vector<int32_t>& b) {
  std::vector<float> first, other, again;
  m.forward(a, 0, true, first);
  m.forward(b, 0, true, other);  // the same slot, another sequence
  m.forward(a, 0, true, again);
  CHECK(first == again);
  CHECK(first != other);
  return first;
}

// Greedy sampling of exactly `n` tokens.
inline SamplingParams greedy(int n) { return {.max_tokens = n, .temperature = 0, .ignore_eos = true}; }

// Sampling from the model's whole distribution (temperature 1, no top-k, top-p
// or min-p cut) with `seed`, at most `n` tokens.
inline SamplingParams unfiltered(int n, uint64_t seed) {
  return {.max_tokens = n, .temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0, .seed = seed};
}

// Feeds `requests` to `batch` (an Engine's batch or a GenerationBatch) as its
// slots free up and steps it until every one has finished; `before_step` and
// `after_step` watch each step. The results in the requests' order.
template <class Batch>
std::vector<GenerationResult> run_batch(Batch& batch, const std::vector<GenerationRequest>& requests,
                                        const std::function<void()>& before_step = {},
                                        const std::function<void()>& after_step = {}) {
  std::vector<GenerationResult> results(requests.size());
  std::map<int, size_t> index;
  size_t next = 0;
  for (;;) {
    while (next < requests.size() && batch.free_slots() > 0) {
      index[batch.add(requests[next])] = next;
      ++next;
    }
    if (before_step) before_step();
    const bool more = batch.step();
    if (after_step) after_step();
    for (auto& [h, r] : batch.take_finished()) results[index[h]] = std::move(r);
    if (!more && next == requests.size()) break;
  }
  return results;
}

// The largest difference between 12 tokens' logits from one batched prefill
// and from feeding them one at a time on one thread (the KV cache and the
// batched kernels against the single-token path). `mo`: the other options.
inline double batched_vs_sequential(const std::string& path, ModelOptions mo = {}, int n = 12) {
  mo.engine.context = std::max(64, n);
  mo.engine.max_batch_tokens = std::max(16, n);
  auto batched = Model::load(path, mo);
  mo.engine.threads = 1;
  auto single = Model::load(path, mo);
  const int64_t n_vocab = batched->n_vocab();
  const std::vector<int32_t> toks = some_tokens(n_vocab, n);
  std::vector<float> all, one;
  batched->forward(toks, 0, true, all);
  REQUIRE(all.size() == toks.size() * n_vocab);
  double max_diff = 0;
  for (size_t t = 0; t < toks.size(); ++t) {
    single->forward(std::span(toks).subspan(t, 1), static_cast<int64_t>(t), false, one);
    for (int64_t v = 0; v < n_vocab; ++v)
      max_diff = std::max(max_diff, std::fabs(double(one[v]) - all[t * n_vocab + v]));
  }
  return max_diff;
}

// Runs `nightshift ARGS` in a fresh process and parses its standard output as
// JSON; null when the CLI is not built (the caller skips).
inline nlohmann::json run_cli_json(const std::string& args) {
  const std::filesystem::path cli = std::filesystem::path(NS_BINARY_DIR) / "daemon" / "nightshift";
  if (!std::filesystem::exists(cli)) return {};
  const std::string cmd = cli.string() + " " + args + " 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) throw std::runtime_error("cannot run: " + cmd);
  std::string out;
  std::array<char, 4096> buf{};
  while (size_t n = std::fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  if (pclose(p) != 0) throw std::runtime_error("failed: " + cmd + "\n" + out);
  return nlohmann::json::parse(out);
}

// Runs `nightshift run ARGS --json` in a fresh process (its own VmHWM) and
// returns the output's "stats"; empty when the CLI is not built (the caller skips).
inline nlohmann::json run_cli_stats(const std::string& args) {
  const nlohmann::json out = run_cli_json("run " + args + " --json 'Once upon a time there was'");
  return out.is_null() ? out : out.at("stats");
}

}  // namespace ns::test
