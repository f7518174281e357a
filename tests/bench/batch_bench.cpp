// Batched decode / prefill / routing bench on one model (run by batch_bench.sh
// and streaming_bench.sh, not by ctest).
//
//   ns_bench_batch decode  MODEL [--batch 1,4,16,32,64] [--tokens 8] [--prompt-tokens 8] [--verify 2]
//   ns_bench_batch prefill MODEL [--prompt-tokens 512]
//   ns_bench_batch spread  MODEL [--tokens 64]
//   ns_bench_batch docs    MODEL --out FILE [--count 64] [--prompt-tokens 1500] [--prefix-tokens 300]
//   ns_bench_batch prefix  MODEL [--count 16] [--prompt-tokens 400] [--prefix-tokens 300] [--tokens 8]
// common options:
//   --io-mode uring|pread|mmap  --budget SIZE (e.g. 2800MiB; 0 = what the machine has)
//   --context N  --max-sequences N (default: the largest batch)  --threads N  --seed N
//   --spin-us N       a thread pool wait's spin before it blocks (0: never;
//                     default: the engine's, EngineOptions::thread_spin_us)
//   --cpu-features auto|avx512|avx2|scalar   which compute kernels run
//   --warm-tokens N   before measuring, prefill N random tokens (fills the expert
//                     cache: with a budget that holds the whole model, the runs
//                     after it never read the disk: the "model in RAM" ceiling)
//   --repeat N        run each configuration N times, report the last
//   --disk-gib-s X    the disk's O_DIRECT rate (fio), for the disk-bound ceiling
//   --prefetch-width N  experts prefetched per token from the next layer's
//                     predicted routing (0: no prediction; default: the engine's)
//   --repack 0|1      repack experts into the kernels' interleaved layout as
//                     they land (EngineOptions::repack_experts; default: the engine's, 1)
//   --preload 0|1     read every expert at load when the cache holds them all
//                     (EngineOptions::preload_experts; default: the engine's, 1)
//   --mla-expand 0|1  expand long MLA prompt chunks (ModelTuning::mla_expand_prefill; default 0)
//
// decode: for each batch size N, N sequences with distinct random prompts of
// about --prompt-tokens tokens decode --tokens greedy tokens each, all in one
// GenerationBatch. Figures are over the decode steps only (every sequence
// past its prompt): aggregate tok/s, bytes and experts read per step, I/O
// wait share, read rate while reading, and the disk-bound ceiling (the rate
// if each step took exactly its bytes / the disk's rate). --verify K then runs
// the first K prompts alone and compares their tokens with the batched ones.
// prefill: one prompt of --prompt-tokens random tokens, tok/s of its prefill.
// spread: one forward pass over --tokens random tokens, the routing spread of
// every MoE layer (distinct experts, busiest expert's share, entropy).
// docs: the inputs of a "nightly" batch (compare_llamacpp.sh): --count
// documents of about --prompt-tokens tokens in the model's tokenizer, each
// starting with the same --prefix-tokens-token instruction, one per line of
// --out (for `nightshift submit --prompt-lines`); only the tokenizer is loaded.
// prefix: prefix sharing (engine/batch/prefix_cache.h) measured against itself:
// --count prompts of about --prompt-tokens tokens, each starting with the same
// --prefix-tokens-token instruction, decode --tokens greedy tokens in one
// batch (--max-sequences at a time, default all), with sharing off and on, in
// turn, --repeat times on one loaded model; prints the prompt tokens computed
// and copied, wall time and the ratios, and whether every output is the same.
//
// Every run prints human lines and one "RESULT key=value ..." line per
// configuration for the scripts.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "engine/batch/generation_batch.h"
#include "engine/state/process_stats.h"
#include "engine/kernels/kernels.h"
#include "engine/model/model.h"
#include "engine/spec/routing_spread.h"
#include "common/human_size.h"
#include "common/error.h"
#include "tests/bench/bench_args.h"

