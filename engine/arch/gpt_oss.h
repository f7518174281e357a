#pragma once

#include "engine/arch/architecture.h"

namespace ns {
// gpt-oss (OpenAI's open-weight MoE models; the reference calls it OPENAI_MOE).
std::unique_ptr<Architecture> make_gpt_oss(const Hparams& hp, TensorLoader& loader);
void gpt_oss_tensors(const Hparams& hp, TensorTable& t);  // the blocks' tensors, unbound
extern const ArchTraits gpt_oss_traits;                   // its quirks (engine/spec/hparams.h ArchTraits)
}
