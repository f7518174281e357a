// plan_fit(): the sequences, KV pool and prefill chunk that fit (contract in fit_plan.h).
#include "engine/model/fit_plan.h"

#include <algorithm>
#include <cstdint>

#include "common/human_size.h"
#include "engine/model/model.h"
#include "engine/state/sequence_state.h"

namespace ns {
namespace {

// Scratch the kernels and the reader allocate on first use (quantized
// activations, per-thread buffers, the reader's bookkeeping) is not in the
// RSS measured at load; this much is set aside for it.
constexpr uint64_t kRuntimeSlack = 16ull << 20;

// What bounds the KV cache beyond pool x per-token bytes, for the plan's line.
std::string kv_pool_note(const SequenceState& st) {
  std::string note;
  if (st.pool_rows() < st.n_seq() * st.n_ctx())
    note = "a pool of " + std::to_string(st.pool_rows()) + " tokens shared by " + std::to_string(st.n_seq()) +
           " sequences of at most " + std::to_string(st.n_ctx());
  if (st.n_sliding_layers() > 0)
    note += (note.empty() ? "" : "; ") + std::to_string(st.n_sliding_layers()) + " of " +
            std::to_string(st.n_attention_layers()) +
            " layers sliding-window: " + std::to_string(st.sliding_bytes_per_sequence() >> 10) +
            " KiB a sequence whatever the context";
  if (st.n_spare() > 0)
    note += (note.empty() ? "" : "; ") + std::to_string(st.n_spare()) + " prefix-cache snapshots (rows from the pool)";
  return note;
}

// One candidate (sequences, pool): its memory plan, or why it does not fit.
struct Candidate {
  std::optional<stream::BudgetPlan> budget;
  int64_t pool_rows = 0;
  uint64_t scratch = 0;
  std::string refusal;  // empty: it fits
};

Candidate weigh(const FitInputs& in, const ModelOptions& opts, int64_t n_seq, int64_t n_ctx, int64_t tokens,
                uint64_t activation, int64_t pool) {
  Candidate c;
  // Sized, not allocated (64 x 128K contexts may not fit RAM); sliding layers' rings hold every position one
  // forward pass of `tokens` writes or reads.
  const SequenceState st(in.hp->n_layer, n_seq, n_ctx, in.buffers.cache, tokens, /*allocate=*/false, pool,
                         std::max<int64_t>(0, opts.engine.prefix_cache));
  c.pool_rows = st.pool_rows();
  // The scratch that grows with the context, for the longest sequence this pool admits.
  c.scratch = in.context_scratch(std::min(n_ctx, st.pool_rows()), tokens);
  if (opts.engine.io_mode != IoMode::mmap) {
    stream::BudgetInputs b;
    b.memory_budget = in.memory_budget;
    b.budget_source = in.budget_source;
    b.kv_cache_bytes = st.attention_bytes();
    b.kv_cache_note = kv_pool_note(st);
    b.recurrent_bytes = st.recurrent_bytes();
    b.activation_bytes = activation + c.scratch;
    b.io_buffer_bytes = 0;  // experts are read straight into cache slots
    b.overhead_bytes = in.overhead_bytes + kRuntimeSlack;
    b.repacked_bytes = in.repacked_bytes;
    c.budget = stream::fit_budget(in.resident, in.layout, b, in.path);
    c.refusal = c.budget->refusal;
  }
  // Under `ulimit -v` the KV cache the budget accepts may still be more than this process may map.
  if (c.refusal.empty() && in.address_space) {
    const uint64_t kv = st.attention_bytes() + st.recurrent_bytes(), buffers = activation + c.scratch;
    if (kv + buffers > in.address_space->left()) {
      c.refusal =
          does_not_fit(in.path, n_ctx, n_seq, tokens,
                       "its KV cache (" + format_size(kv) + ", " + std::to_string(st.pool_rows()) +
                           " tokens) and buffers (" + format_size(buffers) + ") need " + format_size(kv + buffers) +
                           " of address space, and this process may map " + format_size(in.address_space->left()) +
                           " more (ulimit -v " + format_size(in.address_space->limit) + ")");
    }
  }
  return c;
}

}  // namespace

int64_t prefill_chunk_tokens(uint64_t memory_budget, uint64_t bytes_per_token) {
  const uint64_t fit = memory_budget / 20 / std::max<uint64_t>(bytes_per_token, 1);
  return std::clamp<int64_t>(static_cast<int64_t>(std::min<uint64_t>(fit, 1 << 20)) / 64 * 64, 64, 1024);
}

std::string does_not_fit(const std::string& path, int64_t n_ctx, int64_t n_seq, int64_t tokens,
                         const std::string& what) {
  return path + ": a context of " + std::to_string(n_ctx) + " tokens for " + std::to_string(n_seq) + " sequence(s), " +
         std::to_string(tokens) + " tokens a forward pass, does not fit in memory: " + what +
         ". Set a smaller `context` (--context; 0 is the model's own length) or `max_batch`, or give the process "
         "more memory (ulimit -v / LimitAS=, MemoryMax=) and a `memory_budget` that plans within it";
}

FitPlan plan_fit(const FitInputs& in, const ModelOptions& opts) {
  const Hparams& hp = *in.hp;
  FitPlan p;
  // context 0: the model's own length (docs/long-context.md); the KV pool, not the context, is what the
  // memory budget bounds.
  const EngineOptions& eo = opts.engine;
  p.context = std::max<int64_t>(eo.context > 0 ? eo.context : hp.n_ctx_train, 8);
  p.sequences_asked = std::max<int64_t>(1, eo.max_sequences);
  int64_t chunk = eo.max_batch_tokens;
  if (chunk <= 0) {
    // What one more token of a pass adds to its buffers: counted from the list the load allocates from
    // (ForwardState::for_each_buffer through in.activation_bytes), less what a pass holds at any length.
    const uint64_t per_token = in.activation_bytes(2) - in.activation_bytes(1);
    chunk = prefill_chunk_tokens(in.memory_budget, per_token);
  }
  const int64_t n_ctx = p.context;
  for (int64_t n_seq = p.sequences_asked;; n_seq /= 2) {
    // A decode step takes one token of every sequence at once.
    const int64_t tokens = std::max(chunk, n_seq);
    const uint64_t activation = in.activation_bytes(tokens);
    int64_t full_pool = 0;  // past int64: SequenceState (in weigh) refuses it as beyond any machine
    if (__builtin_mul_overflow(n_seq, n_ctx, &full_pool)) full_pool = INT64_MAX;
    const bool fit_pool = eo.kv_tokens <= 0;
    int64_t pool = fit_pool ? full_pool : std::min(eo.kv_tokens, full_pool);
    const int64_t min_pool = std::min(full_pool, std::max<int64_t>(kMinPoolRows, n_seq));
    for (;;) {
      Candidate c = weigh(in, opts, n_seq, n_ctx, tokens, activation, pool);
      const bool over_budget = c.budget && !c.budget->refusal.empty();
      if (c.refusal.empty()) {
        p.fits = true;
        p.sequences = n_seq;
        p.kv_tokens = c.pool_rows;
        p.prefill_chunk = tokens;
        p.activation_bytes = activation;
        p.context_scratch_bytes = c.scratch;
        p.budget = std::move(c.budget);
        return p;
      }
      p.reason = std::move(c.refusal);
      // Only the budget shrinks the pool: a context the address space cannot map is refused as asked
      // (`ulimit -v`: the fix is a shorter context, which the reason names), not served by a sliver of it.
      if (!over_budget || !fit_pool || pool <= min_pool) break;
      const int64_t next = std::max(min_pool, pool / 2);
      p.why.push_back("a KV pool of " + std::to_string(pool) + " tokens does not fit the memory budget; trying " +
                      std::to_string(next));
      pool = next;
    }
    if (!eo.fewer_sequences || n_seq <= 1) return p;
    p.why.push_back("a batch of " + std::to_string(n_seq) +
                    " sequences does not fit even with the smallest KV pool; "
                    "trying " +
                    std::to_string(n_seq / 2));
  }
}

}  // namespace ns
