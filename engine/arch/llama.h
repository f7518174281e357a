#pragma once

#include "engine/arch/architecture.h"

namespace ns {
std::unique_ptr<Architecture> make_llama(const Hparams& hp, TensorLoader& loader);
}
