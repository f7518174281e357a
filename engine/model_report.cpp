// describe_model(): `nightshift model info`'s figures (contract in model_report.h).
#include "engine/model_report.h"

#include <sys/sysmacros.h>

#include <algorithm>
#include <filesystem>
#include <memory>

#include "common/error.h"
#include "engine/model/model.h"
#include "engine/stream/budget_planner.h"

namespace ns {
namespace {

MemoryPlanReport plan_report(const Model& model, const stream::BudgetPlan& plan) {
  const Hparams& hp = model.hparams();
  const SequenceState& st = model.sequence_state();
  MemoryPlanReport p;
  p.context = model.n_ctx();
  p.kv_tokens = st.pool_rows();
  p.max_batch = static_cast<int>(model.fit().sequences);
  p.max_batch_asked = static_cast<int>(model.fit().sequences_asked);
  p.fit_steps = model.fit().why;
  p.resident_bytes = plan.resident_bytes;
  p.kv_cache_bytes = plan.kv_cache_bytes;
  p.recurrent_bytes = plan.recurrent_bytes;
  p.cache_experts = plan.cache_experts;
  p.streamed_experts = plan.streamed_experts;
  p.minimum_budget = plan.minimum_budget;
  // The batch x context trade-off (docs/long-context.md): 4K, 8K, ... up to the model's own length.
  std::vector<int64_t> contexts;
  for (int64_t c = 4096; c < hp.n_ctx_train; c *= 2) contexts.push_back(c);
  contexts.push_back(std::max<int64_t>(hp.n_ctx_train, 1));
  const auto tradeoff = stream::kv_tradeoff(
      plan, st.bytes_per_token(), st.sliding_bytes_per_sequence() + st.recurrent_bytes_per_sequence(), contexts);
  for (const auto& t : tradeoff) p.batch_x_context.push_back({t.context, t.max_batch, t.kv_tokens});
  p.description = plan.describe();
  p.batch_x_context_text = stream::describe_tradeoff(tradeoff);
  return p;
}

ShardReport shard_report(const gguf::GgufFile& f) {
  ShardReport s;
  s.path = f.path();
  s.bytes = f.file_size();
  std::error_code ec;
  const std::filesystem::path real = std::filesystem::canonical(f.path(), ec);
  s.resolved_path = ec ? f.path() : real.string();
  s.device_major = major(static_cast<dev_t>(f.device()));
  s.device_minor = minor(static_cast<dev_t>(f.device()));
  return s;
}

}  // namespace

ModelReport describe_model(const std::string& path, const ModelReportOptions& opts) {
  // Loading builds the tokenizer, the architecture's shape checks and the KV
  // cache geometry; mmap mode reads no weights, a budget adds the memory plan.
  // As Engine::load sizes a daemon's model: max_batch sequences of `context`
  // tokens, the tokens per forward pass sized from the budget; the plan, not
  // the cache: nothing is generated here.
  ModelOptions mo;
  mo.engine = opts.engine;
  mo.plan_only = true;
  mo.engine.max_batch_tokens = 0;
  mo.engine.threads = 1;
  mo.engine.io_mode = opts.plan ? IoMode::uring : IoMode::mmap;
  // As the daemon plans it (EngineHost::load): a budget that cannot hold
  // max_batch contexts may hold fewer (plan_fit).
  mo.engine.fewer_sequences = opts.plan;
  const std::unique_ptr<Model> model = Model::load(path, mo);
  const gguf::GgufSet& set = model->files();
  const gguf::GgufFile& f = set.metadata();
  const Hparams& hp = model->hparams();
  ModelReport r;
  // The file's tensors, less what the model skips (NextN blocks), split by the
  // table's roles: the resident ones are active for every token ...
  for (const auto& t : model->resident_tensors()) {
    r.parameters += t.n_elements();
    ++r.tensor_types[std::string(gguf::type_name(t.type))];
    r.active_parameters_per_token += t.n_elements();
    r.resident_bytes += t.nbytes;
  }
  // ... the routed stacks, streamed, only n_expert_used of their experts.
  const stream::ExpertLayout& layout = model->streaming().layout;
  for (const auto& t : model->routed_tensors()) {
    r.parameters += t.n_elements();
    ++r.tensor_types[std::string(gguf::type_name(t.type))];
    const uint64_t n_expert = t.dims[2];
    r.active_parameters_per_token +=
        t.n_elements() / n_expert * static_cast<uint64_t>(std::max<int64_t>(hp.n_expert_used, 0));
  }
  for (uint32_t l = 0; l < layout.n_layers(); ++l)
    if (layout.is_moe_layer(l)) {
      r.bytes_per_expert = layout.layer(l).expert_bytes();  // the first MoE layer's expert
      break;
    }
  r.name = hp.name;
  r.architecture = hp.arch;
  r.gguf_version = f.version();
  r.file_bytes = set.total_bytes();
  for (size_t i = 0; i < set.n_shards(); ++i) r.shards.push_back(shard_report(set.shard(i)));
  r.tensors = model->tensors().size();
  r.tensors_not_loaded = set.tensors().size() - model->tensors().size();
  r.n_layer = hp.n_layer;
  r.n_embd = hp.n_embd;
  r.n_head = hp.n_head;
  r.n_head_kv = hp.n_head_kv;
  r.n_ff = hp.n_ff;
  r.n_expert = hp.n_expert;
  r.n_expert_used = hp.n_expert_used;
  r.kv_bytes_per_token = model->sequence_state().bytes_per_token();
  r.recurrent_bytes_per_sequence = model->sequence_state().recurrent_bytes_per_sequence();
  r.context_length = hp.n_ctx_train;
  r.tokenizer = f.get_string_or("tokenizer.ggml.model", "");
  r.pre_tokenizer = f.get_string_or("tokenizer.ggml.pre", "");
  if (model->streaming().planned) {
    const stream::BudgetPlan& plan = model->streaming().plan;
    r.memory_plan = plan_report(*model, plan);
    r.memory_plan->prefix_cache = opts.engine.prefix_cache;
    r.memory_plan->memory_budget = opts.engine.memory_budget;  // as given (0: the machine's, which the plan names)
    const stream::DiskBoundEstimate e =
        stream::estimate_disk_bound(plan, static_cast<int64_t>(model->streaming().layout.n_moe_layers()), hp.n_expert,
                                    hp.n_expert_used, opts.disk_bytes_per_s);
    if (e.bytes_per_expert > 0) {
      r.disk_bound = DiskBoundReport{e.hit_rate,   e.bytes_per_token_batch1, e.tok_s_batch1,
                                     e.full_batch, e.bytes_per_token_full,   e.tok_s_full};
    }
  }
  return r;
}

}  // namespace ns
