// submit's model check against --config (daemon/cli/model_check.h).
#include <doctest/doctest.h>

#include "daemon/cli/model_check.h"

using ns::cli::ModelCheck;

namespace {

ns::jobs::JobSpec job(const std::string& model, bool chat = false) {
  ns::jobs::JobSpec s;
  s.model = model;
  if (chat) {
    s.messages = R"([{"role":"user","content":"hi"}])";
  } else {
    s.prompt = "p";
  }
  return s;
}

}  // namespace

TEST_CASE("a model name the config does not list is refused, with the close names") {
  ns::daemon::Config config;
  config.source = "/etc/nightshift/config.yaml";
  config.models = {{"kimi-k2", "/models/k2.gguf"}, {"qwen3", "/models/q.gguf"}, {"tiny", "/nowhere/tiny.gguf"}};
  ModelCheck check(config);
  const std::string typo = check.problem(job("kimi-k3"));
  CHECK_MESSAGE(typo ==
                    "model 'kimi-k3' is not under models: in /etc/nightshift/config.yaml (kimi-k2, qwen3, tiny); "
                    "did you mean 'kimi-k2'? Fix the name, or add the model to the config; --any-model queues it "
                    "anyway (for a daemon with another config)",
                typo);
  CHECK(check.problem(job("mistral")).find("(kimi-k2, qwen3, tiny). Fix the name") != std::string::npos);
  // A file that is not there is refused with the path and errno's words (#31: jobs were held or dead by morning).
  const std::string missing = check.problem(job("tiny", /*chat=*/true));
  CHECK_MESSAGE(missing ==
                    "model 'tiny': its file /nowhere/tiny.gguf (models.tiny in /etc/nightshift/config.yaml): "
                    "No such file or directory. Fix the path in the config, or mount its disk; --any-model "
                    "queues it anyway (for a daemon on another machine)",
                missing);
  CHECK(ns::cli::close_names("qwen", config.models) == "'qwen3'");
  CHECK(ns::cli::close_names("llama", config.models).empty());
}

TEST_CASE("without a config, or one without models, nothing is checked") {
  ModelCheck none;
  CHECK(none.problem(job("anything")).empty());
  ns::daemon::Config empty;
  ModelCheck no_models(empty);
  CHECK(no_models.problem(job("anything")).empty());
}

TEST_CASE("n above max_batch is refused with the limit; a file that exists but is no GGUF is the daemon's to judge") {
  ns::daemon::Config config;
  config.source = "/etc/nightshift/config.yaml";
  config.engine.max_sequences = 4;
  config.models = {{"here", "/proc/self/status"}};  // exists, readable, not a GGUF
  ModelCheck check(config);
  ns::jobs::JobSpec s = job("here");
  CHECK(check.problem(s).empty());
  s.sampling.n = 5;
  CHECK(check.problem(s) ==
        "n = 5 choices, but the daemon decodes at most max_batch = 4 sequences together "
        "(/etc/nightshift/config.yaml): lower n, or raise max_batch");
  s.sampling.n = 4;
  CHECK(check.problem(s).empty());
}
