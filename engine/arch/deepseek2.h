#pragma once

#include "engine/arch/architecture.h"

namespace ns {
std::unique_ptr<Architecture> make_deepseek2(const Hparams& hp, TensorLoader& loader);
}
