#include "daemon/cli/command_support.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>

#include "daemon/cli/commands.h"
#include "daemon/cli/model_check.h"
#include "daemon/lib/config.h"
#include "daemon/lib/database_path.h"
#include "daemon/lib/job_format.h"
#include "common/redact.h"
#include "common/error.h"
#include "jobs/open_queue.h"

namespace ns::cli {
namespace {

std::optional<daemon::Config> config_of(const DatabaseArgs& args) {
  if (args.config.empty()) return std::nullopt;
  try {
    return daemon::load_config(args.config);
  } catch (const Error& e) {
    throw CommandError{kUsage, e.what()};
  }
}

}  // namespace

ModelCheck model_check_for(const DatabaseArgs& args, bool any_model) {
  if (any_model) return ModelCheck();
  const std::optional<daemon::Config> config = config_of(args);
  return config ? ModelCheck(*config) : ModelCheck();
}

void add_database_options(CLI::App* cmd, DatabaseArgs& args) {
  cmd->add_option("--db", args.db, "the queue: a SQLite file or a postgresql:// URL (else the config's database:, $NIGHTSHIFT_DB, "
                  "./nightshift.db)");
  cmd->add_option("--config", args.config, "daemon config whose database: to use");
}

// The config's busy timeout and synchronous setting; the start-up integrity
// check is the daemon's business (the CLI opens the file for a moment).
std::unique_ptr<jobs::Queue> open_queue(const DatabaseArgs& args) {
  const std::optional<daemon::Config> config = config_of(args);
  jobs::SqliteOptions options = daemon::sqlite_options_from(config ? &*config : nullptr);
  options.integrity_check = jobs::IntegrityCheck::off;
  return jobs::open_queue(daemon::resolve_database_path(args.db, config ? &*config : nullptr), options);
}

namespace {

// Whether this user may change the database file and create its -wal/-shm files beside it.
bool may_write(const std::string& path) {
  const std::filesystem::path dir = std::filesystem::absolute(path).parent_path();
  return ::access(path.c_str(), W_OK) == 0 && ::access(dir.c_str(), W_OK | X_OK) == 0;
}

}  // namespace

std::unique_ptr<jobs::Queue> open_existing(const DatabaseArgs& args) {
  const std::optional<daemon::Config> config = args.db.empty() ? config_of(args) : std::nullopt;
  const std::string path = daemon::resolve_database_path(args.db, config ? &*config : nullptr);
  std::error_code ec;
  if (!jobs::is_postgres_url(path) && !std::filesystem::exists(path, ec)) {
    throw CommandError{kFailure, "database " + path + " does not exist; pass --db PATH (or --config FILE, or set " +
                                     std::string(daemon::kDatabaseEnv) + ") or submit a job first"};
  }
  try {
    return open_queue(args);
  } catch (const jobs::DatabaseError& e) {
    // A database this user may only read (a read-only mount, another user's
    // file, a directory where the -wal/-shm files cannot be made): read it
    // read-only rather than fail (list, show, status, export only read).
    if (e.transient() || jobs::is_postgres_url(path) || may_write(path)) throw;
    jobs::SqliteOptions options = daemon::sqlite_options_from(config ? &*config : nullptr);
    options.read_only = true;
    return jobs::open_queue(path, options);
  }
}

std::string printable(std::string_view message) { return daemon::escape_controls(redact_secrets(message), true); }

void run_command(const char* name, int& exit_code, const std::function<void()>& body) {
  try {
    exit_code = kOk;
    body();
  } catch (const CommandError& e) {
    std::cout.flush();
    std::fprintf(stderr, "nightshift %s: %s\n", name, printable(e.message).c_str());
    exit_code = e.code;
  } catch (const Error& e) {
    std::cout.flush();
    std::fprintf(stderr, "nightshift %s: %s\n", name, printable(e.what()).c_str());
    exit_code = e.kind() == ErrorKind::invalid_input ? kInvalidInput : kFailure;
  } catch (const std::exception& e) {
    std::cout.flush();
    std::fprintf(stderr, "nightshift %s: %s\n", name, printable(e.what()).c_str());
    exit_code = kFailure;
  }
}

int missing_file_code(int err) { return err == ENOENT || err == ENOTDIR ? kNotFound : kInvalidInput; }

std::string read_file_or_stdin(const std::string& path, const char* what) {
  if (path == "-") return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CommandError{missing_file_code(errno), std::string("cannot read ") + what + " " + path + ": " + std::strerror(errno)};
  std::string text(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>{});
  if (in.bad()) throw CommandError{kInvalidInput, std::string("cannot read ") + what + " " + path + ": read error"};
  return text;
}

}  // namespace ns::cli
