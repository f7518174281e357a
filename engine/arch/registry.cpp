// Maps general.architecture to the file that implements it: one line per
// architecture (how to build it, and its tensor table).
#include "engine/arch/architecture.h"

#include <string_view>

#include "engine/arch/bailingmoe2.h"
#include "engine/arch/bailingmoe3.h"
#include "engine/arch/deepseek2.h"
#include "engine/arch/deepseek32.h"
#include "engine/arch/deepseek4.h"
#include "engine/arch/glm4_moe.h"
#include "engine/arch/gpt_oss.h"
#include "engine/arch/kimi_hybrid.h"
#include "engine/arch/kimi_k3.h"
#include "engine/arch/kimi_linear.h"
#include "engine/arch/llama.h"
#include "engine/arch/minimax_m2.h"
#include "engine/arch/minimax_m3.h"
#include "engine/arch/qwen_moe.h"
#include "engine/arch/qwen_next.h"
#include "common/error.h"

namespace ns {
namespace {

using Make = std::unique_ptr<Architecture> (*)(const Hparams& hp, TensorLoader& t, const ArchOptions& o);

// Make for the architectures that take no options ...
template <std::unique_ptr<Architecture> (*F)(const Hparams&, TensorLoader&)>
std::unique_ptr<Architecture> plain(const Hparams& hp, TensorLoader& t, const ArchOptions&) {
  return F(hp, t);
}
// ... and for those whose MLA cache may be expanded.
template <std::unique_ptr<Architecture> (*F)(const Hparams&, TensorLoader&, const ArchOptions&)>
std::unique_ptr<Architecture> mla(const Hparams& hp, TensorLoader& t, const ArchOptions& o) {
  return F(hp, t, o);
}

struct Entry {
  std::string_view arch;  // general.architecture
  Make make;
  void (*blocks)(const Hparams& hp, TensorTable& t);  // its blocks' tensor table
  const ArchTraits* traits;                           // how its metadata is read (Hparams::from_gguf)
};

// In the order supported_architectures() names them.
constexpr Entry kArchitectures[] = {
    {"llama", plain<make_llama>, llama_tensors, &llama_traits},
    {"deepseek2", mla<make_deepseek2>, deepseek2_tensors, &deepseek2_traits},
    {"kimi-linear", mla<make_kimi_linear>, kimi_linear_tensors, &kimi_hybrid_traits},
    {"kimi-k3", mla<make_kimi_k3>, kimi_k3_tensors, &kimi_k3_traits},
    {"qwen2moe", plain<make_qwen_moe>, qwen_moe_tensors, &qwen_moe_traits},
    {"qwen3moe", plain<make_qwen_moe>, qwen_moe_tensors, &qwen_moe_traits},
    {"qwen3next", plain<make_qwen_next>, qwen_next_tensors, &qwen3next_traits},
    {"qwen35moe", plain<make_qwen_next>, qwen_next_tensors, &qwen35moe_traits},
    {"glm4moe", plain<make_glm4_moe>, glm4_moe_tensors, &glm4_moe_traits},
    {"gpt-oss", plain<make_gpt_oss>, gpt_oss_tensors, &gpt_oss_traits},
    {"minimax-m2", plain<make_minimax_m2>, minimax_m2_tensors, &minimax_m2_traits},
    {"bailingmoe2", plain<make_bailingmoe2>, bailingmoe2_tensors, &bailingmoe2_traits},
    {"bailingmoe3", mla<make_bailingmoe3>, bailingmoe3_tensors, &bailingmoe3_traits},
    {"deepseek32", mla<make_deepseek32>, deepseek32_tensors, &deepseek32_traits},
    {"glm-dsa", mla<make_deepseek32>, deepseek32_tensors, &glm_dsa_traits},
    {"deepseek4", plain<make_deepseek4>, deepseek4_tensors, &deepseek4_traits},
    {"minimax-m3", plain<make_minimax_m3>, minimax_m3_tensors, &minimax_m3_traits},
};

const Entry* find(std::string_view arch) {
  for (const Entry& e : kArchitectures)
    if (e.arch == arch) return &e;
  return nullptr;
}

}  // namespace

const char* supported_architectures() {
  static const std::string names = [] {
    std::string s;
    for (const Entry& e : kArchitectures) s += (s.empty() ? "" : ", ") + std::string(e.arch);
    return s;
  }();
  return names.c_str();
}

std::unique_ptr<Architecture> make_architecture(const Hparams& hp, TensorLoader& loader, const ArchOptions& options) {
  const Entry* e = find(hp.arch);
  if (!e) throw unsupported_architecture(hp.arch);
  return e->make(hp, loader, options);
}

TensorTable tensor_table(const Hparams& hp, bool tied_output) {
  const Entry* e = find(hp.arch);
  if (!e) throw unsupported_architecture(hp.arch);
  TensorTable t;
  head_tensors(t, hp, tied_output, nullptr, nullptr, nullptr);
  e->blocks(hp, t);
  return t;
}

bool architecture_supported(const std::string& arch) { return find(arch) != nullptr; }

Hparams read_hparams(const gguf::GgufFile& f) {
  const std::string arch = f.get_string("general.architecture");
  const Entry* e = find(arch);
  if (!e) throw unsupported_architecture(arch, f.path());
  return Hparams::from_gguf(f, *e->traits);
}

Error unsupported_architecture(const std::string& arch, const std::string& where) {
  return Error(ErrorKind::bad_model, (where.empty() ? "" : where + ": ") + "architecture '" + arch +
                                         "' (general.architecture) is not supported by this build (supported: " +
                                         supported_architectures() + ")");
}

}  // namespace ns
