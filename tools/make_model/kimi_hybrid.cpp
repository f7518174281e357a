#include "tools/make_model/kimi_hybrid.h"

#include <CLI/CLI.hpp>

#include "common/error.h"
#include "engine/spec/metadata_keys.h"

namespace ns::make_model {

KimiHybridFlags& kimi_hybrid_flags() {
  static KimiHybridFlags flags;
  return flags;
}

void add_kimi_hybrid_flags(CLI::App& app) {
  if (app.get_option_no_throw("--mla-every") != nullptr) return;
  KimiHybridFlags& f = kimi_hybrid_flags();
  const std::string g = "kimi-linear, kimi-k3";
  app.add_option("--mla-every", f.mla_every, "kimi: every Nth layer is MLA, the others KDA")
      ->capture_default_str()
      ->group(g);
  app.add_option("--kda-head-dim", f.kda_head_dim, "kimi: KDA head size (key = value)")
      ->capture_default_str()
      ->group(g);
  app.add_option("--conv-kernel", f.d_conv, "kimi: KDA short convolution taps")->capture_default_str()->group(g);
  app.add_option("--kl-kv-lora-rank", f.mla.kv_lora_rank, "kimi: MLA latent width")->capture_default_str()->group(g);
  app.add_option("--kl-qk-rope-dim", f.mla.qk_rope, "kimi: MLA rope-part dims per head (never rotated)")
      ->capture_default_str()
      ->group(g);
  app.add_option("--kl-qk-nope-dim", f.mla.qk_nope, "kimi: MLA nope dims per head")->capture_default_str()->group(g);
  app.add_option("--kl-v-head-dim", f.mla.v_head, "kimi: MLA value dims per head")->capture_default_str()->group(g);
  app.add_option("--kl-q-lora-rank", f.mla.q_lora_rank, "kimi: MLA query low-rank width (0: attn_q)")
      ->capture_default_str()
      ->group(g);
  app.add_option("--kl-n-ff-expert", f.n_ff_expert, "kimi: hidden width of each routed (and shared) expert")
      ->capture_default_str()
      ->group(g);
  app.add_option("--kl-n-shared-expert", f.n_shared, "kimi: shared experts")->capture_default_str()->group(g);
  app.add_option("--kl-n-dense-lead", f.n_dense_lead, "kimi: leading dense layers (FFN width --n-ff)")
      ->capture_default_str()
      ->group(g);
  app.add_option("--kl-expert-weights-scale", f.weights_scale, "kimi: routed weights multiplier")
      ->capture_default_str()
      ->group(g);
}

void validate_kimi_hybrid(const std::string& arch, const Shape& s) {
  const KimiHybridFlags& f = kimi_hybrid_flags();
  auto bad = [&](const std::string& m) { throw Error(ErrorKind::invalid_input, arch + ": " + m); };
  if (s.n_embd == 0 || s.n_layer == 0 || s.n_head == 0 || s.n_ctx == 0)
    bad("--n-embd, --n-layer, --n-head and --n-ctx must be positive");
  if (f.mla_every == 0) bad("--mla-every must be positive (1: every layer MLA)");
  if (f.kda_head_dim == 0 || f.d_conv == 0) bad("--kda-head-dim and --conv-kernel must be positive");
  if (f.mla.kv_lora_rank == 0 || f.mla.qk_nope == 0 || f.mla.v_head == 0 || f.mla.qk_rope == 0)
    bad("--kl-kv-lora-rank, --kl-qk-nope-dim, --kl-qk-rope-dim, --kl-v-head-dim must be positive");
  if (f.n_dense_lead > s.n_layer) bad("--kl-n-dense-lead exceeds --n-layer");
  if (f.n_dense_lead > 0 && s.n_ff == 0) bad("--n-ff (the dense layers' width) must be positive");
  if (f.n_dense_lead < s.n_layer && (s.n_expert == 0 || s.n_expert_used == 0 || s.n_expert_used > s.n_expert))
    bad("MoE layers need --n-expert and --n-expert-used between 1 and --n-expert");
}

void add_kimi_hybrid_metadata(gguf::GgufWriter& w, const Shape& s, const std::string& arch) {
  using namespace gguf;
  const KimiHybridFlags& f = kimi_hybrid_flags();
  const std::string a = arch + ".";
  w.set(a + keys::context_length, val::u32(s.n_ctx));
  w.set(a + keys::embedding_length, val::u32(s.n_embd));
  w.set(a + keys::feed_forward_length, val::u32(s.n_ff));
  w.set(a + keys::attention_head_count, val::u32(s.n_head));
  std::vector<int32_t> kv;
  for (uint32_t il = 0; il < s.n_layer; ++il) kv.push_back(f.is_mla(il) ? 1 : 0);
  w.set(a + keys::block_count, val::u32(s.n_layer));
  w.set(a + keys::attention_head_count_kv, val::i32_array(kv));
  w.set(a + keys::rope_freq_base, val::f32(s.rope_base));
  w.set(a + keys::attention_layer_norm_rms_epsilon, val::f32(s.rms_eps));
  w.set(a + keys::expert_count, val::u32(s.n_expert));
  w.set(a + keys::expert_used_count, val::u32(s.n_expert_used));
  w.set(a + keys::expert_gating_func, val::u32(2));  // sigmoid
  w.set(a + keys::vocab_size, val::u32(s.n_vocab));
  w.set(a + keys::ssm_conv_kernel, val::u32(f.d_conv));
  w.set(a + keys::kda_head_dim, val::u32(f.kda_head_dim));
  add_split_mla_metadata(w, a, f.mla);
  w.set(a + keys::expert_feed_forward_length, val::u32(f.n_ff_expert));
  w.set(a + keys::expert_shared_count, val::u32(f.n_shared));
  w.set(a + keys::leading_dense_block_count, val::u32(f.n_dense_lead));
  w.set(a + keys::expert_weights_scale, val::f32(f.weights_scale));
}

void refine_kimi_hybrid(const TensorSpec& spec, TensorPlan& plan) {
  const KimiHybridFlags& f = kimi_hybrid_flags();
  if (!refine_split_kv_b(spec, plan, f.mla)) refine_decay(spec, plan);
}

}  // namespace ns::make_model
