#pragma once

#include <string>

#include "engine/arch/architecture.h"
#include "engine/layers/ffn.h"

namespace ns {
// qwen2moe and qwen3moe.
std::unique_ptr<Architecture> make_qwen_moe(const Hparams& hp, TensorLoader& loader);
void qwen_moe_tensors(const Hparams& hp, TensorTable& t);  // the blocks' tensors, unbound

// The Qwen MoE FFN (qwen2moe, qwen3moe; qwen3next and qwen35moe too): routed
// experts, softmax-routed whatever the metadata says (the reference fixes
// it), their chosen weights renormalized or not; the shared expert scaled by
// sigmoid(ffn_gate_inp_shexp . x) where the architecture has one.
struct QwenMoeFfn {
  bool normalize = false;
  bool shared_expert = false;
};
// Its tensors after the FFN's norm, bound to moe.
void qwen_moe_ffn_tensors(TensorTable& t, const std::string& p, const Hparams& hp, QwenMoeFfn form, MoeWeights& moe);
// The shared expert's width: expert_shared_feed_forward_length, else feed_forward_length.
int64_t qwen_shexp_width(const Hparams& hp);
extern const ArchTraits qwen_moe_traits;  // its quirks (engine/spec/hparams.h ArchTraits)
}
