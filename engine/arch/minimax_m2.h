#pragma once

#include "engine/arch/architecture.h"

namespace ns {
// minimax-m2: MiniMax-M2 (230B-A10B).
std::unique_ptr<Architecture> make_minimax_m2(const Hparams& hp, TensorLoader& loader);
void minimax_m2_tensors(const Hparams& hp, TensorTable& t);  // the blocks' tensors, unbound
extern const ArchTraits minimax_m2_traits;                   // its quirks (engine/spec/hparams.h ArchTraits)
}
