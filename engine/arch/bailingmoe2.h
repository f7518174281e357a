#pragma once

#include "engine/arch/architecture.h"

namespace ns {
// bailingmoe2: Ling 2.0 and Ring 2.0 (inclusionAI; Ling-mini/flash/1T).
std::unique_ptr<Architecture> make_bailingmoe2(const Hparams& hp, TensorLoader& loader);
void bailingmoe2_tensors(const Hparams& hp, TensorTable& t);  // the blocks' tensors, unbound
extern const ArchTraits bailingmoe2_traits;                   // its quirks (engine/spec/hparams.h ArchTraits)
}
