#pragma once

#include "engine/arch/architecture.h"

namespace ns {
std::unique_ptr<Architecture> make_kimi_linear(const Hparams& hp, TensorLoader& loader, const ArchOptions& options);
void kimi_linear_tensors(const Hparams& hp, TensorTable& t);  // the blocks' tensors, unbound
}
