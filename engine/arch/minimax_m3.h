#pragma once

#include "engine/arch/architecture.h"

namespace ns {
// minimax-m3: MiniMax-M3 (428B-A23B), MiniMax sparse attention (engine/layers/msa_indexer.h).
std::unique_ptr<Architecture> make_minimax_m3(const Hparams& hp, TensorLoader& loader);
void minimax_m3_tensors(const Hparams& hp, TensorTable& t);  // the blocks' tensors, unbound
extern const ArchTraits minimax_m3_traits;                   // its quirks (engine/spec/hparams.h ArchTraits)
}