namespace {

using Clock = std::chrono::steady_clock;
using ns::format_size;

struct Args {
  std::string cmd, model;
  std::vector<int> batches{1, 4, 16, 32, 64};
  int tokens = 8;
  int prompt_tokens = 8;
  int verify = 0;
  std::string io_mode = "uring";
  std::string cpu_features = "auto";
  uint64_t budget = 0;
  int context = 0;
  int max_sequences = 0;
  int threads = 0;
  int spin_us = -1;  // EngineOptions::thread_spin_us; -1: the engine's default
  uint64_t seed = 1;
  int warm_tokens = 0;
  int repeat = 1;
  double disk_gib_s = 0;
  int prefetch_width = -1;  // -1: the engine's default; 0: no prediction; N: top N per token
  int repack = -1;          // EngineOptions::repack_experts; -1: the engine's default
  int preload = -1;         // EngineOptions::preload_experts; -1: the engine's default
  bool mla_expand = false;  // ModelTuning::mla_expand_prefill
  std::string out;          // docs: the file written
  int count = 64;           // docs: how many documents
  int prefix_tokens = 0;    // docs: the shared instruction's tokens
};

std::vector<int> parse_list(const std::string& v) {
  std::vector<int> out;
  std::stringstream ss(v);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::stoi(item));
  return out;
}

// Random lowercase words making a prompt of n tokens (n + 1 at worst):
// distinct prompts route differently, as distinct jobs' texts would.
std::string random_prompt(const ns::Tokenizer& tok, int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto count = [&tok](const std::string& t) { return static_cast<int>(tok.encode(t, true, false).size()); };
  std::string text;
  for (;;) {
    const size_t before = text.size();
    const int len = 2 + static_cast<int>(rng() % 7);
    if (!text.empty()) text += ' ';
    for (int i = 0; i < len; ++i) text += static_cast<char>('a' + rng() % 26);
    const int c = count(text);
    if (c == n) return text;
    if (c < n) continue;
    // One word too many: back off and add letters one at a time (a letter
    // adds at most a token), so that a 512-token prompt is one prefill chunk.
    text.resize(before);
    while (count(text) < n) text += static_cast<char>('a' + rng() % 26);
    return text;
  }
}

ns::SamplingParams greedy(int n) {
  ns::SamplingParams p;
  p.temperature = 0;
  p.max_tokens = n;
  p.ignore_eos = true;
  return p;
}

uint64_t hash_tokens(const std::vector<int32_t>& t) {
  uint64_t h = 1469598103934665603ull;
  for (int32_t v : t) h = (h ^ static_cast<uint32_t>(v)) * 1099511628211ull;
  return h;
}

double rss_mib() { return double(ns::peak_rss_bytes()) / double(1 << 20); }

struct Phase {  // sums over a set of steps
  ns::BatchRunStats s;
  uint64_t max_step_bytes = 0;
  double disk_seconds = 0;     // sum of bytes / disk rate per step
  ns::ThreadPool::Stats pool;  // the thread pool's counters over these steps
  double per_step(uint64_t v) const { return s.steps ? double(v) / double(s.steps) : 0.0; }
};

