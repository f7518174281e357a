#include "engine/stream/budget_planner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "engine/stream/direct_io.h"
#include "common/human_size.h"
#include "common/error.h"

namespace ns::stream {
namespace {

std::string line(const char* name, uint64_t bytes, const std::string& note = "") {
  char buf[64];
  std::snprintf(buf, sizeof buf, "  %-18s %12s", name, format_size(bytes).c_str());
  return std::string(buf) + (note.empty() ? "" : "  (" + note + ")") + "\n";
}

std::string percent(uint64_t part, uint64_t whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f%%", whole ? 100.0 * double(part) / double(whole) : 0.0);
  return buf;
}

}  // namespace

std::string BudgetPlan::describe() const {
  std::string s = "memory plan for " + model + " (memory_budget " +
                  (budget_source.empty() ? format_size(memory_budget) : budget_source) + "):\n";
  s += line("resident weights", resident_bytes,
            std::to_string(resident_tensors) + " tensors" +
                (repacked_bytes ? "; " + format_size(repacked_bytes) + " of them repacked to Q4_0_R16" : ""));
  s += line("KV cache", kv_cache_bytes, kv_cache_note);
  if (recurrent_bytes > 0) s += line("recurrent state", recurrent_bytes, "delta-rule layers, fixed per sequence");
  s += line("activations", activation_bytes);
  s += line("I/O buffers", io_buffer_bytes);
  s += line("runtime overhead", overhead_bytes);
  if (streamed_experts == 0) {
    s += "  (no routed experts: nothing is streamed)\n";
  } else {
    s += line("expert cache", cache_bytes,
              std::to_string(cache_experts) + " of " + std::to_string(streamed_experts) + " experts at " +
                  format_size(slot_bytes) + " a slot; " +
                  percent(std::min<uint64_t>(cache_experts, streamed_experts), streamed_experts) + " of " +
                  format_size(streamed_bytes) + " streamed" + (all_experts_fit() ? ", all fit" : ""));
  }
  const uint64_t planned = planned_bytes();
  s += line("unused", memory_budget > planned ? memory_budget - planned : 0);
  return s;
}

BudgetPlan fit_budget(std::span<const gguf::TensorInfo> resident, const ExpertLayout& layout, const BudgetInputs& in,
                      const std::string& model_name) {
  BudgetPlan p;
  p.model = model_name;
  p.memory_budget = in.memory_budget;
  p.budget_source = in.budget_source;
  for (const gguf::TensorInfo& t : resident) {
    p.resident_bytes += t.nbytes ? direct_read_span(t.offset, t.nbytes) : 0;
    ++p.resident_tensors;
  }
  p.streamed_bytes = layout.total_bytes();  // each stack's bytes: n_expert whole experts (from_tensors checks)
  p.streamed_tensors = layout.n_stacks();
  p.streamed_experts = layout.total_experts();
  p.kv_cache_bytes = in.kv_cache_bytes;
  p.kv_cache_note = in.kv_cache_note;
  p.recurrent_bytes = in.recurrent_bytes;
  p.activation_bytes = in.activation_bytes;
  p.io_buffer_bytes = in.io_buffer_bytes;
  p.overhead_bytes = in.overhead_bytes;
  p.repacked_bytes = in.repacked_bytes;
  p.slot_bytes = layout.slot_bytes();

  const uint64_t fixed = p.fixed_bytes();
  const uint64_t min_slots =
      p.streamed_experts ? std::min<uint64_t>(std::max<uint32_t>(in.min_cache_experts, 1), p.streamed_experts) : 0;
  p.minimum_budget = fixed + min_slots * p.slot_bytes;
  if (in.memory_budget < p.minimum_budget) {
    BudgetPlan shown = p;
    shown.cache_experts = static_cast<uint32_t>(min_slots);
    shown.cache_bytes = min_slots * p.slot_bytes;
    // Round the advice up to a whole MiB so it can be pasted into the config.
    const uint64_t advice = align_up(p.minimum_budget, 1ull << 20);
    p.refusal = "memory_budget " + format_size(in.memory_budget) + " is too small to run " + model_name +
                ": it needs " + format_size(p.minimum_budget) + ".\n" + shown.describe() +
                "Set memory_budget to at least " + std::to_string(advice >> 20) +
                "MiB, or lower the context or batch size (KV cache, activations).";
    return p;
  }
  if (p.slot_bytes > 0) {
    const uint64_t fit = (in.memory_budget - fixed) / p.slot_bytes;
    p.cache_experts = static_cast<uint32_t>(std::min<uint64_t>({fit, p.streamed_experts, UINT32_MAX}));
    p.cache_bytes = p.cache_experts * p.slot_bytes;
  }
  return p;
}

BudgetPlan plan_budget(std::span<const gguf::TensorInfo> resident, const ExpertLayout& layout, const BudgetInputs& in,
                       const std::string& model_name) {
  BudgetPlan p = fit_budget(resident, layout, in, model_name);
  if (!p.refusal.empty()) throw Error(ErrorKind::invalid_input, p.refusal);
  return p;
}

std::vector<KvTradeoff> kv_tradeoff(const BudgetPlan& plan, uint64_t kv_bytes_per_token, uint64_t per_sequence_bytes,
                                    const std::vector<int64_t>& contexts, uint32_t min_cache_experts) {
  const uint64_t others = plan.fixed_bytes() - plan.kv_cache_bytes - plan.recurrent_bytes;
  const uint64_t min_slots =
      plan.streamed_experts ? std::min<uint64_t>(std::max<uint32_t>(min_cache_experts, 1), plan.streamed_experts) : 0;
  const uint64_t taken = others + min_slots * plan.slot_bytes;
  const uint64_t room = plan.memory_budget > taken ? plan.memory_budget - taken : 0;
  std::vector<KvTradeoff> out;
  for (const int64_t ctx : contexts) {
    KvTradeoff t;
    t.context = ctx;
    const uint64_t per = static_cast<uint64_t>(ctx) * kv_bytes_per_token + per_sequence_bytes;
    t.max_batch = per > 0 ? static_cast<int64_t>(std::min<uint64_t>(room / per, 1u << 20)) : 0;
    t.kv_tokens = t.max_batch * ctx;
    out.push_back(t);
  }
  return out;
}

std::string describe_tradeoff(const std::vector<KvTradeoff>& t) {
  std::string s;
  for (const KvTradeoff& x : t) {
    if (x.max_batch <= 0) continue;
    const std::string ctx = x.context % 1024 == 0 ? std::to_string(x.context / 1024) + "K" : std::to_string(x.context);
    s += (s.empty() ? "" : ", ") + std::to_string(x.max_batch) + " x " + ctx;
  }
  return s.empty() ? "none (not one sequence of these contexts fits)" : s;
}

DiskBoundEstimate estimate_disk_bound(const BudgetPlan& plan, int64_t n_moe_layers, int64_t n_expert, int64_t n_used,
                                      double disk_bytes_per_s) {
  DiskBoundEstimate e;
  if (plan.streamed_experts == 0 || n_expert <= 0 || n_used <= 0 || n_moe_layers <= 0) return e;
  const double all = static_cast<double>(plan.streamed_experts);
  e.hit_rate = std::min(1.0, static_cast<double>(plan.cache_experts) / all);
  e.bytes_per_expert = static_cast<double>(plan.streamed_bytes) / all;
  const double miss = 1.0 - e.hit_rate;
  e.bytes_per_token_batch1 = static_cast<double>(n_moe_layers * n_used) * e.bytes_per_expert * miss;
  const double p = std::min(1.0, static_cast<double>(n_used) / static_cast<double>(n_expert));
  e.full_batch = p >= 1.0 ? 1 : static_cast<int64_t>(std::ceil(std::log(0.01) / std::log(1.0 - p)));
  const double touched = 1.0 - std::pow(1.0 - p, static_cast<double>(e.full_batch));
  e.bytes_per_token_full = all * touched * e.bytes_per_expert * miss / static_cast<double>(e.full_batch);
  if (disk_bytes_per_s > 0) {
    e.tok_s_batch1 = e.bytes_per_token_batch1 > 0 ? disk_bytes_per_s / e.bytes_per_token_batch1 : 0;
    e.tok_s_full = e.bytes_per_token_full > 0 ? disk_bytes_per_s / e.bytes_per_token_full : 0;
  }
  return e;
}

}  // namespace ns::stream
