// The nightshift CLI's commands, registered on one CLI11 app by area.
#pragma once

#include <CLI/CLI.hpp>

namespace ns::cli {

// Exit codes scripts can rely on.
enum ExitCode : int {
  kOk = 0,
  kFailure = 1,       // the operation failed (message on stderr)
  kUsage = 2,         // bad command line
  kNotFound = 3,      // no such job / model
  kInvalidInput = 4,  // input rejected (bad prompt, bad sampling values, bad model file)
};

// run, logits, model info  (daemon/cli/generation_commands.cpp)
void add_generation_commands(CLI::App& app, int& exit_code);
// submit, list, show, cancel, retry, prune  (daemon/cli/queue_commands.cpp)
void add_queue_commands(CLI::App& app, int& exit_code);
// export, status, watch  (daemon/cli/workflow_commands.cpp)
void add_workflow_commands(CLI::App& app, int& exit_code);
// migrate-queue (daemon/cli/migrate_queue_command.cpp, declared in its header)

}  // namespace ns::cli
