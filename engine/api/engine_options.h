// The engine's options, declared once: EngineOptions and its table
// (EngineOptions::for_each), which every edge reads: the daemon's YAML
// parser and its example-config test (daemon/lib/config.cpp), the CLI flags
// the commands share (daemon/cli/engine_flags.h), the reload check
// (operator==, EngineHost::stale) and the docs (docs/architecture.md, "One
// options path"). Adding an option is a row here, the code that uses it, its
// doc line (examples/config.yaml when it is a config key) and its test.
//
// Contract: the closed sets (io_mode, cache_policy) are enums parsed once at
// the edge; parsing a name they lack throws ns::Error(invalid_input) naming
// the key and the accepted names. Defaults live in the member initializers
// only: an edge shows a default by formatting a default-constructed struct.
// memory_budget 0 is resolved (to the cgroup-aware default,
// stream::default_memory_budget) in one place, Model::load.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/error.h"

namespace ns {

// A value from a closed set of names (Names: its enum Value, kKey, kNames in
// enum order). Built from a name it parses it (the edges, tests' literals);
// the engine compares and switches on `value`.
template <class Names>
struct Choice : Names {
  using Value = typename Names::Value;
  Value value{};

  constexpr Choice() = default;
  constexpr Choice(Value v) : value(v) {}
  Choice(std::string_view name) : value(parse(name)) {}
  Choice(const char* name) : Choice(std::string_view(name)) {}
  Choice(const std::string& name) : Choice(std::string_view(name)) {}

  const char* name() const { return Names::kNames[static_cast<size_t>(value)]; }
  bool operator==(const Choice& o) const { return value == o.value; }

  // "uring, pread, mmap": for messages and --help.
  static std::string names() {
    std::string s;
    for (const char* n : Names::kNames) s += (s.empty() ? "" : ", ") + std::string(n);
    return s;
  }
  static Value parse(std::string_view name) {
    for (size_t i = 0; i < Names::kNames.size(); ++i)
      if (name == Names::kNames[i]) return static_cast<Value>(i);
    throw Error(ErrorKind::invalid_input,
                std::string(Names::kKey) + " '" + std::string(name) + "' is not one of: " + names());
  }
};

struct IoModeNames {
  enum Value : uint8_t { uring, pread, mmap };
  static constexpr const char* kKey = "io_mode";
  static constexpr std::array<const char*, 3> kNames = {"uring", "pread", "mmap"};
};
// How routed experts are read: io_uring with O_DIRECT, pread threads, or
// through the mapping (the page cache baseline: no reader, no cache, no budget).
using IoMode = Choice<IoModeNames>;

struct CachePolicyNames {
  enum Value : uint8_t { lru, lfu };
  static constexpr const char* kKey = "cache_policy";
  static constexpr std::array<const char*, 2> kNames = {"lru", "lfu"};
};
// Which expert the cache evicts (engine/stream/cache_index.h).
using CachePolicy = Choice<CachePolicyNames>;

// One row of the table. A field is bool, an integer (range [min, max]), a
// uint64_t size in bytes (written with a unit: 8GiB, 2500MiB; 0 alone), a
// std::string, or a Choice; the edges parse each of these types.
struct OptionInfo {
  const char* name;  // the config key, and as --kebab-case the CLI flag
  const char* doc;   // one line: what it does, its units, what 0 means
  long long min = 0, max = 0;
  bool config_key = true;  // nightshiftd reads it from its config; else the program sets it (flags, tests)
};

struct EngineOptions {
  int threads = 0;
  int thread_spin_us = 200;  // = ThreadPool::kDefaultSpinUs (engine.cpp checks)
  int context = 0;
  int max_sequences = 1;
  bool fewer_sequences = false;
  int max_batch_tokens = 0;
  int64_t kv_tokens = 0;
  uint64_t memory_budget = 0;
  IoMode io_mode = IoMode::uring;
  CachePolicy cache_policy = CachePolicy::lfu;
  int io_queue_depth = 16;
  bool mla_expanded_cache = false;
  bool repack_experts = true;
  bool preload_experts = true;
  int prefix_cache = 0;

  // Two loads with equal options give the same engine (EngineHost::stale).
  bool operator==(const EngineOptions&) const = default;