// Runs the prompts to completion in one batch; `decode` sums the steps with
// no prompt token, `prefill` the others.
std::vector<ns::GenerationResult> run_batch(ns::Model& m, const std::vector<std::string>& prompts, int tokens,
                                            double disk_bytes_s, Phase* decode, Phase* prefill) {
  ns::GenerationBatch b(m);
  std::vector<ns::GenerationResult> out(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    const int h = b.add({prompts[i], greedy(tokens), {}, {}, {}, {}});
    if (h != static_cast<int>(i)) throw ns::Error(ns::ErrorKind::internal, "unexpected handle");
  }
  for (;;) {
    const ns::ThreadPool::Stats p0 = m.pool().stats();
    const bool more = b.step();
    const ns::ThreadPool::Stats p1 = m.pool().stats();
    const ns::BatchStepStats& st = b.last_step();
    Phase* ph = st.prefill_tokens == 0 ? decode : prefill;
    if (ph && st.tokens > 0) {
      ph->s.add(st);
      ph->pool.jobs += p1.jobs - p0.jobs;
      ph->pool.inline_jobs += p1.inline_jobs - p0.inline_jobs;
      ph->pool.wakes += p1.wakes - p0.wakes;
      ph->pool.caller_blocks += p1.caller_blocks - p0.caller_blocks;
      ph->pool.worker_blocks += p1.worker_blocks - p0.worker_blocks;
      ph->max_step_bytes = std::max(ph->max_step_bytes, st.bytes_read);
      if (disk_bytes_s > 0) ph->disk_seconds += double(st.bytes_read) / disk_bytes_s;
    }
    for (auto& [h, r] : b.take_finished()) out[static_cast<size_t>(h)] = std::move(r);
    if (!more) break;
  }
  return out;
}

void load_opts(const Args& a, int n_seq, ns::ModelOptions& mo) {
  mo.engine.threads = a.threads;
  if (a.spin_us >= 0) mo.engine.thread_spin_us = a.spin_us;
  mo.engine.context = a.context;
  mo.engine.max_sequences = n_seq;
  mo.engine.memory_budget = a.budget;
  mo.engine.io_mode = a.io_mode;
  if (a.prefetch_width == 0) mo.tuning.predict_experts = false;
  if (a.prefetch_width > 0) mo.tuning.prefetch_per_token = static_cast<uint32_t>(a.prefetch_width);
  if (a.repack >= 0) mo.engine.repack_experts = a.repack == 1;
  if (a.preload >= 0) mo.engine.preload_experts = a.preload == 1;
  mo.tuning.mla_expand_prefill = a.mla_expand;
}

// One line about the plan instead of the engine's log.
void print_plan(const ns::Model& m) {
  const ns::WeightStreaming& ws = m.streaming();
  if (!ws.planned) return;
  std::printf(
      "plan: budget %s = resident %s + KV %s + activations %s + overhead %s + expert cache %s (%u of %llu experts)\n",
      format_size(ws.plan.memory_budget).c_str(), format_size(ws.plan.resident_bytes).c_str(),
      format_size(ws.plan.kv_cache_bytes).c_str(), format_size(ws.plan.activation_bytes).c_str(),
      format_size(ws.plan.overhead_bytes).c_str(), format_size(ws.plan.cache_bytes).c_str(), ws.plan.cache_experts,
      static_cast<unsigned long long>(ws.plan.streamed_experts));
}

void warm(ns::Model& m, const Args& a) {
  if (a.warm_tokens <= 0) return;
  const auto t0 = Clock::now();
  const auto before = m.stream_stats();
  run_batch(m, {random_prompt(m.tokenizer(), a.warm_tokens, a.seed + 999)}, 1, 0, nullptr, nullptr);
  const auto d = m.stream_stats() - before;
  std::printf("warm-up: %d random tokens in %.1f s, read %s into the expert cache\n", a.warm_tokens,
              std::chrono::duration<double>(Clock::now() - t0).count(), format_size(d.bytes_read()).c_str());
}

