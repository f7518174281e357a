#pragma once

#include "engine/arch/architecture.h"

namespace ns {
// glm4moe: GLM-4.5, GLM-4.5-Air, GLM-4.6, GLM-4.7.
std::unique_ptr<Architecture> make_glm4_moe(const Hparams& hp, TensorLoader& loader);
void glm4_moe_tensors(const Hparams& hp, TensorTable& t);  // the blocks' tensors, unbound
extern const ArchTraits glm4_moe_traits;                   // its quirks (engine/spec/hparams.h ArchTraits)
}
