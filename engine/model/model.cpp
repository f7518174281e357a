#include "engine/model/model.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <stdexcept>

#include "common/human_size.h"
#include "engine/model/tensor_table.h"
#include "engine/ops.h"
#include "engine/stream/memory_limit.h"
#include "common/error.h"

namespace ns {

int64_t prefill_chunk_tokens(uint64_t memory_budget, uint64_t bytes_per_token) {
  const uint64_t fit = memory_budget / 20 / std::max<uint64_t>(bytes_per_token, 1);
  return std::clamp<int64_t>(static_cast<int64_t>(std::min<uint64_t>(fit, 1 << 20)) / 64 * 64, 64, 1024);
}

namespace {

// Bytes of ForwardState per token of max_batch (the sizes Model::load allocates below).
uint64_t activation_bytes_per_token(const Hparams& hp, const BufferSizes& bs, bool predict) {
  const auto w = [](int64_t width) { return static_cast<uint64_t>(std::max<int64_t>(width, 1)); };
  uint64_t floats = 3 * w(hp.n_embd) + w(bs.q) + w(bs.k) + w(bs.v) + w(bs.att) + 2 * w(bs.ff);
  uint64_t ints = 2;  // seq, pos
  if (bs.res_checkpoints > 0) floats += w(bs.res_checkpoints * hp.n_embd) + w(bs.res_checkpoints + 1);
  if (hp.is_moe()) {
    const int64_t ew = std::max(hp.n_embd, hp.expert_width());
    floats += w(hp.n_expert) + w(hp.n_expert_used) + 2 * w(ew) + 2 * w(hp.n_ff_expert) + w(hp.n_expert_used * ew) +
              (hp.n_expert_latent > 0 ? w(hp.n_expert_latent) : 0) + (predict ? w(hp.n_expert) : 0);
    ints += 2 * w(hp.n_expert_used);
  }
  return floats * sizeof(float) + ints * sizeof(int32_t);
}

// What bounds the KV cache beyond pool x per-token bytes, for the plan's line.
std::string kv_pool_note(const SequenceState& st) {
  std::string note;
  if (st.pool_rows() < st.n_seq() * st.n_ctx())
    note = "a pool of " + std::to_string(st.pool_rows()) + " tokens shared by " + std::to_string(st.n_seq()) +
           " sequences of at most " + std::to_string(st.n_ctx());
  if (st.n_sliding_layers() > 0)
    note += (note.empty() ? "" : "; ") + std::to_string(st.n_sliding_layers()) + " of " +
            std::to_string(st.n_attention_layers()) + " layers sliding-window: " +
            std::to_string(st.sliding_bytes_per_sequence() >> 10) + " KiB a sequence whatever the context";
  if (st.n_spare() > 0)
    note += (note.empty() ? "" : "; ") + std::to_string(st.n_spare()) + " prefix-cache snapshots (rows from the pool)";
  return note;
}

// A load whose memory cannot be had: the model, the sizes that asked for it,
// what did not fit, and the fixes.
std::string does_not_fit(const std::string& path, int64_t n_ctx, int64_t n_seq, int64_t B, const std::string& what) {
  return path + ": a context of " + std::to_string(n_ctx) + " tokens for " + std::to_string(n_seq) +
         " sequence(s), " + std::to_string(B) + " tokens a forward pass, does not fit in memory: " + what +
         ". Set a smaller `context` (--context; 0 is the model's own length) or `max_batch`, or give the process "
         "more memory (ulimit -v / LimitAS=, MemoryMax=) and a `memory_budget` that plans within it";
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
  if (opts.streaming.repack_experts)
    t.set_repack(opts.streaming.plan_only ? TensorLoader::Repack::count : TensorLoader::Repack::copy);
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
  m->arch_ = make_architecture(hp, t, opts.arch);
  // The multi-token-prediction blocks after the last layer (nextn_predict_layers)
  // serve speculative decoding, which nightshift does not do: like the
  // reference's graph, the forward pass never reaches them, so they are neither
  // loaded nor streamed, and the memory plan does not count them.
  for (int64_t il = hp.n_layer; il < hp.n_layer + hp.n_layer_nextn; ++il) {
    const size_t n = t.skip("blk." + std::to_string(il) + ".");
    spdlog::info("{}: block {} is a NextN (multi-token prediction) block: its {} tensors are not loaded", path, il, n);
  }
  for (const auto& name : t.unused()) spdlog::warn("{}: tensor '{}' is not used by the {} architecture", path, name, hp.arch);
  m->tensors_ = t.used_tensors();
  m->owned_weights_ = t.take_owned();
  m->repacked_tensors_ = t.repacked_tensors();
  m->repacked_bytes_ = t.repacked_bytes();
  if (m->repacked_tensors_ > 0)
    spdlog::info("{}: {} resident matrices ({}) repacked into Q4_0_R16{}", path, m->repacked_tensors_,
                 format_size(m->repacked_bytes_), m->owned_weights_.empty() ? " (counted only: plan_only)" : "");
  for (const auto& ti : m->tensors_) m->n_params_ += ti.n_elements();

  // context 0: the model's own length (docs/long-context.md); the KV pool
  // below, not the context, is what the memory budget bounds.
  int64_t n_ctx = opts.context > 0 ? opts.context : hp.n_ctx_train;
  if (n_ctx < 8) n_ctx = 8;
  if (opts.context > hp.n_ctx_train)
    spdlog::warn("{}: context {} is longer than the model was trained for ({}): positions past it are "
                 "extrapolation", path, opts.context, hp.n_ctx_train);
  const BufferSizes bs = m->arch_->buffer_sizes();
  // The memory plan's "overhead": RSS less the repacked copies, which the
  // plan counts as resident weights (their mapped pages were dropped).
  const uint64_t rss = current_rss_bytes(), owned = m->owned_weights_.empty() ? 0 : t.repacked_bytes();
  const uint64_t rss_before_buffers = rss > owned ? rss - owned : 0;
  m->pool_ = std::make_unique<ThreadPool>(opts.threads, opts.thread_spin_us);

  // Every buffer of the load is allocated below: one that cannot be had is
  // this configuration against this machine, named with its sizes, never a
  // std::bad_alloc out of the engine.
  int64_t B = opts.max_batch;
  const int64_t n_seq = std::max<int64_t>(1, opts.n_seq);
  try {
    ForwardState& s = m->state_;
    const bool predict = hp.is_moe() && opts.streaming.predict_experts && opts.streaming.io_mode != "mmap";
    if (B <= 0) {
      const uint64_t budget = opts.streaming.memory_budget ? opts.streaming.memory_budget
                                                           : stream::default_memory_budget().bytes;
      B = prefill_chunk_tokens(budget, activation_bytes_per_token(hp, bs, predict));
      spdlog::info("prefill chunk: {} tokens per forward pass (from the memory budget)", B);
    }
    // A decode step takes one token of every sequence at once.
    B = std::max<int64_t>(B, n_seq);
    const auto sz = [B](int64_t width) { return static_cast<size_t>(B * std::max<int64_t>(width, 1)); };
    s.max_batch = B;
    s.x.resize(sz(hp.n_embd));
    s.xn.resize(sz(hp.n_embd));
    s.out.resize(sz(hp.n_embd));
    s.q.resize(sz(bs.q));
    s.k.resize(sz(bs.k));
    s.v.resize(sz(bs.v));
    s.att.resize(sz(bs.att));
    s.ff_a.resize(sz(bs.ff));
    s.ff_b.resize(sz(bs.ff));
    s.q16.resize(static_cast<size_t>(m->pool_->size() * std::max(bs.q, bs.k)));
    if (bs.res_checkpoints > 0) {
      s.res_ckpt.resize(sz(bs.res_checkpoints * hp.n_embd));
      s.res_scores.resize(sz(bs.res_checkpoints + 1));
    }
    if (hp.is_moe()) {
      const int64_t ew = std::max(hp.n_embd, hp.expert_width());  // expert rows: full or latent width
      s.router.resize(sz(hp.n_expert));
      s.chosen.resize(sz(hp.n_expert_used));
      s.chosen_w.resize(sz(hp.n_expert_used));
      s.expert_count.resize(static_cast<size_t>(hp.n_expert));
      s.expert_first.resize(static_cast<size_t>(hp.n_expert));
      s.expert_rows.resize(sz(hp.n_expert_used));
      s.ex_in.resize(sz(ew));
      s.ex_out.resize(sz(ew));
      s.ex_a.resize(sz(hp.n_ff_expert));
      s.ex_b.resize(sz(hp.n_ff_expert));
      s.slot_out.resize(sz(hp.n_expert_used * ew));
      if (hp.n_expert_latent > 0) s.moe_latent.resize(sz(hp.n_expert_latent));
      s.active.resize(static_cast<size_t>(2 * hp.n_expert));
      if (predict) {
        s.predict_logits.resize(sz(hp.n_expert));
        s.predicted.resize(static_cast<size_t>(hp.n_expert));
        s.routers.reserve(static_cast<size_t>(hp.n_layer));  // filled by attach_streaming; counted here
      }
    }
    s.seq.resize(static_cast<size_t>(B));
    s.pos.resize(static_cast<size_t>(B));
    m->single_.reserve(static_cast<size_t>(B));
    s.pool = m->pool_.get();
    s.routing_observer = &m->routing_observer_;

    // The KV pool (sequence_state.h): max_batch full contexts when the budget
    // holds them, else halved until the plan fits (kv_tokens 0), never below
    // kMinPoolRows; a job needing more rows than the pool is refused at add.
    const int64_t full_pool = n_seq * n_ctx;
    const bool fit_pool = opts.kv_tokens <= 0;
    int64_t pool = fit_pool ? full_pool : std::min(opts.kv_tokens, full_pool);
    const int64_t min_pool = std::min(full_pool, std::max<int64_t>(kMinPoolRows, n_seq));
    const uint64_t activation_bytes = forward_state_bytes(s) + m->batch_list_bytes();
    for (;;) {
      // Sliding layers' rings hold every position one forward pass of B tokens writes or reads.
      // Sized first, allocated once the plan accepts it (64 x 128K contexts may not fit RAM).
      m->seqs_ = std::make_unique<SequenceState>(hp.n_layer, n_seq, n_ctx, bs.cache, B, /*allocate=*/false, pool,
                                                 std::max<int64_t>(0, opts.prefix_cache));
      StreamingFootprint fp;
      fp.kv_cache_bytes = m->seqs_->attention_bytes();
      fp.kv_cache_note = kv_pool_note(*m->seqs_);
      fp.recurrent_bytes = m->seqs_->recurrent_bytes();
      // The scratch that grows with the context, for the longest sequence this pool admits.
      const int64_t longest = std::min(n_ctx, m->seqs_->pool_rows());
      fp.activation_bytes = activation_bytes + m->arch_->context_scratch(longest, B, nullptr);
      fp.overhead_bytes = rss_before_buffers;
      fp.repacked_bytes = t.repacked_bytes();
      try {
        m->streaming_ = setup_streaming(f, m->tensors_, opts.streaming, fp);
        break;
      } catch (const Error& e) {
        if (!fit_pool || e.kind() != ErrorKind::invalid_input || pool <= min_pool) throw;
        const int64_t next = std::max(min_pool, pool / 2);
        spdlog::info("{}: a KV pool of {} tokens does not fit the memory budget; trying {}", path, pool, next);
        pool = next;
      }
    }
    if (m->seqs_->pool_rows() < full_pool)
      spdlog::info("KV pool: {} tokens shared by {} sequence(s) of at most {} (the memory budget holds no more)",
                   m->seqs_->pool_rows(), n_seq, n_ctx);
    if (!opts.streaming.plan_only) {
      // Refused before mapping, not at the mapping: under `ulimit -v` the KV
      // cache the budget accepts may still be more than this process may map.
      const uint64_t kv = m->seqs_->attention_bytes() + m->seqs_->recurrent_bytes();
      const uint64_t buffers = activation_bytes + m->arch_->context_scratch(std::min(n_ctx, m->seqs_->pool_rows()), B, nullptr);
      if (const auto as = stream::address_space_limit(); as && kv + buffers > as->left()) {
        throw Error(ErrorKind::invalid_input,
                    does_not_fit(path, n_ctx, n_seq, B,
                                 "its KV cache (" + format_size(kv) + ", " + std::to_string(m->seqs_->pool_rows()) +
                                     " tokens) and buffers (" + format_size(buffers) + ") need " +
                                     format_size(kv + buffers) + " of address space, and this process may map " +
                                     format_size(as->left()) + " more (ulimit -v " + format_size(as->limit) + ")"));
      }
      m->seqs_->allocate();
      m->arch_->context_scratch(std::min(n_ctx, m->seqs_->pool_rows()), B, &s);
    }
    s.seqs = m->seqs_.get();
    attach_streaming(*m->streaming_, f, opts.streaming, hp.n_layer, s);
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
    single_.push_back({tokens[t], 0, static_cast<int32_t>(pos0 + static_cast<int64_t>(t)), all_logits || t + 1 == tokens.size()});
  forward_batch(single_, logits);
}

void Model::forward_batch(std::span<const BatchToken> batch, std::vector<float>& logits) {
  ForwardState& s = state_;
  const int64_t n = static_cast<int64_t>(batch.size()), d = hp_.n_embd;
  if (n <= 0 || n > s.max_batch)
    throw Error(ErrorKind::internal, "forward: a batch of " + std::to_string(n) + " tokens (at most " +
                                         std::to_string(s.max_batch) + ")");
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
                                           std::to_string(b.pos) + " is outside the KV cache (" + std::to_string(n_seq()) +
                                           " sequences of " + std::to_string(n_ctx()) + ", this one holds " +
                                           std::to_string(seqs_->seq_rows(b.seq)) + " rows)");
    s.seq[static_cast<size_t>(t)] = b.seq;
    s.pos[static_cast<size_t>(t)] = b.pos;
    // A sequence that starts over starts from zero recurrent state (sequence_state.h).
    if (b.pos == 0 && seqs_->n_recurrent_layers() > 0) seqs_->reset_recurrent(b.seq);
    rows += b.logits;
    kernels::dequantize_row(token_embd_.type, static_cast<const uint8_t*>(token_embd_.data) + embd_row * b.token,
                            &s.x[t * d], d);
  }
  for (int64_t il = 0; il < hp_.n_layer; ++il) arch_->layer(il, s);
  arch_->before_output(s);

  // Only the rows whose logits are wanted go through the output head.
  int64_t r = 0;
  for (int64_t t = 0; t < n; ++t)
    if (batch[static_cast<size_t>(t)].logits)
      ops::rms_norm(&s.x[t * d], output_norm_.data(), d, hp_.rms_eps, &s.xn[r++ * d]);
  logits.resize(static_cast<size_t>(rows * hp_.n_vocab));
  if (rows > 0) kernels::matmul(output_, s.xn.data(), rows, logits.data(), *s.pool, s.mm);
}

}  // namespace ns
