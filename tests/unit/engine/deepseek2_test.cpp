// deepseek2 (MLA, routed + shared experts) on generated models: the two MLA
// layouts of one seed are the same model, batched prefill equals
// token-by-token decoding, the KV cache holds only the latent, and the
// generator writes the shared tiny-ds2 files' keys and tensors.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "engine/gguf/gguf_file.h"
#include "engine/layers/mla_attention.h"
#include "engine/model/model.h"
#include "engine/model/weight_streaming.h"
#include "tests/unit/engine/test_models.h"

using namespace ns;

namespace {

// A small DeepSeek-V3-like model: q_lora, sigmoid routing with selection bias,
// 2 of 4 expert groups, a shared expert, one leading dense layer, YaRN.
const std::string kDs3Flags =
    "--arch deepseek2 --n-embd 128 --n-layer 3 --n-head 4 --n-ff 256 --n-expert 16 --n-expert-used 4 "
    "--q-lora-rank 96 --kv-lora-rank 64 --qk-rope-dim 16 --qk-nope-dim 32 --v-head-dim 32 --n-ff-expert 64 "
    "--n-shared-expert 1 --n-dense-lead 1 --gating sigmoid --expert-weights-scale 2.5 --n-expert-group 4 "
    "--n-expert-group-used 2 --yarn-factor 4 --yarn-orig-ctx 64 --rms-eps 1e-6 --seed 11";
// A lite-like model: no q_lora, softmax routing, 2 shared experts, unnormalized weights.
std::string lite_flags(int n_layer) {
  return "--arch deepseek2 --n-embd 64 --n-layer " + std::to_string(n_layer) +
         " --n-head 2 --n-ff 128 --n-expert 8 --n-expert-used 2 --q-lora-rank 0 --kv-lora-rank 32 --qk-rope-dim 16 "
         "--qk-nope-dim 32 --v-head-dim 32 --n-ff-expert 32 --n-shared-expert 2 --n-dense-lead 1 --gating softmax "
         "--expert-weights-scale 1 --expert-weights-norm false --rms-eps 1e-6 --seed 12";
}

std::string ds3(const std::string& layout, const std::string& type) {
  return test::make_model("ds3-" + layout + "-" + type, kDs3Flags + " --mla-layout " + layout + " --type " + type);
}
std::string lite(const std::string& layout) {
  return test::make_model("ds2lite-" + layout, lite_flags(3) + " --mla-layout " + layout + " --type Q8_0");
}

std::vector<float> prefill_logits(const std::string& path, const std::vector<int32_t>& toks,
                                  bool expanded_cache = false) {
  auto m = Model::load(path, {.engine = {.context = 64, .max_batch_tokens = 16, .mla_expanded_cache = expanded_cache}});
  std::vector<float> logits;
  m->forward(toks, 0, true, logits);
  return logits;
}

// Batched prefill of n tokens against one token at a time (test::batched_vs_sequential), in either MLA cache
// layout, with long prompt chunks expanded or not (ModelTuning::mla_expand_prefill).
double batched_vs_sequential(const std::string& path, bool expanded_cache = false, int n = 12, bool expand = false) {
  return test::batched_vs_sequential(
      path, {.engine = {.mla_expanded_cache = expanded_cache}, .tuning = {.mla_expand_prefill = expand}}, n);
}

}  // namespace

TEST_CASE("deepseek2: the fused attn_kv_b and split attn_k_b/attn_v_b layouts of one seed give the same logits") {
  // F16 keeps the transposition exact, so both layouts multiply the same numbers.
  const std::vector<int32_t> toks = test::some_tokens(512, 12);
  const std::vector<float> split = prefill_logits(ds3("split", "F16"), toks);
  const std::vector<float> fused = prefill_logits(ds3("kv_b", "F16"), toks);
  CHECK(test::max_abs_diff(split, fused) == 0.0);

  // The fused file in the reference's own mode (expanded keys and values)
  // rounds elsewhere, so it agrees only closely.
  const double d = test::max_abs_diff(split, prefill_logits(ds3("kv_b", "F16"), toks, /*expanded_cache=*/true));
  MESSAGE("latent vs expanded cache: max |dlogit| " << d);
  CHECK(d < 0.05);
}

