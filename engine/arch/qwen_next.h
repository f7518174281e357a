#pragma once

#include "engine/arch/architecture.h"

namespace ns {
// qwen3next and qwen35moe.
std::unique_ptr<Architecture> make_qwen_next(const Hparams& hp, TensorLoader& loader);
}