int cmd_decode(const Args& a) {
  const int largest = *std::max_element(a.batches.begin(), a.batches.end());
  ns::ModelOptions mo;
  load_opts(a, a.max_sequences > 0 ? a.max_sequences : largest, mo);
  // Prompts tokenize to a few more tokens than asked (whole words).
  if (mo.engine.context <= 0) mo.engine.context = std::max(a.prompt_tokens + a.tokens, a.warm_tokens) + 32;
  auto m = ns::Model::load(a.model, mo);
  std::printf("model %s, io_mode %s, budget %s, %lld sequences of %lld context, forward pass up to %lld tokens\n",
              a.model.c_str(), a.io_mode.c_str(), a.budget ? format_size(a.budget).c_str() : "auto",
              static_cast<long long>(m->n_seq()), static_cast<long long>(m->n_ctx()),
              static_cast<long long>(m->max_batch_tokens()));
  print_plan(*m);
  warm(*m, a);
  const double disk_bytes_s = a.disk_gib_s * double(1ull << 30);
  std::map<int, std::vector<int32_t>> alone_tokens;  // prompt index -> its tokens when run alone
  for (const int n : a.batches) {
    std::vector<std::string> prompts;
    for (int i = 0; i < n; ++i)
      prompts.push_back(random_prompt(m->tokenizer(), a.prompt_tokens, a.seed + static_cast<uint64_t>(i)));
    Phase dec, pre;
    std::vector<ns::GenerationResult> res;
    for (int r = 0; r < a.repeat; ++r) {
      dec = {};
      pre = {};
      res = run_batch(*m, prompts, a.tokens, disk_bytes_s, &dec, &pre);
    }
    const ns::BatchRunStats& d = dec.s;
    // The decode steps' experts per MoE layer and step: what one step had to fetch.
    const int64_t moe_layers = m->streaming().layout.n_moe_layers();
    const double experts_per_layer = d.steps && moe_layers ? double(d.experts_used) / double(d.steps * moe_layers) : 0;
    const double disk_ceiling = dec.disk_seconds > 0 ? double(d.generated) / dec.disk_seconds : 0;
    // A batch of one is the alone run of prompt 0; the others are run alone once.
    if (n == 1) alone_tokens[0] = res[0].tokens;
    std::string verdict = "-";
    if (a.verify > 0 && n > 1) {
      bool ok = true;
      for (int i = 0; i < std::min(a.verify, n); ++i) {
        if (!alone_tokens.count(i))
          alone_tokens[i] = run_batch(*m, {prompts[static_cast<size_t>(i)]}, a.tokens, 0, nullptr, nullptr)[0].tokens;
        ok &= alone_tokens[i] == res[static_cast<size_t>(i)].tokens;
      }
      verdict = ok ? "PASS" : "FAIL";
    }
    double seq_bytes = 0, seq_avg_batch = 0;
    for (const auto& r : res) {
      seq_bytes += double(r.stats.bytes_read);
      seq_avg_batch += r.stats.avg_batch_size / double(res.size());
    }
    std::printf(
        "decode batch %2d: %7.2f tok/s aggregate (%d steps, %.2f s/step), %7.1f MiB read/step, %5.1f experts/layer/step, "
        "hits %4.1f%%, io wait %4.1f%%, read %.2f GiB/s while reading, disk ceiling %.2f tok/s, prefill %d tokens %.2f tok/s, "
        "prefetch %.0f/step %.0f%% used, peak RSS %.0f MiB, outputs alone vs batched %s\n"
        "  threads %d, spin %d us: per step %.0f parallel calls (+%.0f on the caller alone), %.1f woke a blocked worker, "
        "%.1f blocked the caller, %.1f worker blocks\n",
        n, d.tok_s(), static_cast<int>(d.steps), d.steps ? d.seconds / double(d.steps) : 0.0,
        d.bytes_per_step() / double(1 << 20), experts_per_layer, 100 * d.cache_hit_rate(), 100 * d.io_share(),
        d.read_gib_s(), disk_ceiling, static_cast<int>(pre.s.tokens), pre.s.forward_tok_s(),
        d.steps ? double(d.prefetch_reads) / double(d.steps) : 0.0,
        d.prefetch_reads ? std::min(100.0, 100.0 * double(d.prefetch_used) / double(d.prefetch_reads)) : 0.0, rss_mib(),
        verdict.c_str(), m->pool().size(), m->pool().spin_us(), dec.per_step(dec.pool.jobs),
        dec.per_step(dec.pool.inline_jobs), dec.per_step(dec.pool.wakes), dec.per_step(dec.pool.caller_blocks),
        dec.per_step(dec.pool.worker_blocks));
    std::printf(
        "RESULT kind=decode io_mode=%s batch=%d tok_s=%.4f steps=%lld generated=%lld seconds=%.4f bytes_per_step=%.0f "
        "max_step_bytes=%llu experts_per_layer=%.2f hit_rate=%.4f io_share=%.4f read_gib_s=%.4f disk_ceiling_tok_s=%.4f "
        "prefill_tokens=%lld prefill_tok_s=%.4f peak_rss_mib=%.0f seq_bytes_sum=%.0f avg_batch=%.2f verify=%s "
        "hash0=%016llx threads=%d spin_us=%d pool_calls_per_step=%.1f inline_calls_per_step=%.1f wakes_per_step=%.2f "
        "caller_blocks_per_step=%.2f worker_blocks_per_step=%.2f\n",
        a.io_mode.c_str(), n, d.tok_s(), static_cast<long long>(d.steps), static_cast<long long>(d.generated),
        d.seconds, d.bytes_per_step(), static_cast<unsigned long long>(dec.max_step_bytes), experts_per_layer,
        d.cache_hit_rate(), d.io_share(), d.read_gib_s(), disk_ceiling, static_cast<long long>(pre.s.tokens),
        pre.s.forward_tok_s(), rss_mib(), seq_bytes, seq_avg_batch, verdict.c_str(),
        static_cast<unsigned long long>(hash_tokens(res[0].tokens)), m->pool().size(), m->pool().spin_us(),
        dec.per_step(dec.pool.jobs), dec.per_step(dec.pool.inline_jobs), dec.per_step(dec.pool.wakes),
        dec.per_step(dec.pool.caller_blocks), dec.per_step(dec.pool.worker_blocks));
    std::fflush(stdout);
  }
  return 0;
}