TEST_CASE("deepseek2: batched prefill equals token-by-token decoding") {
  for (const std::string& path : {ds3("split", "Q8_0"), ds3("kv_b", "Q8_0"), lite("split"), lite("kv_b")}) {
    const double d = batched_vs_sequential(path);
    MESSAGE(path << ": max |batched - sequential| = " << d);
    CHECK(d < 1e-3);
  }
  const double d = batched_vs_sequential(lite("kv_b"), /*expanded_cache=*/true);
  MESSAGE("expanded cache: max |batched - sequential| = " << d);
  CHECK(d < 1e-3);
}

TEST_CASE("deepseek2: a prompt chunk over expanded keys and values agrees with decoding over the latents") {
  // The ds3 shape: expanding pays from 2 queries with F16 attention weights,
  // from 256 with quantized ones (mla_attention.h); one query never expands.
  MlaShape sh{.n_head = 4, .kv_lora_rank = 64, .qk_nope = 32, .qk_rope = 16, .v_head = 32};
  MlaWeights f16, q8;
  f16.k_b.type = f16.v_b.type = gguf::GgmlType::F16;
  q8.k_b.type = q8.v_b.type = gguf::GgmlType::Q8_0;
  CHECK_FALSE(mla_expand_run(sh, f16, 12, 12));  // off by default: the reference's path for every chunk
  CHECK_FALSE(mla_expand_run(sh, q8, 300, 300));
  sh.expand_prefill = true;
  CHECK(mla_expand_run(sh, f16, 12, 12));
  CHECK_FALSE(mla_expand_run(sh, f16, 1, 12));
  CHECK_FALSE(mla_expand_run(sh, q8, 12, 12));
  CHECK(mla_expand_run(sh, q8, 300, 300));
  CHECK_FALSE(mla_expand_run(sh, f16, 8, 100000));  // a short chunk after a long context stays absorbed

  // The sequential run decodes one token at a time, over the latents.
  const double d16 = batched_vs_sequential(ds3("split", "F16"), false, 12, true);
  MESSAGE("F16, 12 tokens: max |expanded - absorbed| = " << d16);
  CHECK(d16 < 5e-3);
  // Quantized, the paths round differently (mla_attention.cpp); with every
  // expert used no routing choice can flip and amplify that.
  const std::string q8_all = test::make_model(
      "ds2-kv64-all-experts",
      "--arch deepseek2 --n-embd 64 --n-layer 3 --n-head 2 --n-ff 128 --n-expert 4 --n-expert-used 4 --q-lora-rank 0 "
      "--kv-lora-rank 64 --qk-rope-dim 16 --qk-nope-dim 32 --v-head-dim 32 --n-ff-expert 32 --n-shared-expert 1 "
      "--n-dense-lead 1 --gating softmax --expert-weights-scale 1 --expert-weights-norm false --rms-eps 1e-6 "
      "--seed 13 --mla-layout split --type Q8_0");
  const double d8 = batched_vs_sequential(q8_all, false, 300, true);
  MESSAGE("Q8_0, 300 tokens: max |expanded - absorbed| = " << d8);
  CHECK(d8 < 0.1);
}

TEST_CASE("deepseek2: the memory plan counts the scratch of expanded chunks, which never outgrows it") {
  // ds3 F16 expands from 2 queries: its plan's activations grow with the
  // context by at least every head's F16 keys and values per key.
  const std::string path = ds3("split", "F16");
  const auto load = [&](int64_t context, bool plan_only) {
    ModelOptions mo;
    mo.engine.context = static_cast<int>(context);
    mo.engine.max_batch_tokens = 320;
    mo.engine.io_mode = "pread";
    mo.engine.memory_budget = 1ull << 30;
    mo.plan_only = plan_only;
    mo.tuning.mla_expand_prefill = true;
    return Model::load(path, mo);
  };
  const MlaShape sh = mla_shape(load(64, true)->hparams());
  const uint64_t per_key = static_cast<uint64_t>(sh.n_head * (sh.k_head() + sh.v_head)) * sizeof(uint16_t);
  const uint64_t short_ctx = load(512, true)->streaming().plan.activation_bytes;
  const uint64_t long_ctx = load(8192, true)->streaming().plan.activation_bytes;
  MESSAGE("plan activations: " << short_ctx << " B at 512 keys, " << long_ctx << " at 8192");
  CHECK(long_ctx >= short_ctx + (8192 - 512) * per_key);

  // A 300-token chunk after 200 cached tokens expands in every MLA layer, in
  // the buffers the plan counted: nothing grows past them.
  auto m = load(512, false);
  const uint64_t planned = m->streaming().plan.activation_bytes;
  const auto held = [&] { return forward_state_bytes(m->forward_state()) + m->batch_list_bytes(); };
  CHECK(held() == planned);
  std::vector<float> logits;
  const std::vector<int32_t> toks = test::some_tokens(512, 500);
  m->forward(std::span(toks).first(200), 0, false, logits);
  const uint64_t before = m->forward_state().mla_expanded;
  m->forward(std::span(toks).subspan(200), 200, false, logits);
  CHECK(m->forward_state().mla_expanded - before == 300 * static_cast<uint64_t>(m->hparams().n_layer));
  CHECK(held() == planned);
}