  // The table: visit(member, OptionInfo) for every option, in the order the
  // docs list them. Self is EngineOptions or const EngineOptions.
  template <class Self, class Visit>
  static void for_each(Self& o, Visit&& visit) {
    visit(o.threads, OptionInfo{"threads", "compute threads; 0 = all cores", 0, 4096});
    visit(o.thread_spin_us,
          OptionInfo{"thread_spin_us",
                     "microseconds a compute thread spins for the next parallel job (or for the others to finish) "
                     "before it sleeps; backs off by itself when the machine is busy; 0 = never spin",
                     0, 100000});
    visit(o.context, OptionInfo{"context",
                                "the longest job in tokens (prompt + max_tokens); 0 = the model's own length "
                                "(context_length); the KV cache all jobs share is sized within memory_budget "
                                "(docs/long-context.md)",
                                0, 1 << 24});
    visit(o.memory_budget, OptionInfo{"memory_budget",
                                      "memory the engine plans within (e.g. 8GiB, 2500MiB); 0 = what the machine "
                                      "has (its cgroup limit, else its memory, less headroom)"});
    visit(o.io_mode, OptionInfo{"io_mode",
                                "how routed experts are read: uring (io_uring, O_DIRECT), pread (threads), mmap "
                                "(page cache baseline)"});
    visit(o.repack_experts,
          OptionInfo{"repack_experts",
                     "rewrite Q4_0 experts into the kernels' interleaved layout (16 rows at a time) as they land in "
                     "the expert cache: faster matrix products, the same logits; false keeps the file's layout, for "
                     "comparisons"});
    visit(o.preload_experts,
          OptionInfo{"preload_experts",
                     "when memory_budget holds every routed expert, read them all at model load (one pass, as a "
                     "mapped engine holds its whole model) so no job waits for an expert's first read; false reads "
                     "each on first use"});
    // `max_batch` is jobs (sequences) everywhere; tokens per pass are max_batch_tokens.
    visit(o.max_sequences, OptionInfo{"max_batch",
                                      "jobs of one model decoded together, each expert read once per step for all "
                                      "of them; the KV cache holds max_batch x context tokens (halved at load until "
                                      "it fits memory_budget); 1 = one job at a time",
                                      1, 1024});
    visit(o.prefix_cache,
          OptionInfo{"prefix_cache",
                     "prompt-prefix snapshots kept so jobs whose prompts begin alike (a JSONL batch's system prompt, "
                     "a --dir batch's template) prefill the common part once (docs/batching.md); each holds its "
                     "tokens' rows of the KV cache while kept, and one sequence's recurrent state on KDA/delta-net "
                     "models; 0 = off",
                     0, 64});
    // Set by programs and flags, not config keys.
    visit(o.fewer_sequences, OptionInfo{"fewer_sequences",
                                        "load with fewer than max_batch sequences when the memory plan holds no "
                                        "more (ModelSummary::sequences says how many); off, such a load fails",
                                        0, 0, false});
    visit(o.max_batch_tokens, OptionInfo{"max_batch_tokens",
                                         "tokens per forward pass (a prefill chunk, or one token of every sequence); "
                                         "0 = sized from memory_budget; never below max_batch",
                                         0, 1 << 20, false});
    visit(o.kv_tokens, OptionInfo{"kv_tokens",
                                  "KV cache tokens all sequences share; 0 = max_batch x context, or the largest "
                                  "pool memory_budget holds",
                                  0, int64_t{1} << 40, false});
    visit(o.cache_policy, OptionInfo{"cache_policy", "which expert the cache evicts: lru or lfu", 0, 0, false});
    visit(o.io_queue_depth,
          OptionInfo{"io_queue_depth", "expert reads in flight per device the model's files sit on", 1, 4096, false});
    visit(o.mla_expanded_cache,
          OptionInfo{"mla_expanded_cache",
                     "deepseek2 files with the fused attn_kv_b: cache expanded keys and values as the reference "
                     "does (its logits exactly) instead of the latent",
                     0, 0, false});
  }
};

// An option's value as a config file writes it: 8, true, uring, 8GiB (a
// size in the largest binary unit that divides it exactly, 0 alone).
std::string option_text(bool v);
std::string option_text(long long v);
std::string option_text(uint64_t bytes);
inline std::string option_text(int v) { return option_text(static_cast<long long>(v)); }
inline std::string option_text(int64_t v) { return option_text(static_cast<long long>(v)); }
inline std::string option_text(const std::string& v) { return v.empty() ? "\"\"" : v; }  // as YAML writes ""
template <class Names>
std::string option_text(const Choice<Names>& v) {
  return v.name();
}

// The text of the option `name` of `o` (option_text); "" when no row has that name.
std::string engine_option_text(const EngineOptions& o, std::string_view name);

// Sets the option `name` of `to` to its value in `from` (a command's flags
// over a config's settings: run-batch). False when no row has that name.
bool copy_engine_option(EngineOptions& to, const EngineOptions& from, std::string_view name);

// A byte size as an option takes it: a number with a unit (8GiB, 2500MiB),
// or 0. A bare number is refused (`2048` meant MiB or GiB, and as bytes it
// would fail only at the model's load). Throws Error(invalid_input) naming `key`.
uint64_t parse_option_bytes(std::string_view key, const std::string& text);

}  // namespace ns
