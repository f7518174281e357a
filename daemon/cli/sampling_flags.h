// The sampling flags shared by `run` and `submit`, bound to a SamplingParams.
#pragma once

#include <CLI/CLI.hpp>

#include "engine/sampling_params.h"

namespace ns::cli {

inline void add_sampling_flags(CLI::App* cmd, SamplingParams& p) {
  cmd->add_option("--max-tokens,-n", p.max_tokens, "Completion tokens at most")->capture_default_str();
  cmd->add_option("--temperature,--temp", p.temperature, "0 = greedy")->capture_default_str();
  cmd->add_option("--top-k", p.top_k, "Keep the k most likely tokens (0 = off)")->capture_default_str();
  cmd->add_option("--top-p", p.top_p, "Nucleus sampling threshold (1 = off)")->capture_default_str();
  cmd->add_option("--min-p", p.min_p, "Drop tokens below min-p x the best one's probability (0 = off)")->capture_default_str();
  cmd->add_option("--repeat-penalty", p.repeat_penalty, "Penalty for repeated tokens (1 = off)")->capture_default_str();
  cmd->add_option("--repeat-last-n", p.repeat_last_n, "How far back the penalty looks")->capture_default_str();
  cmd->add_option("--seed", p.seed, "Random seed: same seed, same text")->capture_default_str();
  cmd->add_option("--stop", p.stop, "Stop string (repeatable); not included in the output")->allow_extra_args(false);
  cmd->add_flag("--ignore-eos", p.ignore_eos, "Keep generating past the end-of-text token");
  cmd->add_option("--choices", p.n, "Choices from one prompt (OpenAI's n): choice k draws with seed + k")
      ->capture_default_str();
  cmd->add_flag("--logprobs", p.logprobs, "Record each generated token's logprob (raw log-softmax of the logits)");
  cmd->add_option("--top-logprobs", p.top_logprobs, "And its K most likely alternatives, 0..20 (implies --logprobs)")
      ->each([&p](const std::string&) { p.logprobs = true; });
}

}  // namespace ns::cli
