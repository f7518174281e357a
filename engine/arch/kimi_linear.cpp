// kimi-linear: Kimi Linear (48B-A3B), a hybrid of Kimi Delta Attention and
// MLA layers (llama.cpp's src/models/kimi-linear.cpp, 2026-09-28). A layer is
//   x += kda(rms_norm(x) * attn_norm)     where attention.head_count_kv[il] == 0
//     or mla(rms_norm(x) * attn_norm)     elsewhere: MLA without any RoPE (the
//                                         KDA layers carry the positions)
//   x += ffn(rms_norm(x) * ffn_norm)      DeepSeek's pattern: dense leading
//                                         layers, then sigmoid-routed experts with a
//                                         selection bias plus shared experts
// (the layer stack is shared with kimi-k3: kimi_hybrid.h).
// Quirks owned here: the reference always renormalizes the chosen experts'
// weights for this architecture (whatever expert_weights_norm says), and its
// MLA layers never rotate.
#include "engine/arch/kimi_linear.h"
#include "engine/arch/kimi_hybrid.h"
#include "engine/layers/residual.h"

namespace ns {
namespace {

// The converter's form: low-rank KDA output gate, ssm_a as [1, n_head, 1, 1];
// an attn_gate is taken when a file has one.
constexpr KimiForm kForm{"kimi-linear", {.full_rank_gate = false, .flat_a = false}, Presence::tolerated, false};

Hparams with_quirks(Hparams hp) {
  hp.expert_weights_norm = true;
  return hp;
}

class KimiLinear final : public KimiHybrid {
 public:
  KimiLinear(const Hparams& hp, TensorLoader& t, const ArchOptions& o) : KimiHybrid(kForm, with_quirks(hp), t, o) {}

  void layer(int64_t il, ForwardState& s) override {
    const KimiLayer& L = w_.layers[static_cast<size_t>(il)];
    pre_norm_residual(s, L.attn_norm, hp_.n_embd, hp_.rms_eps, [&] { attention(il, s); });
    pre_norm_residual(s, L.ffn_norm, hp_.n_embd, hp_.rms_eps, [&] { ffn(il, s); });
  }
};

}  // namespace

std::unique_ptr<Architecture> make_kimi_linear(const Hparams& hp, TensorLoader& loader, const ArchOptions& options) {
  return std::make_unique<KimiLinear>(hp, loader, options);
}

void kimi_linear_tensors(const Hparams& hp, TensorTable& t) { kimi_hybrid_tensors(kForm, hp, t); }

}  // namespace ns
