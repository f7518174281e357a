// Causality: the logits at position p of a prompt depend on tokens 0..p only.
// For every architecture and every weight type the generator writes, the
// logits at p from the whole prompt must equal those of the prompt cut after p,
// read in a fresh sequence. A kimi-linear bug of this kind (position 0 moved
// by up to 0.44 when later tokens joined it: MLA's first chunk took the
// absorbed path for one token and the expanded one for more) passed every
// test that compared a whole prompt with the reference or with token-by-token
// decoding, since neither cuts the prompt.
//
// The prompts mix CJK, Latin and digits (byte-level BPE pieces of 1-3 bytes
// and merged ones) and are longer than the prefill chunk, so cuts fall inside
// a first chunk, at a chunk's first token and inside later chunks.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "engine/model/model.h"
#include "tests/unit/engine/test_models.h"

using namespace ns;

namespace {

constexpr const char* kText = "写一段关于夜班的故事：工人们在深夜里工作。The night shift starts at 23:00, 还有 42 份。";

struct Finding {
  double first_chunk = 0;  // max |dlogit| over cuts inside the first prefill chunk
  double later = 0;        // ... over cuts in later chunks
  int cuts = 0;
};

// The prompt through forward() a chunk of at most `chunk` tokens at a time, as
// the generation loop prefills it; the logits of every position when `all`,
// else of the last.
void prefill(Model& m, std::span<const int32_t> toks, int64_t chunk, bool all, std::vector<float>& out) {
  std::vector<float> part;
  out.clear();
  for (size_t at = 0; at < toks.size(); at += static_cast<size_t>(chunk)) {
    const auto piece = toks.subspan(at, std::min(toks.size() - at, static_cast<size_t>(chunk)));
    m.forward(piece, static_cast<int64_t>(at), all, part);
    if (all || at + piece.size() == toks.size()) out.insert(out.end(), part.begin(), part.end());
  }
}

// Every cut point p (fresh sequence, prompt[0..p]) against the whole prompt.
Finding cut_prompts(const std::string& path, int chunk, ModelTuning tuning = {}) {
  auto m = Model::load(path, {.engine = {.context = 128, .max_batch_tokens = chunk}, .tuning = tuning});
  const std::vector<int32_t> toks = m->tokenizer().encode(kText, false, true);
  REQUIRE(toks.size() > static_cast<size_t>(2 * chunk));
  const int64_t n_vocab = m->n_vocab(), n = static_cast<int64_t>(toks.size());
  std::vector<float> whole, cut;
  prefill(*m, toks, chunk, true, whole);
  REQUIRE(whole.size() == static_cast<size_t>(n * n_vocab));
  Finding f;
  for (int64_t p = 0; p < n - 1; p += (p < chunk + 2 ? 1 : 5)) {
    prefill(*m, std::span(toks).first(static_cast<size_t>(p + 1)), chunk, false, cut);
    REQUIRE(cut.size() == static_cast<size_t>(n_vocab));
    double d = 0;
    for (int64_t v = 0; v < n_vocab; ++v) {
      REQUIRE(std::isfinite(cut[v]));
      d = std::max(d, std::fabs(double(cut[v]) - whole[p * n_vocab + v]));
    }
    double& worst = p < chunk ? f.first_chunk : f.later;
    worst = std::max(worst, d);
    ++f.cuts;
  }
  return f;
}

// A position's arithmetic never depends on what follows it: exact, in the
// first chunk as in later ones. F16 is the exception the reference makes: it
// sums a lone token in ggml_vec_dot_f16's order and more in tinyBLAS's, and
// nightshift reproduces both (kernels/f16_avx2.cpp), so a cut that leaves one
// token in its chunk differs in float order.
void check_causal(const std::string& path, double tolerance = 0.0) {
  const Finding f = cut_prompts(path, 16);
  MESSAGE(path << ": " << f.cuts << " cuts, max |dlogit| first chunk " << f.first_chunk << ", later chunks "
               << f.later);
  CHECK(f.first_chunk <= tolerance);
  CHECK(f.later <= tolerance);
}

std::string model(const std::string& name, const std::string& flags) {
  return test::make_model("causal-" + name, flags);
}

const std::string kMla = " --kv-lora-rank 32 --qk-rope-dim 16 --qk-nope-dim 32 --v-head-dim 32 --n-ff-expert 64";

}  // namespace

TEST_CASE("causal: llama dense and MoE") {
  check_causal(model("llama-f32",
                     "--arch llama --n-embd 64 --n-layer 2 --n-head 4 --n-head-kv 2 --n-ff 128 --type F32 "
                     "--seed 3"));
  check_causal(test::moe_model());
  check_causal(test::mxfp4_moe_model());
}

