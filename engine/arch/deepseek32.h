#pragma once

#include "engine/arch/architecture.h"

namespace ns {
// DeepSeek sparse attention: deepseek32 (DeepSeek V3.2) and glm-dsa (GLM-5.x), one
// implementation; their traits say how each reads its indexer (see the .cpp).
std::unique_ptr<Architecture> make_deepseek32(const Hparams& hp, TensorLoader& loader, const ArchOptions& options);
void deepseek32_tensors(const Hparams& hp, TensorTable& t);  // the blocks' tensors, unbound (both families)
extern const ArchTraits deepseek32_traits;
extern const ArchTraits glm_dsa_traits;
}