int cmd_prefill(const Args& a) {
  ns::ModelOptions mo;
  load_opts(a, std::max(1, a.max_sequences), mo);
  if (mo.engine.context <= 0) mo.engine.context = std::max(a.prompt_tokens, a.warm_tokens) + 64;
  auto m = ns::Model::load(a.model, mo);
  std::printf("model %s, io_mode %s, budget %s, forward pass up to %lld tokens\n", a.model.c_str(), a.io_mode.c_str(),
              a.budget ? format_size(a.budget).c_str() : "auto", static_cast<long long>(m->max_batch_tokens()));
  print_plan(*m);
  std::fflush(stdout);
  warm(*m, a);
  const std::string prompt = random_prompt(m->tokenizer(), a.prompt_tokens, a.seed + 500);
  Phase dec, pre;
  std::vector<ns::GenerationResult> res;
  for (int r = 0; r < a.repeat; ++r) {
    dec = {};
    pre = {};
    res = run_batch(*m, {prompt}, 1, 0, &dec, &pre);
  }
  const ns::BatchRunStats& p = pre.s;
  std::printf(
      "prefill %lld tokens: %.2f tok/s (%lld forward passes, %.1f s), read %s, io wait %.1f%%, read %.2f GiB/s "
      "while reading, hits %.1f%%, peak RSS %.0f MiB\n",
      static_cast<long long>(p.tokens), p.forward_tok_s(), static_cast<long long>(p.steps), p.seconds,
      format_size(p.bytes_read).c_str(), 100 * p.io_share(), p.read_gib_s(), 100 * p.cache_hit_rate(), rss_mib());
  std::printf(
      "RESULT kind=prefill io_mode=%s tokens=%lld tok_s=%.4f steps=%lld seconds=%.4f bytes=%llu io_share=%.4f "
      "read_gib_s=%.4f hit_rate=%.4f peak_rss_mib=%.0f\n",
      a.io_mode.c_str(), static_cast<long long>(p.tokens), p.forward_tok_s(), static_cast<long long>(p.steps),
      p.seconds, static_cast<unsigned long long>(p.bytes_read), p.io_share(), p.read_gib_s(), p.cache_hit_rate(),
      rss_mib());
  return 0;
}

