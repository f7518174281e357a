#include "daemon/cli/command_support.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
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
  cmd->add_option("--db", args.db,
                  "the queue: a SQLite file or a postgresql:// URL (else the config's database:, $NIGHTSHIFT_DB, "
                  "./nightshift.db)");
  cmd->add_option("--config", args.config, "daemon config whose database: to use");
}

// The config's busy timeout and synchronous setting; the start-up integrity
// check is the daemon's business (the CLI opens the file for a moment).
std::unique_ptr<jobs::Queue> open_queue(const DatabaseArgs& args) {
  const std::optional<daemon::Config> config = config_of(args);
  jobs::SqliteOptions options = daemon::sqlite_options_from(config ? &*config : nullptr);
  options.integrity_check = jobs::IntegrityCheck::off;
  return jobs::open_queue(daemon::resolve_database_path(args.db, config ? &*config : nullptr), options,
                          daemon::pg_options_from(config ? &*config : nullptr));
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
    // A bad model file is invalid input (commands.h), as a bad prompt is.
    const bool invalid = e.kind() == ErrorKind::invalid_input || e.kind() == ErrorKind::bad_model;
    exit_code = invalid ? kInvalidInput : kFailure;
  } catch (const std::exception& e) {
    std::cout.flush();
    std::fprintf(stderr, "nightshift %s: %s\n", name, printable(e.what()).c_str());
    exit_code = kFailure;
  }
}

int missing_file_code(int err) { return err == ENOENT || err == ENOTDIR ? kNotFound : kInvalidInput; }

std::string read_file_or_stdin(const std::string& path, const char* what) {
  if (path == "-") return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  const auto refuse = [&](int err) {
    return CommandError{missing_file_code(err),
                        std::string("cannot read ") + what + " " + path + ": " + std::strerror(err)};
  };
  // open(2) and read(2): errno's words for every failure (a directory is EISDIR,
  // not libstdc++'s "basic_filebuf::underflow").
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw refuse(errno);
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    throw refuse(EISDIR);
  }
  std::string text;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      throw refuse(err);
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

void require_batch(jobs::Queue& queue, const std::string& batch) {
  const jobs::QueueCounts c = queue.counts(batch);
  if (c.queued + c.running + c.done + c.failed + c.cancelled + c.dead > 0) return;
  std::string known;
  for (const jobs::BatchSummary& b : queue.batches(10)) known += (known.empty() ? "" : ", ") + b.name;
  throw CommandError{kNotFound,
                     "no batch named " + batch + " in this database" +
                         (known.empty() ? std::string(" (it has no batches)") : "; recent batches: " + known)};
}

void require_file(const std::string& path, const char* what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw CommandError{missing_file_code(errno), std::string(what) + " " + path + ": " + std::strerror(errno)};
  }
  if (S_ISDIR(st.st_mode)) {
    throw CommandError{kInvalidInput, std::string(what) + " " + path + ": " + std::strerror(EISDIR)};
  }
}

}  // namespace ns::cli
