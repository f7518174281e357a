// nightshift migrate-queue: copies every job of one queue database into
// another (typically a SQLite file into PostgreSQL, for a fleet), with its
// state, result, attempt history and checkpoint (daemon/cli/migrate_queue_command.cpp).
#pragma once

#include <CLI/CLI.hpp>

namespace ns::cli {

void add_migrate_queue_command(CLI::App& app, int& exit_code);

}  // namespace ns::cli