int cmd_spread(const Args& a) {
  ns::ModelOptions mo;
  load_opts(a, 1, mo);
  if (mo.engine.context <= 0) mo.engine.context = a.tokens + 8;
  mo.engine.max_batch_tokens = std::max(a.tokens, 1);
  auto m = ns::Model::load(a.model, mo);
  ns::RoutingSpread spread;
  m->set_routing_observer([&spread](const ns::RoutingEvent& e) { spread.observe(e); });
  // Random token ids, not text: every id as likely as any other.
  std::mt19937_64 rng(a.seed);
  std::vector<int32_t> toks(static_cast<size_t>(a.tokens));
  for (auto& t : toks) t = static_cast<int32_t>(rng() % static_cast<uint64_t>(m->n_vocab()));
  std::vector<float> logits;
  m->forward(toks, 0, false, logits);
  const auto layers = spread.layers();
  for (const auto& l : layers) std::printf("  %s\n", ns::RoutingSpread::describe(l).c_str());
  const ns::LayerSpread mean = ns::RoutingSpread::mean(layers);
  int64_t lo = mean.n_expert, hi = 0;
  for (const auto& l : layers) {
    lo = std::min(lo, l.distinct);
    hi = std::max(hi, l.distinct);
  }
  std::printf("routing spread over %d random tokens: %s (fewest %lld, most %lld)\n", a.tokens,
              ns::RoutingSpread::describe(mean).c_str(), static_cast<long long>(lo), static_cast<long long>(hi));
  std::printf(
      "RESULT kind=spread tokens=%d layers=%zu distinct_mean=%lld distinct_min=%lld distinct_max=%lld n_expert=%lld "
      "busiest_share=%.4f entropy_bits=%.3f\n",
      a.tokens, layers.size(), static_cast<long long>(mean.distinct), static_cast<long long>(lo),
      static_cast<long long>(hi), static_cast<long long>(mean.n_expert), mean.busiest_share, mean.entropy_bits);
  return 0;
}

double load_average() {
  double l = 0;
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &l) != 1) l = 0;
    std::fclose(f);
  }
  return l;
}

