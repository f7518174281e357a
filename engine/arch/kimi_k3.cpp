// kimi-k3: Kimi K3 (llama.cpp's src/models/kimi-k3.cpp, 2026-09-28). The
// kimi-linear layer stack (kimi_hybrid.h: KDA where head_count_kv[il] == 0,
// rope-less MLA elsewhere, DeepSeek-pattern FFN) with:
//   - the situ activation in every FFN (dense, routed, shared: ffn.h),
//   - latent MoE: routed experts in expert_latent_length (ffn.h, MoeWeights),
//   - MLA's sigmoid output gate attn_gate (mla_attention.h),
//   - KDA's full-rank gate ssm_g and lower-bound decay gate (kda.h),
//   - cross-layer attention residuals (attn_res.block_size = B > 0,
//     attn_residuals.h), owned here. With x the residual stream entering
//     layer il and mix_w(x) the mix of the checkpoints banked so far and x:
//       a   = attn(rms_norm(mix_attn_res_score(x)) * attn_norm)
//       bank x (the raw layer input) when il % B == 0
//       x   = a if banked, else x + a       (the stream restarts on banked layers)
//       x  += ffn(rms_norm(mix_ffn_res_score(x)) * ffn_norm)
//     and after the last layer x = mix_output_res_score(x) before the output
//     norm. The attention mix of a banked layer does not see its own input
//     yet; the FFN mix does. Layer 0's attention mix has nothing banked: x.
// expert_weights_norm is read from the file (kimi-linear forces it on).
#include "engine/arch/kimi_k3.h"

#include <cstring>
#include <string>
#include <vector>

#include "engine/arch/kimi_hybrid.h"
#include "engine/gguf/gguf_file.h"
#include "engine/layers/attn_residuals.h"
#include "engine/state/ops.h"
#include "common/error.h"
#include "engine/spec/metadata_keys.h"

namespace ns {
namespace {

// The converter's form: full-rank KDA output gate ssm_g, ssm_a as [n_head],
// MLA's output gate when the checkpoint has one, the residual mix scores.
constexpr KimiForm kForm{"kimi-k3", {.full_rank_gate = true, .flat_a = true}, Presence::optional, true};

// Its own keys: attention residual blocks, latent experts, the situ activation's betas.
void read_kimi_k3_keys(const gguf::GgufFile& f, const std::string& a, Hparams& h) {
  h.attn_res_block_size = optional_hparam_count(f, a + keys::attn_res_block_size, static_cast<uint64_t>(h.n_layer));
  h.n_expert_latent = optional_hparam_count(f, a + keys::expert_latent_length, 1 << 20);
  if (f.has(a + keys::activation_situ_beta)) {
    h.situ_beta = static_cast<float>(f.get_f64(a + keys::activation_situ_beta));
    if (!(h.situ_beta > 0 && h.situ_beta < 1e6)) bad_hparam(f, a + keys::activation_situ_beta, "must be in (0, 1e6)");
  }
  if (f.has(a + keys::activation_situ_linear_beta)) {
    h.situ_linear_beta = static_cast<float>(f.get_f64(a + keys::activation_situ_linear_beta));
    if (!(h.situ_linear_beta < 1e6))
      bad_hparam(f, a + keys::activation_situ_linear_beta, "must be below 1e6 (<= 0: off)");
    if (h.situ_beta <= 0) bad_hparam(f, a + keys::activation_situ_beta, "is missing: situ_linear_beta needs it");
  }
}

const Hparams& checked(const Hparams& hp) {
  if (hp.situ_beta <= 0)
    throw Error(ErrorKind::bad_model,
                "kimi-k3: metadata key 'kimi-k3.activation.situ_beta' is missing (every "
                "kimi-k3 FFN uses the situ activation)");
  return hp;
}

class KimiK3 final : public KimiHybrid {
 public:
  KimiK3(const Hparams& hp, TensorLoader& t, const ArchOptions& o)
      : KimiHybrid(kForm, checked(hp), t, o), block_(hp.attn_res_block_size) {
    if (block_ > 0) n_ckpt_ = (hp.n_layer - 1) / block_ + 1;
  }

  BufferSizes buffer_sizes() const override {
    BufferSizes b = KimiHybrid::buffer_sizes();
    b.res_checkpoints = n_ckpt_;
    return b;
  }

  void layer(int64_t il, ForwardState& s) override {
    const KimiLayer& L = w_.layers[static_cast<size_t>(il)];
    const int64_t d = hp_.n_embd, n = s.n * d;
    if (block_ <= 0) {
      norm(s.x.data(), L.attn_norm, s);
      attention(il, s);
      ops::add(s.x.data(), s.out.data(), n);
      norm(s.x.data(), L.ffn_norm, s);
      ffn(il, s);
      ops::add(s.x.data(), s.out.data(), n);
      return;
    }
    // The mix goes through s.out, free until the attention writes it.
    res_mix_all(s, (il + block_ - 1) / block_, n_ckpt_, L.attn_res_score.data(), d, hp_.rms_eps, s.out.data());
    const bool banked = il % block_ == 0;
    if (banked)
      for (int64_t t = 0; t < s.n; ++t)
        std::memcpy(&s.res_ckpt[static_cast<size_t>((t * n_ckpt_ + il / block_) * d)], &s.x[t * d],
                    sizeof(float) * static_cast<size_t>(d));
    norm(s.out.data(), L.attn_norm, s);
    attention(il, s);
    if (banked)
      std::memcpy(s.x.data(), s.out.data(), sizeof(float) * static_cast<size_t>(n));
    else
      ops::add(s.x.data(), s.out.data(), n);
    res_mix_all(s, il / block_ + 1, n_ckpt_, L.ffn_res_score.data(), d, hp_.rms_eps, s.out.data());
    norm(s.out.data(), L.ffn_norm, s);
    ffn(il, s);
    ops::add(s.x.data(), s.out.data(), n);
  }

  void before_output(ForwardState& s) override {
    if (block_ <= 0) return;
    const int64_t d = hp_.n_embd;
    res_mix_all(s, n_ckpt_, n_ckpt_, w_.output_res_score.data(), d, hp_.rms_eps, s.out.data());
    std::memcpy(s.x.data(), s.out.data(), sizeof(float) * static_cast<size_t>(s.n * d));
  }

 private:
  int64_t block_ = 0;   // attn_res.block_size (0: plain residual stream)
  int64_t n_ckpt_ = 0;  // checkpoints banked per token by the last layer
};

}  // namespace

std::unique_ptr<Architecture> make_kimi_k3(const Hparams& hp, TensorLoader& loader, const ArchOptions& options) {
  return std::make_unique<KimiK3>(hp, loader, options);
}

void kimi_k3_tensors(const Hparams& hp, TensorTable& t) { kimi_hybrid_tensors(kForm, hp, t); }

// The kimi hybrids' settings (none beyond the defaults, as kimi_hybrid_traits) and the reader of its own keys.
const ArchTraits kimi_k3_traits = {.read_keys = read_kimi_k3_keys};

}  // namespace ns
