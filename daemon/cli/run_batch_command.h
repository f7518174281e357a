// nightshift run-batch: an OpenAI Batch file through a model in one command,
// no daemon (daemon/cli/run_batch.h does the work).
#pragma once

#include <CLI/CLI.hpp>

namespace ns::cli {

void add_run_batch_command(CLI::App& app, int& exit_code);

}  // namespace ns::cli
