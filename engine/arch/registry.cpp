// Maps general.architecture to the file that implements it.
#include "engine/arch/architecture.h"

#include <string_view>

#include "engine/arch/deepseek2.h"
#include "engine/arch/glm4_moe.h"
#include "engine/arch/gpt_oss.h"
#include "engine/arch/kimi_k3.h"
#include "engine/arch/kimi_linear.h"
#include "engine/arch/llama.h"
#include "engine/arch/qwen_moe.h"
#include "engine/arch/qwen_next.h"
#include "common/error.h"

namespace ns {

const char* supported_architectures() {
  return "llama, deepseek2, kimi-linear, kimi-k3, qwen2moe, qwen3moe, qwen3next, qwen35moe, glm4moe, gpt-oss";
}

std::unique_ptr<Architecture> make_architecture(const Hparams& hp, TensorLoader& loader, const ArchOptions& options) {
  if (hp.arch == "llama") {
    // engine/arch/llama.cpp rotates with ops::rope, which takes no YaRN parameters.
    if (hp.rope_scaling == RopeScaling::yarn)
      throw Error(ErrorKind::bad_model, "llama: YaRN rope scaling (llama.rope.scaling.type = yarn) is not supported "
                                        "for this architecture yet (supported: none, linear)");
    return make_llama(hp, loader);
  }
  if (hp.arch == "deepseek2") return make_deepseek2(hp, loader, options.mla_expanded_cache);
  if (hp.arch == "kimi-linear") return make_kimi_linear(hp, loader, options.mla_expanded_cache);
  if (hp.arch == "kimi-k3") return make_kimi_k3(hp, loader, options.mla_expanded_cache);
  if (hp.arch == "qwen2moe" || hp.arch == "qwen3moe") return make_qwen_moe(hp, loader);
  if (hp.arch == "qwen3next" || hp.arch == "qwen35moe") return make_qwen_next(hp, loader);
  if (hp.arch == "glm4moe") return make_glm4_moe(hp, loader);
  if (hp.arch == "gpt-oss") return make_gpt_oss(hp, loader);
  throw unsupported_architecture(hp.arch);
}

bool architecture_supported(const std::string& arch) {
  std::string_view rest = supported_architectures();
  while (!rest.empty()) {
    const size_t comma = rest.find(", ");
    if (rest.substr(0, comma) == arch) return true;
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 2);
  }
  return false;
}

Error unsupported_architecture(const std::string& arch, const std::string& where) {
  return Error(ErrorKind::bad_model, (where.empty() ? "" : where + ": ") + "architecture '" + arch +
                                         "' (general.architecture) is not supported by this build (supported: " +
                                         supported_architectures() + ")");
}

}  // namespace ns
