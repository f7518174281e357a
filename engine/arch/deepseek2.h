#pragma once

#include "engine/arch/architecture.h"

namespace ns {
// expanded_cache: see ArchOptions::mla_expanded_cache (fused attn_kv_b files only).
std::unique_ptr<Architecture> make_deepseek2(const Hparams& hp, TensorLoader& loader, const ArchOptions& options);
void deepseek2_tensors(const Hparams& hp, TensorTable& t);  // the blocks' tensors, unbound
extern const ArchTraits deepseek2_traits;                   // its quirks (engine/spec/hparams.h ArchTraits)
}