TEST_CASE("causal: deepseek2 (MLA), split and fused attn_kv_b, F32 and Q8_0") {
  const std::string ds =
      "--arch deepseek2 --n-embd 128 --n-layer 3 --n-head 4 --n-ff 128 --n-expert 8 "
      "--n-expert-used 2 --q-lora-rank 64" +
      kMla;
  check_causal(model("ds2-f32", ds + " --type F32 --seed 5"));
  check_causal(model("ds2-kvb-f32", ds + " --mla-layout kv_b --type F32 --seed 5"));
  check_causal(model("ds2-q8", ds + " --gating softmax --type Q8_0 --seed 6"));
}

TEST_CASE("causal: kimi-linear and kimi-k3 (KDA + MLA)") {
  check_causal(model("kimi-linear-f32", test::kimi_stack("kimi-linear") + " --type F32 --seed 21"));
  // The shape: a 64-wide latent, where expanding a chunk's keys costs fewer multiply-adds than absorbing.
  const std::string wide = model("kimi-linear-wide-f32",
                                 "--arch kimi-linear --n-embd 128 --n-layer 3 --n-head 4 --n-ff 128 --n-expert 8 "
                                 "--n-expert-used 2 --mla-every 3 --kda-head-dim 32 --kl-kv-lora-rank 64 --type F32 "
                                 "--seed 22");
  check_causal(wide);
  // The test has teeth: with long chunks expanded (ModelTuning::mla_expand_prefill) a position's path, and so its
  // bits, depend on how many tokens follow it in its chunk.
  const Finding expanded = cut_prompts(wide, 16, {.mla_expand_prefill = true});
  MESSAGE("expanding MLA chunks: max |dlogit| " << std::max(expanded.first_chunk, expanded.later));
  CHECK(std::max(expanded.first_chunk, expanded.later) > 0.0);
  check_causal(test::kimi_linear_model());
  check_causal(model("kimi-k3-f32", test::kimi_stack("kimi-k3") + " --attn-res-block 2 --expert-latent 32 --type F32 "
                                                                  "--seed 31"));
  check_causal(test::kimi_k3_model());
}

TEST_CASE("causal: qwen2moe, qwen3moe, qwen3next, qwen35moe") {
  const std::string qw = " --n-embd 64 --n-layer 2 --n-head 4 --n-head-kv 2 --n-ff 64 --n-expert 8 --n-expert-used 2";
  check_causal(model("qwen2moe", "--arch qwen2moe" + qw + " --n-ff-shexp 64 --type Q8_0 --seed 8"));
  check_causal(model("qwen3moe", "--arch qwen3moe" + qw + " --type F32 --seed 8"));
  check_causal(test::qwen_next_model("qwen3next"));
  check_causal(test::qwen_next_model("qwen35moe"));
}

TEST_CASE("causal: glm4moe and gpt-oss (sliding window shorter than the prompt)") {
  check_causal(model("glm4moe",
                     "--arch glm4moe --n-embd 64 --n-layer 3 --n-head 4 --n-head-kv 2 --glm-head-dim 32 "
                     "--n-ff 128 --n-expert 8 --n-expert-used 2 --glm-n-ff-expert 64 --type F32 --seed 9"));
  check_causal(test::gpt_oss_model());
}

TEST_CASE("causal: minimax-m2 (full-width Q/K norms), F32 and Q8_0") {
  const std::string mm =
      "--arch minimax-m2 --n-embd 64 --n-layer 2 --n-head 4 --n-head-kv 2 --mm-head-dim 32 "
      "--n-ff 64 --n-expert 8 --n-expert-used 2";
  check_causal(model("minimax-m2-f32", mm + " --type F32 --seed 12"));
  check_causal(model("minimax-m2-q8", mm + " --type Q8_0 --seed 13"));
}

TEST_CASE("causal: minimax-m3 (MiniMax sparse attention, top-2 blocks of 4), F32 and Q8_0") {
  const std::string mm3 =
      "--arch minimax-m3 --n-embd 64 --n-layer 2 --n-head 4 --n-head-kv 2 --mm3-head-dim 32 "
      "--n-ff 64 --n-expert 8 --n-expert-used 2 --msa-head-dim 32 --msa-block-size 4 --msa-top-k 2";
  check_causal(model("minimax-m3-f32", mm3 + " --type F32 --seed 18"));
  check_causal(model("minimax-m3-q8", mm3 + " --type Q8_0 --seed 19"));
}