int cmd_prefix(const Args& a) {
  if (a.prefix_tokens <= 0 || a.prefix_tokens >= a.prompt_tokens)
    throw ns::Error(ns::ErrorKind::invalid_input, "prefix needs 0 < --prefix-tokens < --prompt-tokens");
  ns::ModelOptions mo;
  load_opts(a, a.max_sequences > 0 ? a.max_sequences : a.count, mo);
  if (mo.engine.context <= 0) mo.engine.context = a.prompt_tokens + a.tokens + 32;
  mo.engine.prefix_cache = 4;
  auto m = ns::Model::load(a.model, mo);
  std::printf("model %s, io_mode %s, budget %s, %lld sequences at a time, forward pass up to %lld tokens\n",
              a.model.c_str(), a.io_mode.c_str(), a.budget ? format_size(a.budget).c_str() : "auto",
              static_cast<long long>(m->n_seq()), static_cast<long long>(m->max_batch_tokens()));
  print_plan(*m);
  warm(*m, a);
  const std::string prefix = random_prompt(m->tokenizer(), a.prefix_tokens, a.seed + 7000) + " ";
  std::vector<ns::GenerationRequest> reqs;
  for (int i = 0; i < a.count; ++i)
    reqs.push_back({prefix + random_prompt(m->tokenizer(), a.prompt_tokens - a.prefix_tokens,
                                           a.seed + 8000 + static_cast<uint64_t>(i)),
                    greedy(a.tokens),
                    {},
                    {},
                    {},
                    {}});
  struct Side {
    ns::BatchRunStats s;
    double seconds = 0;
    std::vector<ns::GenerationResult> out;
  } side[2];
  for (int r = 0; r < a.repeat; ++r)
    for (int on = 0; on < 2; ++on) {
      const auto t0 = Clock::now();
      side[on].out = ns::GenerationBatch::run_all(*m, reqs, on == 1, &side[on].s);
      side[on].seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    }
  bool same = true;
  for (size_t i = 0; i < reqs.size(); ++i) same &= side[0].out[i].tokens == side[1].out[i].tokens;
  for (int on = 0; on < 2; ++on) {
    const Side& x = side[on];
    std::printf(
        "sharing %-3s: %lld prompt tokens computed, %lld copied, %.2f s wall, %.2f s in steps that decoded nothing, "
        "%lld forward passes, read %s\n",
        on ? "on" : "off", static_cast<long long>(x.s.prefill_tokens), static_cast<long long>(x.s.prefix_tokens),
        x.seconds, x.s.seconds - x.s.decode_seconds, static_cast<long long>(x.s.steps),
        format_size(x.s.bytes_read).c_str());
  }
  const double tok_ratio =
      side[1].s.prefill_tokens > 0 ? double(side[0].s.prefill_tokens) / double(side[1].s.prefill_tokens) : 0;
  const double wall_ratio = side[1].seconds > 0 ? side[0].seconds / side[1].seconds : 0;
  std::printf(
      "%d jobs, %d-token prompts sharing %d tokens: %.2fx fewer prompt tokens computed, %.2fx faster wall; "
      "outputs %s; load average %.2f\n",
      a.count, a.prompt_tokens, a.prefix_tokens, tok_ratio, wall_ratio, same ? "identical" : "DIFFER", load_average());
  std::printf(
      "RESULT kind=prefix count=%d prompt_tokens=%d prefix_tokens=%d computed_off=%lld computed_on=%lld copied=%lld "
      "seconds_off=%.4f seconds_on=%.4f token_ratio=%.4f wall_ratio=%.4f same=%d load=%.2f\n",
      a.count, a.prompt_tokens, a.prefix_tokens, static_cast<long long>(side[0].s.prefill_tokens),
      static_cast<long long>(side[1].s.prefill_tokens), static_cast<long long>(side[1].s.prefix_tokens),
      side[0].seconds, side[1].seconds, tok_ratio, wall_ratio, same ? 1 : 0, load_average());
  return same ? 0 : 1;
}

