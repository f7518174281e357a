// The sampling flags shared by `run` and `submit`, bound to a SamplingParams,
// and the constrained-decoding flags --json-schema FILE / --grammar FILE /
// --json-object, which apply_grammar_flags() turns into SamplingParams::grammar
// after parsing (a file that cannot be read: CommandError with errno's words;
// bad content: ns::Error(invalid_input), the schema's problems named by their
// JSON path, "$.properties.x.format: ...").
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "daemon/cli/command_support.h"
#include "engine/grammar/grammar.h"
#include "engine/grammar/json_schema.h"
#include "common/sampling_params.h"
#include "common/error.h"

namespace ns::cli {

inline void add_sampling_flags(CLI::App* cmd, SamplingParams& p) {
  cmd->add_option("--max-tokens,-n", p.max_tokens, "Completion tokens at most")->capture_default_str();
  cmd->add_option("--temperature,--temp", p.temperature, "0 = greedy")->capture_default_str();
  cmd->add_option("--top-k", p.top_k, "Keep the k most likely tokens (0 = off)")->capture_default_str();
  cmd->add_option("--top-p", p.top_p, "Nucleus sampling threshold (1 = off)")->capture_default_str();
  cmd->add_option("--min-p", p.min_p, "Drop tokens below min-p x the best one's probability (0 = off)")
      ->capture_default_str();
  cmd->add_option("--repeat-penalty", p.repeat_penalty, "Penalty for repeated tokens (1 = off)")->capture_default_str();
  cmd->add_option("--repeat-last-n", p.repeat_last_n, "How far back the penalty looks")->capture_default_str();
  cmd->add_option("--seed", p.seed, "Random seed: same seed, same text (0 .. 2^64-1)")
      // "-1" would wrap to 2^64-1 (JSONL refuses it too).
      ->check(CLI::Validator(
          [](std::string& v) {
    return !v.empty() && v[0] == '-' ? "must be 0 or more (an unsigned 64-bit number), got " + v : std::string();
          },
          "UINT64"))
      ->capture_default_str();
  cmd->add_option("--stop", p.stop, "Stop string (repeatable); not included in the output")->allow_extra_args(false);
  cmd->add_flag("--ignore-eos", p.ignore_eos, "Keep generating past the end-of-text token");
  cmd->add_option("--choices", p.n, "Choices from one prompt (OpenAI's n): choice k draws with seed + k")
      ->capture_default_str();
  cmd->add_flag("--logprobs", p.logprobs, "Record each generated token's logprob (raw log-softmax of the logits)");
  cmd->add_option("--top-logprobs", p.top_logprobs, "And its K most likely alternatives, 0..20 (implies --logprobs)")
      ->each([&p](const std::string&) { p.logprobs = true; });
}

struct GrammarFlags {
  std::string json_schema_file, grammar_file;
  bool json_object = false;
};

inline void add_grammar_flags(CLI::App* cmd, GrammarFlags& g) {
  auto* schema =
      cmd->add_option("--json-schema", g.json_schema_file,
                      "Constrain the output to JSON valid under this JSON Schema file (docs/constrained-decoding.md "
                      "lists what is supported)");
  auto* grammar = cmd->add_option("--grammar", g.grammar_file, "Constrain the output to this GBNF grammar file");
  auto* object = cmd->add_flag("--json-object", g.json_object, "Constrain the output to one JSON object (JSON mode)");
  schema->excludes(grammar)->excludes(object);
  grammar->excludes(object);
}

// errno's words, exit 3 for a file that is not there (command_support.h).
inline std::string read_grammar_file(const std::string& path, const char* what) {
  return read_file_or_stdin(path, what);
}

// Compiles and checks what the flags name into p.grammar (left alone when no flag is given).
inline void apply_grammar_flags(const GrammarFlags& g, SamplingParams& p) {
  if (!g.json_schema_file.empty()) {
    try {
      p.grammar = grammar::json_schema_to_gbnf_cached(read_grammar_file(g.json_schema_file, "the JSON schema file"));
    } catch (const ns::Error& e) {
      throw ns::Error(e.kind(), g.json_schema_file + ": " + e.what());
    }
  } else if (!g.grammar_file.empty()) {
    p.grammar = read_grammar_file(g.grammar_file, "the grammar file");
    try {
      grammar::parse_gbnf(p.grammar);
    } catch (const ns::Error& e) {
      throw ns::Error(e.kind(), g.grammar_file + ": " + e.what());
    }
  } else if (g.json_object) {
    p.grammar = grammar::json_object_gbnf();
  }
}

}  // namespace ns::cli
