#pragma once

#include "engine/arch/architecture.h"

namespace ns {
std::unique_ptr<Architecture> make_kimi_k3(const Hparams& hp, TensorLoader& loader, const ArchOptions& options);
void kimi_k3_tensors(const Hparams& hp, TensorTable& t);  // the blocks' tensors, unbound
extern const ArchTraits kimi_k3_traits;                   // its quirks (engine/spec/hparams.h ArchTraits)
}
