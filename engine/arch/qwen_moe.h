#pragma once

#include "engine/arch/architecture.h"

namespace ns {
// qwen2moe and qwen3moe.
std::unique_ptr<Architecture> make_qwen_moe(const Hparams& hp, TensorLoader& loader);
void qwen_moe_tensors(const Hparams& hp, TensorTable& t);  // the blocks' tensors, unbound
}
