#include "tools/make_model/table_plans.h"

#include "engine/arch/architecture.h"
#include "engine/gguf/gguf_file.h"
#include "engine/spec/hparams.h"
#include "common/error.h"
#include "tools/make_model/plan_builder.h"

namespace ns::make_model {
namespace {

Init init_for(const TensorSpec& t, const PlanBuilder& p, const Hparams& hp) {
  const uint64_t fan_in = t.dims[0];
  switch (t.role) {
    case TensorRole::embedding: return Init{Init::Kind::normal, 1.0f};
    case TensorRole::norm: return PlanBuilder::norm();
    case TensorRole::bias: return Init{Init::Kind::normal, 0.05f};
    case TensorRole::selection: return PlanBuilder::selection_bias(t.dims[0], static_cast<uint64_t>(hp.n_expert_used));
    case TensorRole::input:
    case TensorRole::router:
    case TensorRole::score:
    case TensorRole::conv:
    case TensorRole::routed: return PlanBuilder::proj(fan_in);
    case TensorRole::ids: return Init{Init::Kind::normal, 0.0f};  // the architecture's refine() fills it
    case TensorRole::residual:
    case TensorRole::routed_residual: return p.to_residual(fan_in);
  }
  throw Error(ErrorKind::internal, "tensor '" + t.name + "': no initial scale for role " + role_name(t.role));
}

}  // namespace

std::vector<TensorPlan> table_plans(const Architecture& arch, const gguf::GgufWriter& w, const Shape& shape) {
  // The hyperparameters exactly as the engine will read them from this file.
  const std::vector<uint8_t> header = w.serialize_header();
  Hparams hp = read_hparams(gguf::GgufFile::parse(header, "the generated metadata"));
  hp.n_vocab = shape.n_vocab;
  PlanBuilder p(shape.n_layer);
  const TensorTable table = tensor_table(hp, shape.tied_output);
  for (const TensorSpec& t : table.specs()) {
    if (t.presence == Presence::tolerated) continue;
    TensorPlan plan{t.name, t.dims, init_for(t, p, hp), keeps_f32(t.role), is_routed(t.role)};
    plan.i32 = t.role == TensorRole::ids;
    if (arch.refine(t, plan)) p.add(std::move(plan));
  }
  return p.take();
}

}  // namespace ns::make_model
