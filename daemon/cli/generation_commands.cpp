// `run` (one-off generation), `logits` (reference-comparable logits), `model info`.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include <unistd.h>

#include "daemon/cli/command_support.h"
#include "daemon/cli/commands.h"
#include "daemon/cli/engine_flags.h"
#include "daemon/cli/openai_batch.h"
#include "daemon/cli/run_progress.h"
#include "daemon/cli/sampling_flags.h"
#include "daemon/lib/config.h"
#include "daemon/lib/failure.h"
#include "common/error.h"
#include "common/human_size.h"
#include "engine/chat/tool_calls.h"
#include "engine/engine.h"

namespace ns::cli {
namespace {

using json = nlohmann::json;
// Random-weight models (and real ones, mid-character) can emit invalid UTF-8:
// it becomes U+FFFD in JSON output instead of an exception.
constexpr auto kReplaceInvalid = json::error_handler_t::replace;

struct RunArgs {
  std::string model, prompt, prompt_file;
  SamplingParams sampling;
  GrammarFlags grammar;
  EngineOptions engine;  // --threads, --context, --memory-budget, --io-mode, --repack-experts (engine_flags.h)
  std::string mla_cache = "latent", cpu_features = "auto";
  bool json = false, quiet = false;
};

struct LogitsArgs {
  std::string model;
  std::vector<std::string> prompts;
  int top = 8, greedy = 16;
  EngineOptions engine;  // --threads, --context, --io-mode, --repack-experts (engine_flags.h)
  std::string mla_cache = "latent", cpu_features = "auto";
  bool json = false;
};

std::string read_prompt(const std::string& text, const std::string& file) {
  if (file.empty()) return text;
  if (file == "-") {
    std::stringstream ss;
    ss << std::cin.rdbuf();
    return ss.str();
  }
  return read_file_or_stdin(file, "the prompt file");
}

json stats_json(const GenerationStats& s) {
  return {{"prompt_tokens", s.prompt_tokens},
          {"completion_tokens", s.completion_tokens},
          {"load_ms", s.load_ms},
          {"prefill_ms", s.prefill_ms},
          {"decode_ms", s.decode_ms},
          {"prefill_tok_s", s.prefill_tok_s},
          {"decode_tok_s", s.decode_tok_s},
          {"peak_rss_bytes", s.peak_rss_bytes},
          {"bytes_read", s.bytes_read},
          {"read_gib_s", s.read_gib_s},
          {"kv_bytes_per_token", s.kv_bytes_per_token},
          {"io_wait_ms", s.io_wait_ms},
          {"compute_ms", s.compute_ms},
          {"cache_hit_rate", s.cache_hit_rate},
          {"prefetch_accuracy", s.prefetch_accuracy},
          {"batch_steps", s.batch_steps},
          {"avg_batch_size", s.avg_batch_size},
          {"decode_share_ms", s.decode_share_ms},
          {"prefix_tokens", s.prefix_tokens}};
}

// --cpu-features: which compute kernels run (use_cpu_features, engine/engine.h).
void add_cpu_features_option(CLI::App* cmd, std::string& value) {
  cmd->add_option("--cpu-features", value,
                  "Compute kernels: auto (the best this CPU has), avx512 (AVX-512 + VNNI), avx2 or scalar; a path "
                  "the CPU lacks is an error naming what it has")
      ->check(CLI::IsMember({"auto", "avx512", "avx2", "scalar"}))
      ->capture_default_str();
}

void run_generation(const RunArgs& a) {
  use_cpu_features(a.cpu_features);
  const std::string prompt = read_prompt(a.prompt, a.prompt_file);
  EngineOptions eo = a.engine;
  eo.mla_expanded_cache = a.mla_cache == "expanded";
  eo.max_sequences = std::max(1, a.sampling.n);  // n choices decode together
  // Progress on stderr when it is a terminal (a loading line first); the decode
  // line too when the text is not streamed to that same terminal (--json, or stdout redirected).
  const bool stderr_tty = ::isatty(STDERR_FILENO) == 1;
  RunProgress progress(stderr, stderr_tty && !a.quiet, a.json || ::isatty(STDOUT_FILENO) != 1, a.sampling.max_tokens);
  require_file(a.model, "the model file");
  progress.loading(a.model);
  std::unique_ptr<Engine> engine;
  try {
    engine = Engine::load(a.model, eo);
  } catch (...) {
    progress.finish();  // the error message starts on a clean line
    throw;
  }
  ProgressFn stream = [&](const GenerationProgress& p) {
    progress.update(p);
    if (!a.json && a.sampling.n == 1 && !p.piece.empty()) {  // several choices are printed at the end
      progress.before_text();
      std::fwrite(p.piece.data(), 1, p.piece.size(), stdout), std::fflush(stdout);
    }
    return true;
  };
  GenerationResult r;
  try {
    r = engine->generate(prompt, a.sampling, stream);
  } catch (const Error& e) {
    progress.finish();
    if (e.kind() != ErrorKind::bad_model) throw;
    // Named as the daemon names a job's (failure.h): the weights of this file, not the prompt, are at fault.
    throw daemon::model_run_error(std::filesystem::path(a.model).stem().string(), a.model, e);
  }
  progress.finish();
  r.stats.load_ms = engine->load_ms();
  if (a.json) {
    nlohmann::ordered_json out{{"text", r.text}, {"finish_reason", r.finish_reason}};
    // n > 1 or logprobs: every choice in the completions shape (docs/batch-jsonl.md).
    if (a.sampling.n > 1 || a.sampling.logprobs) {
      nlohmann::ordered_json choices = nlohmann::ordered_json::array();
      for (size_t k = 0; k <= r.more_choices.size(); ++k) {
        const GenerationChoice& c = k == 0 ? static_cast<const GenerationChoice&>(r) : r.more_choices[k - 1];
        nlohmann::ordered_json o{{"index", k}, {"text", c.text}, {"finish_reason", c.finish_reason}};
        o["logprobs"] = a.sampling.logprobs ? cli::completion_logprobs_json(c.logprobs, r.pieces) : nullptr;
        choices.push_back(std::move(o));
      }
      out["choices"] = std::move(choices);
    }
    out["stats"] = nlohmann::ordered_json::parse(stats_json(r.stats).dump());
    std::cout << out.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
    return;
  }
  for (size_t k = 0; a.sampling.n > 1 && k <= r.more_choices.size(); ++k) {
    const GenerationChoice& c = k == 0 ? static_cast<const GenerationChoice&>(r) : r.more_choices[k - 1];
    std::printf("%s--- choice %zu (seed %llu, %s)\n%s", k == 0 ? "" : "\n", k,
                static_cast<unsigned long long>(a.sampling.seed + k), c.finish_reason.c_str(), c.text.c_str());
  }
  // The streamed pieces may include a stop string's first bytes; the result text is exact.
  std::printf("\n");
  std::fprintf(
      stderr,
      "[%s] prompt %d tok, prefill %.1f tok/s | completion %d tok, decode %.1f tok/s | load %.0f ms | peak RSS %.1f MiB\n",
      r.finish_reason.c_str(), r.stats.prompt_tokens, r.stats.prefill_tok_s, r.stats.completion_tokens,
      r.stats.decode_tok_s, r.stats.load_ms, r.stats.peak_rss_bytes / 1048576.0);
  std::fprintf(stderr,
               "[io %s] read %.1f MiB at %.2f GiB/s | io wait %.0f ms, compute %.0f ms | expert cache hits %.1f%% | "
               "prefetch accuracy %.1f%%\n",
               a.engine.io_mode.name(), r.stats.bytes_read / 1048576.0, r.stats.read_gib_s, r.stats.io_wait_ms,
               r.stats.compute_ms, 100.0 * r.stats.cache_hit_rate, 100.0 * r.stats.prefetch_accuracy);
}

void logits_command(const LogitsArgs& a) {
  use_cpu_features(a.cpu_features);
  EngineOptions eo = a.engine;
  eo.mla_expanded_cache = a.mla_cache == "expanded";
  require_file(a.model, "the model file");
  auto engine = Engine::load(a.model, eo);
  json all = json::array();
  for (const std::string& prompt : a.prompts) {
    const LogitsReport r = engine->logits(prompt, a.greedy, a.top);
    json out;
    out["model"] = a.model.substr(a.model.find_last_of('/') + 1);
    out["prompt"] = prompt;
    out["prompt_tokens"] = r.prompt_tokens;
    out["prompt_top_logits"] = r.prompt_top;
    out["greedy"] = r.greedy;
    out["greedy_top_logits"] = r.greedy_top;
    all.push_back(out);
  }
  // One prompt: one object (the goldens' entry schema); several: an array, like the goldens files.
  const json& result = all.size() == 1 ? all[0] : all;
  if (a.json) {
    std::cout << result.dump(-1, ' ', false, kReplaceInvalid) << "\n";
  } else {
    for (const auto& o : all) {
      std::cout << "prompt tokens: " << o["prompt_tokens"].dump() << "\n";
      std::cout << "greedy: " << o["greedy"].dump() << "\n";
    }
  }
}

// The plan's options (--memory-budget, --context, --max-batch, --prefix-cache)
// are rows of the option table; the report plans only when a budget is given.
struct ModelInfoArgs {
  std::string path;
  std::string disk_rate;  // e.g. "2.3GiB" (per second): the disk-bound estimate's rate
  EngineOptions engine = [] {
    EngineOptions e;                                        // one sequence unless --max-batch, as a bare engine
    e.prefix_cache = daemon::Config{}.engine.prefix_cache;  // the daemon's default
    return e;
  }();
  CLI::Option* memory_budget = nullptr;  // given: make the memory plan
  bool json = false;
};

void model_info_command(const ModelInfoArgs& a) {
  ModelReportOptions ro;
  ro.engine = a.engine;
  ro.plan = a.memory_budget->count() > 0;
  const double rate = a.disk_rate.empty() ? 0.0 : static_cast<double>(parse_size(a.disk_rate));
  ro.disk_bytes_per_s = rate;
  require_file(a.path, "the model file");
  const ModelReport m = describe_model(a.path, ro);
  json o = {{"path", a.path},
            {"name", m.name},
            {"architecture", m.architecture},
            {"gguf_version", m.gguf_version},
            {"file_bytes", m.file_bytes},
            {"parameters", m.parameters},
            {"active_parameters_per_token", m.active_parameters_per_token},
            {"tensors", m.tensors},
            {"tensors_not_loaded", m.tensors_not_loaded},
            {"tensor_types", m.tensor_types},
            {"n_layer", m.n_layer},
            {"n_embd", m.n_embd},
            {"n_head", m.n_head},
            {"n_head_kv", m.n_head_kv},
            {"n_ff", m.n_ff},
            {"n_expert", m.n_expert},
            {"n_expert_used", m.n_expert_used},
            {"bytes_per_expert", m.bytes_per_expert},
            {"resident_bytes", m.resident_bytes},
            {"kv_bytes_per_token", m.kv_bytes_per_token},
            {"recurrent_bytes_per_sequence", m.recurrent_bytes_per_sequence},
            {"context_length", m.context_length},
            {"tokenizer", m.tokenizer},
            {"pre_tokenizer", m.pre_tokenizer}};
  // How chat jobs for it become prompts: the template's source, the tokens it is given, the tool-call markup
  // nightshift parses back, and a rendered sample (or the template's own error).
  {
    const auto file = ModelFile::open(a.path);
    json chat = json::object();
    if (!file->chat_template()) {
      chat["source"] = "none (a base model: chat jobs need models.NAME.chat_template in the config)";
    } else {
      chat["source"] = "the GGUF's Jinja template (" + std::to_string(file->chat_template()->size()) + " bytes)";
      chat["bos_token"] = file->bos_text();
      chat["eos_token"] = file->eos_text();
      const auto format = chat::tool_call_format(*file->chat_template());
      chat["tool_calls"] = format ? chat::tool_call_format_name(*format) : "none (replies stay text)";
      try {
        std::vector<chat::ChatMessage> sample(2);
        sample[0].role = "system";
        sample[0].content = "You are a helpful assistant.";
        sample[1].role = "user";
        sample[1].content = "Hello!";
        chat["sample"] =
            chat::ChatPrompter("", file->chat_template(), file->bos_text(), file->eos_text()).render(sample, true);
      } catch (const Error& e) {
        chat["sample_error"] = e.what();
      }
    }
    o["chat_template"] = std::move(chat);
  }
  // A split model (gguf-split shards): each shard, its bytes and the device
  // (st_dev major:minor, symlinks resolved) that serves its reads.
  if (m.shards.size() > 1) {
    json shards = json::array();
    for (const ShardReport& s : m.shards)
      shards.push_back({{"path", s.path},
                        {"resolved_path", s.resolved_path},
                        {"bytes", s.bytes},
                        {"device", std::to_string(s.device_major) + ":" + std::to_string(s.device_minor)}});
    o["shards"] = shards;
  }
  if (m.memory_plan) {
    const MemoryPlanReport& p = *m.memory_plan;
    json pairs = json::array();
    for (const auto& t : p.batch_x_context)
      pairs.push_back({{"context", t.context}, {"max_batch", t.max_batch}, {"kv_tokens", t.kv_tokens}});
    // As the daemon plans it: a budget that cannot hold max_batch contexts may hold fewer (plan_fit); say so.
    const std::string fewer = p.max_batch == p.max_batch_asked
                                  ? ""
                                  : "max_batch " + std::to_string(p.max_batch_asked) + " does not fit memory_budget " +
                                        option_text(a.engine.memory_budget) + "; the daemon's plan holds";
    std::string steps;
    for (const std::string& step : p.fit_steps) steps += "  (" + step + ")\n";
    o["memory_plan"] = {
        {"memory_budget", p.memory_budget},
        {"context", p.context},
        {"kv_tokens", p.kv_tokens},
        {"max_batch", p.max_batch},
        {"max_batch_asked", p.max_batch_asked},
        {"fit_steps", p.fit_steps},
        {"prefix_cache", p.prefix_cache},
        {"resident_bytes", p.resident_bytes},
        {"kv_cache_bytes", p.kv_cache_bytes},
        {"recurrent_bytes", p.recurrent_bytes},
        {"cache_experts", p.cache_experts},
        {"streamed_experts", p.streamed_experts},
        {"minimum_budget", p.minimum_budget},
        {"batch_x_context", pairs},
        {"summary", "  for " + std::to_string(p.max_batch) + " sequence(s) of up to " + std::to_string(p.context) +
                        " tokens sharing a KV cache of " + std::to_string(p.kv_tokens) + " tokens" +
                        (fewer.empty() ? "" : " (" + fewer + " " + std::to_string(p.max_batch) + ")") + "\n" + steps +
                        p.description + "  max_batch x context that fit: " + p.batch_x_context_text +
                        "\n  (sequences of that full length; the daemon shares the KV cache by the "
                        "jobs' actual lengths)\n"}};
    // What the daemon warns at start: a budget above the cgroup's (or machine's) memory ends in OOM kills.
    if (const std::string w = memory_budget_warning(p.memory_budget); !w.empty()) o["memory_plan"]["warning"] = w;
    if (m.disk_bound) {
      const DiskBoundReport& e = *m.disk_bound;
      std::string text;
      const auto mib = [](double b) { return b / (1 << 20); };
      char line[512];
      std::snprintf(line, sizeof line,
                    "  expert cache hit rate  %.0f %% (the cached share of the experts, routing spread evenly)\n"
                    "  1 sequence             %.1f MiB read per token",
                    100 * e.hit_rate, mib(e.bytes_per_token_batch1));
      text += line;
      if (rate > 0) text += (std::snprintf(line, sizeof line, ": at most %.2f tok/s", e.tok_s_batch1), line);
      std::snprintf(line, sizeof line,
                    "\n  %lld sequences          %.1f MiB read per token (each step touches 99 %% of the experts)",
                    static_cast<long long>(e.full_batch), mib(e.bytes_per_token_full));
      text += line;
      if (rate > 0) text += (std::snprintf(line, sizeof line, ": at most %.2f tok/s", e.tok_s_full), line);
      text += rate > 0 ? "\n  (disk " + a.disk_rate + "/s; compute and resident weights not counted: upper bounds)\n"
                       : "\n  (give --disk-rate 2GiB for tokens per second)\n";
      o["disk_bound"] = {{"hit_rate", e.hit_rate},
                         {"bytes_per_token_batch1", e.bytes_per_token_batch1},
                         {"tok_s_batch1", e.tok_s_batch1},
                         {"full_batch", e.full_batch},
                         {"bytes_per_token_full_batch", e.bytes_per_token_full},
                         {"tok_s_full_batch", e.tok_s_full},
                         {"disk_bytes_per_s", rate},
                         {"summary", text}};
    }
  }
  if (a.json) {
    std::cout << o.dump(2, ' ', false, kReplaceInvalid) << "\n";
    return;
  }
  for (auto it = o.begin(); it != o.end(); ++it)
    if (it.key() != "memory_plan" && it.key() != "disk_bound" && it.key() != "shards")
      std::cout << it.key() << ": " << it.value().dump(-1, ' ', false, kReplaceInvalid) << "\n";
  if (o.contains("shards")) {
    std::cout << "shards: " << m.shards.size() << "\n";
    for (const ShardReport& s : m.shards)
      std::cout << "  " << s.path << "  " << s.bytes << " bytes (" << format_size(s.bytes) << ")  device "
                << s.device_major << ":" << s.device_minor
                << (std::filesystem::is_symlink(s.path) ? "  -> " + s.resolved_path : std::string()) << "\n";
  }
  if (o.contains("memory_plan")) {
    std::cout << "memory plan:\n" << o["memory_plan"]["summary"].get<std::string>() << "\n";
    if (o["memory_plan"].contains("warning"))
      std::cout << "warning: " << o["memory_plan"]["warning"].get<std::string>() << "\n\n";
  }
  if (o.contains("disk_bound")) std::cout << "disk-bound speed:\n" << o["disk_bound"]["summary"].get<std::string>();
}

}  // namespace

void add_generation_commands(CLI::App& app, int& exit_code) {
  auto run_args = std::make_shared<RunArgs>();
  auto* run = app.add_subcommand("run", "Generate text for one prompt now, without the queue or the daemon")
                  ->footer(
                      "Examples:\n"
                      "  nightshift run --model model.gguf --temperature 0 -n 64 \"Once upon a time\"\n"
                      "  nightshift run --model big-moe.gguf --memory-budget 3GiB -f chapter.md -n 400 > more.md\n"
                      "  nightshift run --model model.gguf --json \"Hello\" | jq .stats.decode_tok_s\n"
                      "On a terminal, stderr shows the prefill (and, when the text is not streamed there, the\n"
                      "decode) progress with tok/s and ETA; the final line has llama.cpp-style timings.\n"
                      "Exit status: 0 generated, 2 bad command line (no prompt), 3 no such model or prompt file,\n"
                      "4 a bad model file, prompt or sampling value, 1 any other failure.\n");
  run->add_option("--model,-m", run_args->model, "GGUF model file")->required();
  run->add_option("prompt", run_args->prompt, "Prompt text");
  run->add_option("--prompt-file,-f", run_args->prompt_file, "Read the prompt from a file ('-' = stdin)");
  add_engine_flag(run, run_args->engine, "threads", "-t");
  add_engine_flag(run, run_args->engine, "context", "-c");
  add_engine_flag(run, run_args->engine, "memory_budget");
  add_engine_flag(run, run_args->engine, "io_mode");
  run->add_option("--mla-cache", run_args->mla_cache,
                  "deepseek2 files with the fused attn_kv_b: latent (small) or expanded (the reference's way)")
      ->check(CLI::IsMember({"latent", "expanded"}))
      ->capture_default_str();
  add_cpu_features_option(run, run_args->cpu_features);
  add_engine_flag(run, run_args->engine, "repack_experts");
  run->add_flag("--json", run_args->json,
                "Print one JSON object {text, finish_reason, stats}, with choices [{index, text, finish_reason, "
                "logprobs}] when --choices > 1 or --logprobs");
  run->add_flag("--no-progress", run_args->quiet,
                "No live prefill/decode progress line on stderr (shown on a terminal for generations over 0.5 s)");
  add_sampling_flags(run, run_args->sampling);
  add_grammar_flags(run, run_args->grammar);
  // One error prefix and one exit-code table for every command (command_support.h's run_command).
  run->callback([run_args, &exit_code] {
    run_command("run", exit_code, [&] {
      if (run_args->prompt.empty() && run_args->prompt_file.empty())
        throw CommandError{kUsage, "no prompt: pass it as an argument or with --prompt-file"};
      apply_grammar_flags(run_args->grammar, run_args->sampling);
      run_generation(*run_args);
    });
  });

  auto la = std::make_shared<LogitsArgs>();
  auto* logits =
      app.add_subcommand("logits",
                         "Print prompt token ids, top logits and a greedy continuation "
                         "(the schema of the reference goldens)")
          ->footer(
              "Example:\n  nightshift logits --model m.gguf --prompt 'Once upon a time' --top 8 --greedy 16 --json\n"
              "Exit status: 0 printed, 2 bad command line, 3 no such model file, 4 a bad model file or\n"
              "prompt, 1 any other failure.\n");
  logits->add_option("--model,-m", la->model, "GGUF model file")->required();
  logits->add_option("--prompt,-p", la->prompts, "Prompt (repeatable)")->required();
  logits->add_option("--top", la->top, "How many [id, logit] pairs per position")->capture_default_str();
  logits->add_option("--greedy", la->greedy, "Greedy tokens to generate")->capture_default_str();
  add_engine_flag(logits, la->engine, "threads", "-t");
  add_engine_flag(logits, la->engine, "context", "-c");
  add_engine_flag(logits, la->engine, "io_mode");
  logits
      ->add_option("--mla-cache", la->mla_cache,
                   "deepseek2 files with the fused attn_kv_b: latent (small) or expanded (the reference's way; "
                   "its logits exactly)")
      ->check(CLI::IsMember({"latent", "expanded"}))
      ->capture_default_str();
  add_cpu_features_option(logits, la->cpu_features);
  add_engine_flag(logits, la->engine, "repack_experts");
  logits->add_flag("--json", la->json, "JSON output");
  logits->callback([la, &exit_code] { run_command("logits", exit_code, [&] { logits_command(*la); }); });

  auto* model = app.add_subcommand("model", "Inspect model files")
                    ->require_subcommand(1)
                    ->footer("Example:\n  nightshift model info model.gguf --memory-budget 8GiB");
  auto ia = std::make_shared<ModelInfoArgs>();
  auto* info = model
                   ->add_subcommand("info",
                                    "Architecture, parameters (total and active per token), quant mix, "
                                    "bytes per expert, KV bytes per token, and the memory plan for a budget")
                   ->footer(
                       "Example:\n  nightshift model info model.gguf --memory-budget 8GiB --json\n"
                       "Exit status: 0 described, 2 bad command line, 3 no such file, 4 not a model file nightshift\n"
                       "reads (corrupt, truncated, unsupported), 1 any other failure.\n");
  info->add_option("path", ia->path, "GGUF model file")->required();
  // The daemon's options the plan weighs, as its config names them (with
  // --memory-budget: what it holds resident; fewer than --max-batch when it holds no more, as the daemon's plan).
  ia->memory_budget = add_engine_flag(info, ia->engine, "memory_budget");
  add_engine_flag(info, ia->engine, "context", "-c");
  add_engine_flag(info, ia->engine, "prefix_cache");
  add_engine_flag(info, ia->engine, "max_batch");
  info->add_option("--disk-rate", ia->disk_rate,
                   "With --memory-budget: the disk's read rate per second (e.g. 2.3GiB, fio's O_DIRECT figure) for "
                   "the disk-bound tokens per second at 1 sequence and at the batch that touches every expert");
  info->add_flag("--json", ia->json, "JSON output");
  info->callback([ia, &exit_code] { run_command("model info", exit_code, [&] { model_info_command(*ia); }); });
}

}  // namespace ns::cli
