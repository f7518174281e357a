#pragma once

#include "engine/arch/architecture.h"

namespace ns {
std::unique_ptr<Architecture> make_llama(const Hparams& hp, TensorLoader& loader);
void llama_tensors(const Hparams& hp, TensorTable& t);  // the blocks' tensors, unbound
extern const ArchTraits llama_traits;                   // its quirks (engine/spec/hparams.h ArchTraits)
}