TEST_CASE("causal: deepseek4 (hyper-connections, compressed blocks of 4 with the indexer's top-k, hash routing)") {
  const std::string v4 =
      "--arch deepseek4 --n-embd 64 --n-layer 3 --n-head 4 --n-ff 32 --n-expert 8 --n-expert-used 2 "
      "--dsv4-head-dim 32 --dsv4-rope-dim 16 --dsv4-q-lora-rank 32 --dsv4-o-lora-rank 16 "
      "--dsv4-ratios 0,4,128 --dsv4-hash-layers 1 --dsv4-window 8 --dsv4-top-k 4";
  check_causal(model("deepseek4-f32", v4 + " --type F32 --seed 16"));
  check_causal(model("deepseek4-q8", v4 + " --type Q8_0 --seed 17"));
}

TEST_CASE("causal: bailingmoe2 (fused QKV, group-limited routing, shared expert, a NextN block), F32 and Q8_0") {
  const std::string ling =
      "--arch bailingmoe2 --n-embd 64 --n-layer 3 --n-head 4 --n-head-kv 2 --n-ff 128 "
      "--n-expert 8 --n-expert-used 2 --ling-n-ff-expert 32 --ling-n-expert-group 4 "
      "--ling-n-expert-group-used 2";
  check_causal(model("bailingmoe2-f32", ling + " --type F32 --seed 14"));
  check_causal(model("bailingmoe2-q8", ling + " --type Q8_0 --seed 15"));
}

TEST_CASE("causal: bailingmoe3 (KDA + rotated MLA with a per-head gate, shared expert, a NextN block), F32 and Q8_0") {
  const std::string ling3 =
      "--arch bailingmoe3 --n-embd 64 --n-layer 3 --n-head 4 --n-ff 128 --n-expert 8 "
      "--n-expert-used 2 --ling3-group 3 --ling3-kda-head-dim 16 --ling3-n-ff-expert 32 "
      "--ling3-n-ff-shexp 64 --ling3-kv-lora-rank 32 --ling3-qk-rope-dim 8 "
      "--ling3-qk-nope-dim 32 --ling3-v-head-dim 32 --ling3-swiglu-limit 1";
  check_causal(model("bailingmoe3-f32", ling3 + " --type F32 --seed 18"));
  check_causal(model("bailingmoe3-q8", ling3 + " --ling3-q-lora-rank 32 --type Q8_0 --seed 19"));
}

TEST_CASE("causal: deepseek32 and glm-dsa (MLA with the lightning indexer's top-k), F32 and Q8_0") {
  // top-8 positions: the prompt's later positions attend sparsely, the first ones densely.
  const std::string dsa =
      " --n-embd 128 --n-layer 3 --n-head 4 --n-ff 128 --n-expert 8 --n-expert-used 2 "
      "--q-lora-rank 64 --dsa-heads 4 --dsa-head-dim 64 --dsa-top-k 8" +
      kMla;
  check_causal(model("deepseek32-f32", "--arch deepseek32" + dsa + " --type F32 --seed 16"));
  check_causal(model("deepseek32-q8", "--arch deepseek32" + dsa + " --type Q8_0 --seed 17"));
  check_causal(model("glm-dsa-f32", "--arch glm-dsa" + dsa + " --dsa-types 1,0,1 --type F32 --seed 18"));
  check_causal(model("glm-dsa-q8", "--arch glm-dsa" + dsa + " --type Q8_0 --seed 19"));
}

// Every weight type, on a small MoE whose every matrix (experts included) has it.
TEST_CASE("causal: every weight type the generator writes") {
  for (const char* type :
       {"F16",  "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1",  "IQ4_NL",  "MXFP4",  "NVFP4", "Q1_0",
        "Q2_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ1_M", "IQ3_XXS", "IQ4_XS", "TQ1_0", "TQ2_0"}) {
    CAPTURE(type);
    check_causal(
        model(std::string("moe-") + type, std::string("--arch llama --n-embd 256 --n-layer 2 --n-head 4 "
                                                      "--n-head-kv 2 --n-ff 256 --n-expert 4 --n-expert-used 2 "
                                                      "--type ") +
                                              type + " --seed 11"),
        std::string(type) == "F16" ? 1e-4 : 0.0);
  }
  // IQ2_XXS, IQ2_XS and IQ1_S quantize only with an importance matrix: the K2 low-bit mix has them.
  check_causal(test::k2_lowbit_model());
}

// Trained weights (examples/models: real words, trained routing).
TEST_CASE("causal: kjv-moe, the trained MoE the repository carries") {
  check_causal(std::string(NS_SOURCE_DIR) + "/examples/models/kjv-moe-q4_0.gguf");
}
