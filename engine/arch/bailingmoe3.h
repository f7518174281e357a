#pragma once

#include "engine/arch/architecture.h"

namespace ns {
// bailingmoe3: Ling 3.0 and Ring 3.0 (inclusionAI; Ling-3.0-tiny/flash), KDA and MLA layers.
std::unique_ptr<Architecture> make_bailingmoe3(const Hparams& hp, TensorLoader& loader, const ArchOptions& options);
void bailingmoe3_tensors(const Hparams& hp, TensorTable& t);  // the blocks' tensors, unbound
extern const ArchTraits bailingmoe3_traits;                   // its quirks (engine/spec/hparams.h ArchTraits)
}
