// What every queue-facing command shares: finding and opening the database
// (--db / --config, as the daemon finds it: daemon/lib/database_path.h), and
// turning a failure into one line on stderr plus an exit code (commands.h).
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "jobs/queue.h"

namespace ns::cli {

// --db / --config, shared by every queue command.
struct DatabaseArgs {
  std::string db;
  std::string config;
};
void add_database_options(CLI::App* cmd, DatabaseArgs& args);

// submit's check of model names (and chat templates) against --config's
// models: (daemon/cli/model_check.h); checks nothing without --config or with `any_model`.
class ModelCheck;
ModelCheck model_check_for(const DatabaseArgs& args, bool any_model);

// A failure with its exit code, thrown inside a command body.
struct CommandError {
  int code;
  std::string message;
};

// Opens (creating if needed) the queue; the config's busy timeout and
// synchronous setting apply. For commands that write (submit).
std::unique_ptr<jobs::Queue> open_queue(const DatabaseArgs& args);
// For reading commands: a mistyped path is an error, not a new empty database;
// a SQLite file this user may only read is opened read-only (SqliteOptions::read_only).
std::unique_ptr<jobs::Queue> open_existing(const DatabaseArgs& args);

// Text for the terminal: passwords redacted (redact_secrets), controls
// escaped by the one sanitiser (daemon::escape_controls; newlines and tabs kept).
std::string printable(std::string_view message);

// Runs a command body: exit_code = kOk, or the failure's code with
// "nightshift NAME: message" (printable) on stderr. A body may set exit_code itself for
// a partial success (e.g. some JSONL lines rejected); that value is kept.
void run_command(const char* name, int& exit_code, const std::function<void()>& body);

// The exit code for a file that cannot be opened: kNotFound when it is not
// there (errno ENOENT, ENOTDIR), kInvalidInput otherwise (permissions, a directory).
int missing_file_code(int err);

// The whole file (binary), or stdin for "-"; a CommandError (missing_file_code) naming the file and
// errno's words otherwise ("Is a directory" for a directory: exit 4).
std::string read_file_or_stdin(const std::string& path, const char* what);

// A named batch must exist (exit 3, naming the recent ones): a typo should
// not look like an empty listing or export.
void require_batch(jobs::Queue& queue, const std::string& batch);

// A file the command is about to open (a model): CommandError naming it with errno's words when it is
// not there (exit 3) or is a directory (exit 4).
void require_file(const std::string& path, const char* what);

}  // namespace ns::cli
