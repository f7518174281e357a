// The layer most architectures here are (engine/layers/residual.h
// attention_ffn_layer), over one weights struct per layer:
//   s.x += attention(rms_norm(s.x) * L.attn_norm)
//   s.x += ffn(rms_norm(s.x) * L.ffn_norm)
// An architecture derives from LayerStack<its Layer> (a struct with attn_norm
// and ffn_norm, the norm before its FFN whatever the file calls it), fills
// layers_ through its tensor table, and says what its attention and FFN are.
// Architectures with another residual pattern (kimi-k3) derive from
// Architecture directly.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/arch/architecture.h"
#include "engine/layers/attention.h"
#include "engine/layers/residual.h"
#include "engine/layers/yarn_rope.h"
#include "engine/state/trace.h"

namespace ns {

template <class Layer>
class LayerStack : public Architecture {
 public:
  void layer(int64_t il, ForwardState& s) final {
    const Layer& L = layers_[static_cast<size_t>(il)];
    const int64_t d = hp_.n_embd;
    attention_ffn_layer(
        s, L.attn_norm, L.ffn_norm, d, hp_.rms_eps,
        [&] {
      trace(s, "attn_norm", il, s.xn.data(), d);
      attention(L, il, s);
      trace(s, "attn_out", il, s.out.data(), d);
        },
        [&] {
      trace(s, "ffn_inp", il, s.x.data(), d);
      trace(s, "ffn_norm", il, s.xn.data(), d);
      ffn(L, s);
      trace(s, "ffn_out", il, s.out.data(), d);
    });
  }

 protected:
  explicit LayerStack(const Hparams& hp) : hp_(hp) {}
  // s.xn -> s.out through layer il's attention ...
  virtual void attention(const Layer& L, int64_t il, ForwardState& s) const = 0;
  // ... and its FFN.
  virtual void ffn(const Layer& L, ForwardState& s) const = 0;

  Hparams hp_;
  std::vector<Layer> layers_;
};

// A LayerStack whose attention is GQA with the layer's extras (L.attn,
// L.extras: Q/K/V biases, per-head Q/K norms) and the file's rope, YaRN
// included (qwen*moe, glm4moe); the architecture says what its FFN is.
template <class Layer>
class GqaLayerStack : public LayerStack<Layer> {
 protected:
  explicit GqaLayerStack(const Hparams& hp) : LayerStack<Layer>(hp), rope_(rope_params(hp)) {}
  void attention(const Layer& L, int64_t il, ForwardState& s) const override {
    gqa_attention(L.attn, L.extras, this->hp_, rope_, il, s);
  }

  RopeParams rope_;
};

// The buffers of grouped-query attention (n_head query heads, n_head_kv
// key/value heads, head_dim wide, the cache keeping keys and values
// expanded) with an FFN ff wide.
inline BufferSizes gqa_buffer_sizes(const Hparams& hp, int64_t ff) {
  BufferSizes b;
  b.q = b.att = hp.n_head * hp.head_dim;
  b.k = b.v = b.cache.k_dim = b.cache.v_dim = hp.n_head_kv * hp.head_dim;
  b.ff = ff;
  return b;
}

}  // namespace ns
