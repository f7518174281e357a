// bailingmoe3 (Ling 3.0 / Ring 3.0; the reference's src/models/bailingmoe3.cpp,
// 2026-09-28). The kimi hybrid layer stack (kimi_hybrid.h) in BailingMoeV3's
// form. A layer is
//   x += kda(rms_norm(x) * attn_norm)     where attention.head_count_kv[il] == 0
//     or mla(rms_norm(x) * attn_norm)     elsewhere
//   x += ffn(rms_norm(x) * ffn_norm)
// KDA (kda.h) with the lower-bound ("safe") decay gate
//   g = kda.gate_lower_bound * sigmoid(exp(A_log) * (ssm_f_a x + dt_bias)),
// ssm_f_a full rank, the output gate ssm_g_a full rank, ssm_a stored as
// exp(A_log) [1, n_head].
// MLA (mla_attention.h) with its rope part rotated (adjacent pairs,
// rope.dimension_count dims), attn_q or attn_q_a/attn_q_b (Ling-3.0-tiny),
// split attn_k_b/attn_v_b, softmax scale 1/sqrt(key_length_mla), and the
// per-head sigmoid output gate attn_gate [n_head][n_embd].
// The FFN: dense for the first leading_dense_block_count layers, then
// sigmoid routing with the selection bias exp_probs_b, the chosen weights
// renormalized when expert_weights_norm says so and times
// expert_weights_scale, plus the shared experts, always applied, one FFN
// expert_shared_feed_forward_length wide (else the expert width times
// max(1, expert_shared_count)), as the reference sizes it.
// The NextN (multi-token prediction) block after the last layer
// (nextn_predict_layers: an MLA block with nextn.eh_proj, enorm, hnorm and
// layer_output_norm) is in the table but never read, as the reference's
// decoder graph skips it.
// The clamped SwiGLU where swiglu_clamp_exp / swiglu_clamp_shexp give a
// block a limit above 1e-6: min(silu(gate), limit) * clamp(up, -limit, limit),
// the routed experts by the first, the shared experts and dense layers by the
// second (the reference's build_ffn applies it to every gated FFN).
#include "engine/arch/bailingmoe3.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "engine/arch/kimi_hybrid.h"
#include "engine/gguf/gguf_file.h"
#include "engine/layers/residual.h"
#include "engine/spec/metadata_keys.h"
#include "engine/state/trace.h"
#include "common/error.h"

namespace ns {
namespace {

int64_t shared_width(const Hparams& hp) {
  return hp.n_ff_shexp > 0 ? hp.n_ff_shexp : hp.n_ff_expert * std::max<int64_t>(1, hp.n_expert_shared);
}

constexpr KimiForm kForm{.name = "bailingmoe3",
                         .kda = {.bailing = true},
                         .mla_gate = Presence::required,
                         .residual_scores = false,
                         .mla_rotary = true,
                         .mla_head_gate = true,
                         .mla_layout = MlaLayout::split,
                         .shared_width = shared_width,
                         .nextn_tensors = true,
                         .silu_clamps = true};

// Its own keys: kda.safe_gate (the only form the reference runs) and the SwiGLU clamps.
void read_bailingmoe3_keys(const gguf::GgufFile& f, const std::string& a, Hparams& h) {
  if (!f.get_bool_or(a + keys::kda_safe_gate, true))
    bad_hparam(f, a + keys::kda_safe_gate, "is false: only the safe (lower-bound) KDA gate exists in bailingmoe3");
  read_swiglu_clamps(f, a, h);
}

const Hparams& checked(const Hparams& hp) {
  if (!std::isfinite(hp.kda_gate_lower_bound))
    throw Error(ErrorKind::bad_model,
                "bailingmoe3: metadata key 'bailingmoe3.kda.gate_lower_bound' is missing (its "
                "KDA decay gate is lower_bound * sigmoid(...), as the converter writes it)");
  if (!hp.is_moe())
    throw Error(ErrorKind::bad_model,
                "bailingmoe3: expert_count is missing (layers after "
                "leading_dense_block_count are MoE)");
  return hp;
}

class Bailingmoe3 final : public KimiHybrid {
 public:
  Bailingmoe3(const Hparams& hp, TensorLoader& t, const ArchOptions& o) : KimiHybrid(kForm, checked(hp), t, o) {}

  void layer(int64_t il, ForwardState& s) override {
    const KimiLayer& L = w_.layers[static_cast<size_t>(il)];
    const int64_t d = hp_.n_embd;
    pre_norm_residual(s, L.attn_norm, d, hp_.rms_eps, [&] {
      trace(s, "attn_norm", il, s.xn.data(), d);
      attention(il, s);
      trace(s, L.recurrent ? "kda_out" : "mla_out", il, s.out.data(), d);  // the reference's node names
    });
    pre_norm_residual(s, L.ffn_norm, d, hp_.rms_eps, [&] {
      trace(s, "ffn_norm", il, s.xn.data(), d);
      ffn(il, s);
      trace(s, "ffn_out", il, s.out.data(), d);
    });
  }
};

}  // namespace

std::unique_ptr<Architecture> make_bailingmoe3(const Hparams& hp, TensorLoader& loader, const ArchOptions& options) {
  return std::make_unique<Bailingmoe3>(hp, loader, options);
}

void bailingmoe3_tensors(const Hparams& hp, TensorTable& t) { kimi_hybrid_tensors(kForm, hp, t); }

// Adjacent-pair rope (the reference's LLAMA_ROPE_TYPE_NORM for it); sigmoid
// routing when expert_gating_func is absent (the converter always writes it).
const ArchTraits bailingmoe3_traits = {
    .rope_type = RopeType::norm, .default_gating = ExpertGating::sigmoid, .read_keys = read_bailingmoe3_keys};

}  // namespace ns
