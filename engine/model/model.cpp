#include "engine/model/model.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <stdexcept>

#include "common/human_size.h"
#include "engine/spec/tensor_table.h"
#include "engine/state/ops.h"
#include "engine/stream/memory_limit.h"
#include "common/error.h"

namespace ns {

namespace {

// ForwardState's buffers for forward passes of `tokens` tokens, from its one
// list (ForwardState::for_each_buffer): their bytes, and with s, sized to them.
uint64_t size_forward_state(const BufferShape& shape, ForwardState* s) {
  uint64_t bytes = 0;
  ForwardState counted;  // the buffers' types when only counting (nothing is allocated in it)
  (s != nullptr ? *s : counted).for_each_buffer(shape, [&](auto& buffer, int64_t n) {
    if (n == ForwardState::kSizedByContext) return;  // Architecture::context_scratch's
    bytes += static_cast<uint64_t>(n) * sizeof(buffer[0]);
    if (s != nullptr) buffer.resize(static_cast<size_t>(n));
  });
  return bytes;
}

std::string allocation_note(const SequenceState* seqs) {
  if (seqs == nullptr) return "the activation buffers could not be allocated";
  return "the KV cache of " + format_size(seqs->attention_bytes() + seqs->recurrent_bytes()) + " (" +
         std::to_string(seqs->pool_rows()) + " tokens) and its buffers could not be allocated";
}

}  // namespace

std::unique_ptr<Model> Model::load(const std::string& path, const ModelOptions& opts) {
  std::unique_ptr<Model> m(new Model());
  m->files_ = gguf::GgufSet::open(path);
  const gguf::GgufSet& f = *m->files_;
  if (f.n_shards() > 1)
    spdlog::info("{}: a split model of {} shards ({} tensors, {})", path, f.n_shards(), f.tensors().size(),
                 format_size(f.total_bytes()));
  m->hp_ = read_hparams(f.metadata());
  Hparams& hp = m->hp_;
  m->tokenizer_ = Tokenizer::from_gguf(f.metadata());

  TensorLoader t(f);
  // Resident Q4_0 projections into Q4_0_R16 at load, as experts are at landing
  // (the same switch); only counted when no forward pass will run (plan_only).
  if (opts.engine.repack_experts)
    t.set_repack(opts.plan_only ? TensorLoader::Repack::count : TensorLoader::Repack::copy);
  const gguf::TensorInfo* embd = f.find_tensor("token_embd.weight");
  if (!embd || embd->dims.size() != 2)
    throw Error(ErrorKind::bad_model, path + ": tensor 'token_embd.weight' is missing or not 2-D");
  hp.n_vocab = static_cast<int64_t>(embd->dims[1]);
  if (hp.n_vocab != m->tokenizer_->n_vocab())
    throw Error(ErrorKind::bad_model, path + ": token_embd.weight has " + std::to_string(hp.n_vocab) +
                                          " rows but the tokenizer has " + std::to_string(m->tokenizer_->n_vocab()) +
                                          " tokens");
  // Tied embeddings: no output.weight, the embedding matrix is the output head.
  const bool tied_output = !t.has("output.weight");
  TensorTable head;
  head_tensors(head, hp, tied_output, &m->token_embd_, &m->output_norm_, &m->output_);
  head.load(t);
  if (tied_output) m->output_ = m->token_embd_;
  m->arch_ = make_architecture(
      hp, t,
      {.mla_expanded_cache = opts.engine.mla_expanded_cache, .mla_expand_prefill = opts.tuning.mla_expand_prefill});
  // The multi-token-prediction blocks after the last layer (nextn_predict_layers)
  // serve speculative decoding, which nightshift does not do: like the
  // reference's graph, the forward pass never reaches them, so they are neither
  // loaded nor streamed, and the memory plan does not count them.
  for (int64_t il = hp.n_layer; il < hp.n_layer + hp.n_layer_nextn; ++il) {
    const size_t n = t.skip("blk." + std::to_string(il) + ".");
    spdlog::info("{}: block {} is a NextN (multi-token prediction) block: its {} tensors are not loaded", path, il, n);
  }
  for (const auto& name : t.unused())
    spdlog::warn("{}: tensor '{}' is not used by the {} architecture", path, name, hp.arch);
  m->tensors_ = t.used_tensors();
  m->routed_ = t.routed_tensors();  // the table's routed roles: streamed; the rest resident
  m->resident_ = t.resident_tensors();
  m->owned_weights_ = t.take_owned();
  m->repacked_tensors_ = t.repacked_tensors();
  m->repacked_bytes_ = t.repacked_bytes();
  if (m->repacked_tensors_ > 0)
    spdlog::info("{}: {} resident matrices ({}) repacked into Q4_0_R16{}", path, m->repacked_tensors_,
                 format_size(m->repacked_bytes_), m->owned_weights_.empty() ? " (counted only: plan_only)" : "");
  for (const auto& ti : m->tensors_) m->n_params_ += ti.n_elements();

  const EngineOptions& eo = opts.engine;
  if (eo.context > hp.n_ctx_train)
    spdlog::warn(
        "{}: context {} is longer than the model was trained for ({}): positions past it are "
        "extrapolation",
        path, eo.context, hp.n_ctx_train);
  const BufferSizes bs = m->arch_->buffer_sizes();
  // The memory plan's "overhead": RSS less the repacked copies, which the
  // plan counts as resident weights (their mapped pages were dropped).
  const uint64_t rss = current_rss_bytes(), owned = m->owned_weights_.empty() ? 0 : t.repacked_bytes();
  const uint64_t rss_before_buffers = rss > owned ? rss - owned : 0;
  m->pool_ = std::make_unique<ThreadPool>(eo.threads, eo.thread_spin_us);
  const bool predict = hp.is_moe() && opts.tuning.predict_experts && eo.io_mode != IoMode::mmap;
  const int threads = m->pool_->size();

  // What fits (fit_plan.h), decided once from the sizes; every buffer is then
  // allocated below: one that cannot be had is this configuration against
  // this machine, named with its sizes, never a std::bad_alloc out of the engine.
  int64_t n_ctx = std::max<int64_t>(eo.context > 0 ? eo.context : hp.n_ctx_train, 8);
  int64_t n_seq = std::max<int64_t>(1, eo.max_sequences), B = std::max<int64_t>(eo.max_batch_tokens, n_seq);
  try {
    FitInputs in;
    in.path = path;
    in.hp = &hp;
    in.buffers = bs;
    in.activation_bytes = [&](int64_t tokens) {
      return size_forward_state({&hp, bs, tokens, threads, predict}, nullptr) +
             static_cast<uint64_t>(tokens) * sizeof(BatchToken);  // single_
    };
    in.context_scratch = [&](int64_t keys, int64_t queries) {
      return m->arch_->context_scratch(keys, queries, nullptr);
    };
    in.resident = m->resident_;
    in.layout = stream::ExpertLayout::from_tensors(m->routed_, f.path());
    in.overhead_bytes = rss_before_buffers;
    in.repacked_bytes = t.repacked_bytes();
    in.memory_budget = eo.memory_budget;
    if (in.memory_budget == 0) {
      const stream::DefaultBudget d = stream::default_memory_budget();
      in.memory_budget = d.bytes;
      in.budget_source = d.describe();
      if (eo.io_mode != IoMode::mmap) spdlog::info("memory_budget 0: planning with {}", d.describe());
    }
    // Refused before mapping, not at the mapping (a plan-only load maps nothing).
    if (!opts.plan_only) in.address_space = stream::address_space_limit();
    m->fit_ = plan_fit(in, opts);
    const FitPlan& fit = m->fit_;
    for (const std::string& why : fit.why) spdlog::info("{}: {}", path, why);
    if (!fit.fits) throw Error(ErrorKind::invalid_input, fit.reason);
    n_ctx = fit.context;
    n_seq = fit.sequences;
    B = fit.prefill_chunk;
    if (eo.max_batch_tokens <= 0) spdlog::info("prefill chunk: {} tokens per forward pass (from the memory budget)", B);

    ForwardState& s = m->state_;
    size_forward_state({&hp, bs, B, threads, predict}, &s);
    s.max_batch = B;
    m->single_.reserve(static_cast<size_t>(B));
    s.pool = m->pool_.get();
    s.routing_observer = &m->routing_observer_;
    s.trace_observer = &m->trace_observer_;
    // The KV pool (sequence_state.h); a job needing more rows than the pool is refused at add.
    m->seqs_ = std::make_unique<SequenceState>(hp.n_layer, n_seq, n_ctx, bs.cache, B, /*allocate=*/false, fit.kv_tokens,
                                               std::max<int64_t>(0, eo.prefix_cache));
    m->streaming_ = setup_streaming(f, m->routed_, eo, opts.plan_only, opts.tuning, fit.budget);
    if (m->seqs_->pool_rows() < n_seq * n_ctx)
      spdlog::info("KV pool: {} tokens shared by {} sequence(s) of at most {} (the memory budget holds no more)",
                   m->seqs_->pool_rows(), n_seq, n_ctx);
    if (!opts.plan_only) {
      m->seqs_->allocate();
      m->arch_->context_scratch(std::min(n_ctx, m->seqs_->pool_rows()), B, &s);
    }
    s.seqs = m->seqs_.get();
    attach_streaming(*m->streaming_, t.routers(hp.n_layer), opts.tuning, s);
  } catch (const std::bad_alloc&) {
    throw Error(ErrorKind::invalid_input, does_not_fit(path, n_ctx, n_seq, B, allocation_note(m->seqs_.get())));
  } catch (const std::length_error&) {
    throw Error(ErrorKind::invalid_input, does_not_fit(path, n_ctx, n_seq, B, allocation_note(m->seqs_.get())));
  }
  return m;
}

void Model::forward(std::span<const int32_t> tokens, int64_t pos0, bool all_logits, std::vector<float>& logits) {
  single_.clear();
  for (size_t t = 0; t < tokens.size(); ++t)
    single_.push_back(
        {tokens[t], 0, static_cast<int32_t>(pos0 + static_cast<int64_t>(t)), all_logits || t + 1 == tokens.size()});
  forward_batch(single_, logits);
}

void Model::forward_batch(std::span<const BatchToken> batch, std::vector<float>& logits) {
  ForwardState& s = state_;
  const int64_t n = static_cast<int64_t>(batch.size()), d = hp_.n_embd;
  if (n <= 0 || n > s.max_batch)
    throw Error(ErrorKind::internal,
                "forward: a batch of " + std::to_string(n) + " tokens (at most " + std::to_string(s.max_batch) + ")");
  s.n = n;
  const size_t embd_row = token_embd_.row_stride;
  int64_t rows = 0;
  for (int64_t t = 0; t < n; ++t) {
    const BatchToken& b = batch[static_cast<size_t>(t)];
    if (b.token < 0 || b.token >= hp_.n_vocab)
      throw Error(ErrorKind::invalid_input, "token id " + std::to_string(b.token) + " is outside the vocabulary (0.." +
                                                std::to_string(hp_.n_vocab - 1) + ")");
    if (b.seq < 0 || b.seq >= n_seq() || b.pos < 0 || b.pos >= seqs_->seq_rows(b.seq))
      throw Error(ErrorKind::internal, "forward: sequence " + std::to_string(b.seq) + " position " +
                                           std::to_string(b.pos) + " is outside the KV cache (" +
                                           std::to_string(n_seq()) + " sequences of " + std::to_string(n_ctx()) +
                                           ", this one holds " + std::to_string(seqs_->seq_rows(b.seq)) + " rows)");
    s.seq[static_cast<size_t>(t)] = b.seq;
    s.pos[static_cast<size_t>(t)] = b.pos;
    s.tok[static_cast<size_t>(t)] = b.token;
    // A sequence that starts over starts from zero recurrent state (sequence_state.h).
    if (b.pos == 0 && seqs_->n_recurrent_layers() > 0) seqs_->reset_recurrent(b.seq);
    rows += b.logits;
    kernels::dequantize_row(token_embd_.type, static_cast<const uint8_t*>(token_embd_.data) + embd_row * b.token,
                            &s.x[t * d], d);
  }
  trace(s, "inp_embd", -1, s.x.data(), d);
  for (int64_t il = 0; il < hp_.n_layer; ++il) {
    arch_->layer(il, s);
    trace(s, "l_out", il, s.x.data(), d);
  }
  arch_->before_output(s);

  // Only the rows whose logits are wanted go through the output head.
  int64_t r = 0;
  for (int64_t t = 0; t < n; ++t)
    if (batch[static_cast<size_t>(t)].logits)
      ops::rms_norm(&s.x[t * d], output_norm_.data(), d, hp_.rms_eps, &s.xn[r++ * d]);
  logits.resize(static_cast<size_t>(rows * hp_.n_vocab));
  if (rows > 0) kernels::matmul(output_, s.xn.data(), rows, logits.data(), *s.pool, s.mm);
  if (rows == n) {  // the head's rows are the batch's only when every token wants logits
    trace(s, "result_norm", -1, s.xn.data(), d);
    trace(s, "result_output", -1, logits.data(), hp_.n_vocab);
  }
}

}  // namespace ns
