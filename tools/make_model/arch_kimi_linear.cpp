// kimi-linear: Kimi Linear shapes. KDA (Kimi Delta Attention) layers with an
// MLA layer every --mla-every layers, DeepSeek-style FFN (leading dense
// layers, sigmoid-routed experts with a selection bias, shared experts).
// Metadata as llama.cpp's converter (conversion/kimi_linear.py, 2026-09-28)
// writes it: attention.head_count_kv one entry per layer (0 for KDA layers, 1
// for MLA layers: the MQA view of the latent). The tensors are
// engine/arch/kimi_linear.cpp's table (the MLA split into attn_k_b/attn_v_b,
// conv weights [d_conv, 1, d_inner, 1], ssm_a holding -exp(A_log) as
// [1, n_head, 1, 1]). The flags are shared with kimi-k3 (kimi_hybrid.h).
#include <string>
#include <vector>

#include "tools/make_model/architecture.h"
#include "tools/make_model/kimi_hybrid.h"

namespace ns::make_model {
namespace {

class KimiLinearArchitecture : public Architecture {
 public:
  std::string name() const override { return "kimi-linear"; }
  void add_flags(CLI::App& app) override { add_kimi_hybrid_flags(app); }
  void validate(const Shape& s) const override { validate_kimi_hybrid(name(), s); }
  void add_metadata(gguf::GgufWriter& w, const Shape& s) const override { add_kimi_hybrid_metadata(w, s, name()); }
  bool refine(const TensorSpec& t, TensorPlan& plan) const override {
    refine_kimi_hybrid(t, plan);
    return true;
  }
};

const ArchitectureRegistrar kRegister(std::make_unique<KimiLinearArchitecture>());

}  // namespace
}  // namespace ns::make_model
