#pragma once

#include "engine/arch/architecture.h"

namespace ns {
std::unique_ptr<Architecture> make_deepseek4(const Hparams& hp, TensorLoader& loader);
void deepseek4_tensors(const Hparams& hp, TensorTable& t);  // the blocks' tensors, unbound
extern const ArchTraits deepseek4_traits;                   // its quirks (engine/spec/hparams.h ArchTraits)
}