int cmd_docs(const Args& a) {
  if (a.out.empty()) throw ns::Error(ns::ErrorKind::invalid_input, "docs needs --out FILE");
  if (a.prefix_tokens >= a.prompt_tokens)
    throw ns::Error(ns::ErrorKind::invalid_input, "--prefix-tokens must be below --prompt-tokens");
  const auto file = ns::gguf::GgufFile::open(a.model);
  const auto tok = ns::Tokenizer::from_gguf(*file);
  const std::string prefix = a.prefix_tokens > 0 ? random_prompt(*tok, a.prefix_tokens, a.seed + 7000) + " " : "";
  FILE* f = std::fopen(a.out.c_str(), "w");
  if (!f) throw ns::Error(ns::ErrorKind::io, "cannot write " + a.out + ": " + std::strerror(errno));
  int64_t total = 0, lo = INT64_MAX, hi = 0;
  for (int i = 0; i < a.count; ++i) {
    // The body alone has the remaining tokens; joined to the prefix a word may
    // merge across the space, so the whole is counted again.
    const std::string doc =
        prefix + random_prompt(*tok, a.prompt_tokens - a.prefix_tokens, a.seed + 8000 + static_cast<uint64_t>(i));
    const auto n = static_cast<int64_t>(tok->encode(doc, true, false).size());
    total += n;
    lo = std::min(lo, n);
    hi = std::max(hi, n);
    std::fprintf(f, "%s\n", doc.c_str());
  }
  if (std::fclose(f) != 0) throw ns::Error(ns::ErrorKind::io, "cannot write " + a.out + ": " + std::strerror(errno));
  std::printf("docs: %d documents in %s, %.1f tokens on average (%lld-%lld), a shared %d-token prefix\n", a.count,
              a.out.c_str(), double(total) / a.count, static_cast<long long>(lo), static_cast<long long>(hi),
              a.prefix_tokens);
  std::printf("RESULT kind=docs count=%d mean_tokens=%.1f min_tokens=%lld max_tokens=%lld prefix_tokens=%d\n", a.count,
              double(total) / a.count, static_cast<long long>(lo), static_cast<long long>(hi), a.prefix_tokens);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ns::bench::guarded_main("ns_bench_batch", [&] {
    spdlog::set_level(spdlog::level::warn);  // the plan is printed as one line (print_plan)
    Args a;
    ns::bench::parse_command_line(argc, argv, "usage: ns_bench_batch decode|prefill|spread|docs|prefix MODEL [options]",
                                  a.cmd, a.model, [&](const std::string& k, const std::string& v) {
                                    if (k == "--batch")
                                      a.batches = parse_list(v);
                                    else if (k == "--tokens")
                                      a.tokens = std::stoi(v);
                                    else if (k == "--prompt-tokens")
                                      a.prompt_tokens = std::stoi(v);
                                    else if (k == "--verify")
                                      a.verify = std::stoi(v);
                                    else if (k == "--io-mode")
                                      a.io_mode = v;
                                    else if (k == "--cpu-features")
                                      a.cpu_features = v;
                                    else if (k == "--budget")
                                      a.budget = v == "0" ? 0 : ns::parse_size(v);
                                    else if (k == "--context")
                                      a.context = std::stoi(v);
                                    else if (k == "--max-sequences")
                                      a.max_sequences = std::stoi(v);
                                    else if (k == "--threads")
                                      a.threads = std::stoi(v);
                                    else if (k == "--spin-us")
                                      a.spin_us = std::max(0, std::stoi(v));
                                    else if (k == "--seed")
                                      a.seed = std::stoull(v);
                                    else if (k == "--warm-tokens")
                                      a.warm_tokens = std::stoi(v);
                                    else if (k == "--repeat")
                                      a.repeat = std::max(1, std::stoi(v));
                                    else if (k == "--disk-gib-s")
                                      a.disk_gib_s = std::stod(v);
                                    else if (k == "--prefetch-width")
                                      a.prefetch_width = std::stoi(v);
                                    else if (k == "--repack")
                                      a.repack = std::stoi(v) != 0 ? 1 : 0;
                                    else if (k == "--preload")
                                      a.preload = std::stoi(v) != 0 ? 1 : 0;
                                    else if (k == "--mla-expand")
                                      a.mla_expand = std::stoi(v) != 0;
                                    else if (k == "--out")
                                      a.out = v;
                                    else if (k == "--count")
                                      a.count = std::max(1, std::stoi(v));
                                    else if (k == "--prefix-tokens")
                                      a.prefix_tokens = std::max(0, std::stoi(v));
                                    else
                                      return false;
                                    return true;
                                  });
    if (a.batches.empty()) throw ns::Error(ns::ErrorKind::invalid_input, "--batch needs at least one size");
    ns::kernels::set_isa_override(a.cpu_features);
    std::printf("kernels %s (CPU has %s)\n", ns::kernels::isa_name(ns::kernels::active_isa()),
                ns::kernels::cpu_feature_summary().c_str());
    return ns::bench::run_named<Args>(a.cmd,
                                      {{"decode", cmd_decode},
                                       {"prefill", cmd_prefill},
                                       {"spread", cmd_spread},
                                       {"docs", cmd_docs},
                                       {"prefix", cmd_prefix}},
                                      a);
  });
}
