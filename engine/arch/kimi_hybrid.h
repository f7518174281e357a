// What kimi-linear and kimi-k3 share: the hybrid layer stack (Kimi Delta
// Attention where attention.head_count_kv[il] == 0, rope-less MLA elsewhere),
// the DeepSeek-pattern FFN, their loading and buffer sizes. Each architecture
// file adds its own residual pattern in layer().
#pragma once

#include <string>
#include <vector>

#include "engine/arch/architecture.h"
#include "engine/layers/ffn.h"
#include "engine/layers/kda.h"
#include "engine/layers/mla_attention.h"

namespace ns {

class KimiHybrid : public Architecture {
 public:
  BufferSizes buffer_sizes() const override;

 protected:
  // Loads every layer's attn_norm, attention (KDA or MLA), ffn_norm and FFN;
  // `name` prefixes the error messages. hp is used as given (quirks applied by the caller).
  KimiHybrid(const std::string& name, const Hparams& hp, TensorLoader& t, bool expanded_cache);

  // s.xn = rms_norm(in[t]) * norm for every token.
  void norm(const float* in, const std::vector<float>& w, ForwardState& s) const;
  // s.xn -> s.out through layer il's attention (KDA or MLA).
  void attention(int64_t il, ForwardState& s) const;
  // s.xn -> s.out through layer il's FFN.
  void ffn(int64_t il, ForwardState& s) const;

  struct Layer {
    std::vector<float> attn_norm, ffn_norm;
    bool recurrent = false;
    KdaWeights kda;  // recurrent layers
    MlaWeights mla;  // the others
    DeepseekFfn ffn;
  };

  Hparams hp_;
  KdaShape kda_;
  MlaShape mla_;
  std::vector<Layer> layers_;
};

}  // namespace ns
