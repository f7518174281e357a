// nightshift completion bash: prints the bash completion script generated from
// this program's own commands and options (daemon/lib/bash_completion.h).
#pragma once

#include <CLI/CLI.hpp>

namespace ns::cli {

// Register last: the script covers the commands registered on `app` when it runs.
void add_completion_command(CLI::App& app, int& exit_code);

}  // namespace ns::cli
