#pragma once

#include "engine/arch/architecture.h"

namespace ns {
// qwen3next and qwen35moe.
std::unique_ptr<Architecture> make_qwen_next(const Hparams& hp, TensorLoader& loader);
void qwen_next_tensors(const Hparams& hp, TensorTable& t);  // the blocks' tensors, unbound
extern const ArchTraits qwen3next_traits;                   // its quirks (engine/spec/hparams.h ArchTraits)
extern const ArchTraits qwen35moe_traits;                   // its quirks (engine/spec/hparams.h ArchTraits)
}
