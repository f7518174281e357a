// The generator's side of an architecture's tensor table
// (engine/spec/tensor_table.h): the tensors nightshift-make-model writes for
// an architecture the engine describes with one, read from the engine's table
// for the hyperparameters the engine will read from the metadata.
#pragma once

#include <vector>

#include "engine/gguf/gguf_writer.h"
#include "tools/make_model/architecture.h"

namespace ns::make_model {

// Every tensor of the model whose metadata `w` holds (general.architecture
// and the "<arch>.*" keys, already set), in table order: those the table
// lists but the generator does not write (Presence::tolerated) left out,
// initial scales from the roles (PlanBuilder's: ~unit outputs for unit inputs,
// residual writers scaled down with depth, norms near 1), norms, biases and
// routers in F32, routed stacks marked as experts.
// `arch` refines each plan (Architecture::refine).
std::vector<TensorPlan> table_plans(const Architecture& arch, const gguf::GgufWriter& w, const Shape& shape);

}  // namespace ns::make_model
