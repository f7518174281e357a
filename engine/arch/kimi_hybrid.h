// What kimi-linear, kimi-k3 and bailingmoe3 share: the hybrid layer stack
// (Kimi Delta Attention where attention.head_count_kv[il] == 0, MLA
// elsewhere: rope-less in the kimis, rotated in bailingmoe3), the
// DeepSeek-pattern FFN, their tensor table (in the form each architecture's
// converter writes: KimiForm) and buffer sizes. Each architecture file adds
// its own residual pattern in layer().
#pragma once

#include <string>
#include <vector>

#include "engine/arch/architecture.h"
#include "engine/layers/ffn.h"
#include "engine/layers/kda.h"
#include "engine/layers/mla_attention.h"

namespace ns {

// How an architecture's files hold the shared stack.
struct KimiForm {
  const char* name;  // general.architecture, for messages
  KdaForm kda;
  Presence mla_gate;           // MLA's attn_gate (kimi-k3's output gate)
  bool residual_scores;        // kimi-k3: output_res_score and each block's attn_res_score/ffn_res_score
                               // when attn_res.block_size > 0
  bool mla_rotary = false;     // MLA rotates its rope part (bailingmoe3); the kimis never do
  bool mla_head_gate = false;  // attn_gate is one sigmoid per head (bailingmoe3: MlaShape::per_head_gate)
  // The MLA key/value expansion the files carry: either (the kimis' converters
  // wrote both over time), or split attn_k_b/attn_v_b only (bailingmoe3's).
  MlaLayout mla_layout = MlaLayout::either;
  // The shared experts' total width; null: expert_shared_count times the expert width.
  int64_t (*shared_width)(const Hparams& hp) = nullptr;
  // The NextN blocks (skipped) carry nextn.eh_proj, nextn.enorm, nextn.hnorm
  // and layer_output_norm after the FFN (bailingmoe3).
  bool nextn_tensors = false;
  // Hparams::swiglu_clamp_exp limits the routed experts' SwiGLU, swiglu_clamp_shexp
  // the shared experts' and the dense layers' (FfnActivation::Kind::silu_clamp: bailingmoe3).
  bool silu_clamps = false;
};

struct KimiLayer {
  std::vector<float> attn_norm, ffn_norm;
  std::vector<float> attn_res_score, ffn_res_score;  // kimi-k3's residual mix scores, or empty
  bool recurrent = false;
  KdaWeights kda;  // recurrent layers
  MlaWeights mla;  // the others
  DeepseekFfn ffn;
};

struct KimiWeights {
  std::vector<KimiLayer> layers;
  std::vector<float> output_res_score;  // kimi-k3's final residual mix score, or empty
};

// Every tensor of a file of `form` with hp's blocks, bound to w: output_res_score
// (after the output head), then per block attn_norm, the residual scores,
// KDA or MLA (the key/value layout form.mla_layout says; the split one is written), ffn_norm
// and the FFN.
void describe_kimi(const KimiForm& form, const Hparams& hp, TensorTable& t, KimiWeights& w);
// The same, unbound.
void kimi_hybrid_tensors(const KimiForm& form, const Hparams& hp, TensorTable& t);
// The settings both architectures' files are read with (engine/spec/hparams.h
// ArchTraits): none beyond the defaults; their quirks apply when the layers
// are loaded (kimi-k3 adds a reader of its own keys: kimi_k3_traits).
extern const ArchTraits kimi_hybrid_traits;

class KimiHybrid : public Architecture {
 public:
  BufferSizes buffer_sizes() const override;
  uint64_t context_scratch(int64_t keys, int64_t queries, ForwardState* s) const override;

 protected:
  // Loads the blocks through `form`'s table; hp is used as given (quirks
  // applied by the caller).
  KimiHybrid(const KimiForm& form, const Hparams& hp, TensorLoader& t, const ArchOptions& o);

  // s.xn = rms_norm(in[t]) * norm for every token.
  void norm(const float* in, const std::vector<float>& w, ForwardState& s) const;
  // s.xn -> s.out through layer il's attention (KDA or MLA).
  void attention(int64_t il, ForwardState& s) const;
  // s.xn -> s.out through layer il's FFN.
  void ffn(int64_t il, ForwardState& s) const;

  Hparams hp_;
  KdaShape kda_;
  MlaShape mla_;
  int64_t shared_width_;  // KimiForm::shared_width's answer (< 0: the default)
  KimiWeights w_;
};

}  // namespace ns