TEST_CASE("deepseek2: the KV cache holds (kv_lora_rank + rope dims) F16 values per token and layer") {
  ModelOptions mo{.engine = {.context = 32}};
  for (const std::string& path : {ds3("split", "Q8_0"), ds3("kv_b", "Q8_0")}) {
    auto m = Model::load(path, mo);
    CHECK(m->sequence_state().bytes_per_token() == (64u + 16u) * 3u * 2u);
    CHECK(m->sequence_state().bytes() == (64u + 16u) * 3u * 2u * 32u);
  }
  mo.engine.mla_expanded_cache = true;  // the reference's way: n_head * (k_head + v_head)
  auto m = Model::load(ds3("kv_b", "Q8_0"), mo);
  CHECK(m->sequence_state().bytes_per_token() == 4u * (48u + 32u) * 3u * 2u);
}

TEST_CASE("deepseek2: generated files have the shared tiny-ds2 files' metadata keys and tensors") {
  struct Case {
    std::string shared, flags;
  };
  const Case cases[] = {
      {"tiny-ds2-q8_0",
       "--arch deepseek2 --n-embd 128 --n-layer 4 --n-head 4 --n-ff 384 --n-expert 16 --n-expert-used 4 "
       "--mla-layout kv_b --rms-eps 1e-6 --type Q8_0"},
      {"tiny-ds2-lite-f16", lite_flags(27) + " --mla-layout kv_b --type F16"},
  };
  for (const Case& c : cases) {
    const std::filesystem::path ref_path = std::filesystem::path(NS_SHARED_DIR) / "models" / (c.shared + ".gguf");
    if (!std::filesystem::exists(ref_path)) {
      MESSAGE("skipped: " << ref_path << " is absent");
      continue;
    }
    auto ref = gguf::GgufFile::open(ref_path.string());
    auto gen = gguf::GgufFile::open(test::make_model("layout-" + c.shared, c.flags));
    CAPTURE(c.shared);
    // Same keys; same values for the architecture's keys (the vocabulary differs).
    std::set<std::string> ref_keys, gen_keys;
    for (const auto& [k, v] : ref->metadata())
      if (k.rfind("tokenizer.", 0) != 0) ref_keys.insert(k);
    for (const auto& [k, v] : gen->metadata())
      if (k.rfind("tokenizer.", 0) != 0) gen_keys.insert(k);
    CHECK(ref_keys == gen_keys);
    for (const std::string& k : ref_keys) {
      if (k.rfind("deepseek2.", 0) != 0 || k == "deepseek2.vocab_size" || !gen->has(k)) continue;
      CAPTURE(k);
      CHECK(gen->get_f64(k) == doctest::Approx(ref->get_f64(k)));
    }
    // Same tensors in the same order with the same shapes (vocab rows aside).
    REQUIRE(ref->tensors().size() == gen->tensors().size());
    for (size_t i = 0; i < ref->tensors().size(); ++i) {
      const auto& a = ref->tensors()[i];
      const auto& b = gen->tensors()[i];
      CAPTURE(a.name);
      CHECK(a.name == b.name);
      if (a.name == "token_embd.weight" || a.name == "output.weight")
        CHECK(a.dims[0] == b.dims[0]);
      else
        CHECK(a.dims == b.dims);
    }
  }
}
