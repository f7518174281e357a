// nightshift submit / list / show / cancel: the queue half of the CLI.
//
// Each command finds its database the same way the daemon does
// (daemon/lib/database_path.h): --db PATH, else `database:` of --config FILE,
// else $NIGHTSHIFT_DB, else ./nightshift.db. Errors print one line on stderr
// and set an exit code from daemon/cli/commands.h.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>

#include "daemon/cli/commands.h"
#include "daemon/cli/sampling_flags.h"
#include "daemon/lib/config.h"
#include "daemon/lib/database_path.h"
#include "daemon/lib/job_format.h"
#include "engine/util/error.h"
#include "jobs/queue.h"

namespace ns::cli {
namespace {

// --db / --config, shared by every queue command.
struct DatabaseArgs {
  std::string db;
  std::string config;
};

void add_database_options(CLI::App* cmd, DatabaseArgs& args) {
  cmd->add_option("--db", args.db, "SQLite queue file (else the config's database:, $NIGHTSHIFT_DB, ./nightshift.db)");
  cmd->add_option("--config", args.config, "daemon config whose database: to use");
}

// A failure with its exit code, thrown inside a command and turned into a message.
struct CommandError {
  int code;
  std::string message;
};

std::string database_path(const DatabaseArgs& args) {
  std::optional<daemon::Config> config;
  if (!args.config.empty() && args.db.empty()) {
    try {
      config = daemon::load_config(args.config);
    } catch (const Error& e) {
      throw CommandError{kUsage, e.what()};
    }
  }
  return daemon::resolve_database_path(args.db, config ? &*config : nullptr);
}

// Reading commands must not create an empty database at a mistyped path.
std::unique_ptr<jobs::Queue> open_existing(const DatabaseArgs& args) {
  const std::string path = database_path(args);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    throw CommandError{kFailure, "database " + path + " does not exist; pass --db PATH (or --config FILE, or set " +
                                     std::string(daemon::kDatabaseEnv) + ") or submit a job first"};
  }
  return jobs::open_sqlite_queue(path);
}

// Runs a command body, mapping failures to exit codes and one line on stderr.
void run_command(const char* name, int& exit_code, const std::function<void()>& body) {
  try {
    body();
    exit_code = kOk;
  } catch (const CommandError& e) {
    std::fprintf(stderr, "nightshift %s: %s\n", name, e.message.c_str());
    exit_code = e.code;
  } catch (const Error& e) {
    std::fprintf(stderr, "nightshift %s: %s\n", name, e.what());
    exit_code = e.kind() == ErrorKind::invalid_input ? kInvalidInput : kFailure;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nightshift %s: %s\n", name, e.what());
    exit_code = kFailure;
  }
}

std::string read_all(std::istream& in) {
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string read_prompt(const std::string& positional, const std::string& file) {
  if (!file.empty() && file != "-") {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw CommandError{kInvalidInput, "cannot read prompt file " + file + ": " + std::strerror(errno)};
    return read_all(in);
  }
  if (file == "-" || positional == "-") return read_all(std::cin);
  return positional;
}

// ---- submit -----------------------------------------------------------------

void add_submit(CLI::App& app, int& exit_code) {
  struct Args {
    DatabaseArgs db;
    std::string prompt, prompt_file;
    jobs::JobSpec spec;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("submit", "Queue a generation job; prints its id");
  auto* positional = cmd->add_option("prompt", a->prompt, "prompt text, or - to read it from stdin");
  auto* file = cmd->add_option("--prompt-file", a->prompt_file, "read the prompt from a file (- = stdin)");
  positional->excludes(file);
  cmd->add_option("--model", a->spec.model, "model name from the daemon config's models:")->required();
  add_sampling_flags(cmd, a->spec.sampling);
  // One value per --stop, so `--stop X 'the prompt'` leaves the prompt positional.
  cmd->get_option("--stop")->allow_extra_args(false);
  cmd->add_option("--priority", a->spec.priority, "higher runs first; ties run oldest first")->capture_default_str();
  cmd->add_option("--key", a->spec.idempotency_key,
                  "idempotency key: submitting the same key again returns the first job's id");
  cmd->add_flag("--json", a->json, "print {\"id\": N, \"created\": true|false}");
  add_database_options(cmd, a->db);
  cmd->footer(
      "Examples:\n"
      "  nightshift submit --model tiny 'Once upon a time'\n"
      "  nightshift submit --model tiny --prompt-file notes.txt --max-tokens 400 --stop $'\\n\\n' --key notes-2025-01-31\n"
      "  cat doc.txt | nightshift submit --model tiny --priority 5 -\n"
      "Exit status: 0 queued (or the key matched a job), 2 bad command line, 4 input rejected\n"
      "(empty prompt, sampling value out of range), 1 database failure.\n");
  cmd->callback([a, &exit_code] {
    run_command("submit", exit_code, [&] {
      if (a->prompt.empty() && a->prompt_file.empty()) {
        throw CommandError{kUsage, "give the prompt as an argument, with --prompt-file FILE, or - for stdin"};
      }
      a->spec.prompt = read_prompt(a->prompt, a->prompt_file);
      auto queue = jobs::open_sqlite_queue(database_path(a->db));
      const jobs::SubmitOutcome out = queue->submit(a->spec);
      if (a->json) {
        std::cout << daemon::json_text({{"id", out.id}, {"created", out.created}}) << "\n";
      } else {
        std::cout << out.id << "\n";
        if (!out.created) {
          std::fprintf(stderr, "nightshift submit: key '%s' already names job %lld; nothing new was queued\n",
                       a->spec.idempotency_key.c_str(), static_cast<long long>(out.id));
        }
      }
    });
  });
}

// ---- list -------------------------------------------------------------------

void add_list(CLI::App& app, int& exit_code) {
  struct Args {
    DatabaseArgs db;
    std::string state;
    int32_t limit = 50;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  std::vector<std::string> states;
  for (jobs::JobState s : jobs::kAllJobStates) states.emplace_back(jobs::state_name(s));
  CLI::App* cmd = app.add_subcommand("list", "List jobs, newest first");
  cmd->add_option("--state", a->state, "only jobs in this state")->check(CLI::IsMember(states));
  cmd->add_option("--limit", a->limit, "at most N jobs; 0 = all")->capture_default_str();
  cmd->add_flag("--json", a->json, "print a JSON array of job objects (the fields of `show --json`)");
  add_database_options(cmd, a->db);
  cmd->footer(
      "Examples:\n"
      "  nightshift list\n"
      "  nightshift list --state failed --limit 10\n"
      "  nightshift list --state done --json | jq -r '.[].result.text'\n");
  cmd->callback([a, &exit_code] {
    run_command("list", exit_code, [&] {
      auto queue = open_existing(a->db);
      jobs::ListFilter filter;
      filter.state = a->state.empty() ? std::nullopt : jobs::parse_state(a->state);
      filter.limit = a->limit;
      const std::vector<jobs::Job> jobs = queue->list(filter);
      if (a->json) {
        nlohmann::json arr = nlohmann::json::array();
        for (const jobs::Job& j : jobs) arr.push_back(daemon::job_to_json(j));
        std::cout << daemon::json_text(arr, 2) << "\n";
        return;
      }
      std::cout << daemon::format_job_table(jobs);
      const jobs::QueueCounts c = queue->counts();
      std::cout << "queued " << c.queued << ", running " << c.running << ", done " << c.done << ", failed "
                << c.failed << ", cancelled " << c.cancelled << "\n";
    });
  });
}

// ---- show -------------------------------------------------------------------

void add_show(CLI::App& app, int& exit_code) {
  struct Args {
    DatabaseArgs db;
    int64_t id = 0;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("show", "Show one job: every field, the result and its stats");
  cmd->add_option("id", a->id, "job id")->required();
  cmd->add_flag("--json", a->json, "print the job as a JSON object");
  add_database_options(cmd, a->db);
  cmd->footer(
      "Examples:\n"
      "  nightshift show 42\n"
      "  nightshift show 42 --json | jq .result.decode_tok_s\n"
      "Exit status: 0 shown, 3 no such job, 1 database failure.\n");
  cmd->callback([a, &exit_code] {
    run_command("show", exit_code, [&] {
      auto queue = open_existing(a->db);
      std::optional<jobs::Job> job = queue->get(a->id);
      if (!job) throw CommandError{kNotFound, "no job " + std::to_string(a->id) + " in this database"};
      if (a->json) {
        std::cout << daemon::json_text(daemon::job_to_json(*job), 2) << "\n";
      } else {
        std::cout << daemon::format_job_details(*job);
      }
    });
  });
}

// ---- cancel -----------------------------------------------------------------

void add_cancel(CLI::App& app, int& exit_code) {
  struct Args {
    DatabaseArgs db;
    int64_t id = 0;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "cancel", "Cancel a job: a queued job at once, a running one when the daemon next checks (within ~1 s)");
  cmd->add_option("id", a->id, "job id")->required();
  add_database_options(cmd, a->db);
  cmd->footer(
      "Example:\n"
      "  nightshift cancel 42\n"
      "Exit status: 0 cancelled or cancel requested, 3 no such job, 1 the job had already finished.\n");
  cmd->callback([a, &exit_code] {
    run_command("cancel", exit_code, [&] {
      auto queue = open_existing(a->db);
      const bool accepted = queue->cancel(a->id);
      std::optional<jobs::Job> job = queue->get(a->id);
      if (!job) throw CommandError{kNotFound, "no job " + std::to_string(a->id) + " in this database"};
      if (!accepted) {
        throw CommandError{kFailure, "job " + std::to_string(a->id) + " is already " +
                                         jobs::state_name(job->state) + "; nothing to cancel"};
      }
      if (job->state == jobs::JobState::running) {
        std::cout << "job " << a->id << " is running; cancel requested (the daemon stops it at its next check)\n";
      } else {
        std::cout << "job " << a->id << " " << jobs::state_name(job->state) << "\n";
      }
    });
  });
}

}  // namespace

void add_queue_commands(CLI::App& app, int& exit_code) {
  add_submit(app, exit_code);
  add_list(app, exit_code);
  add_show(app, exit_code);
  add_cancel(app, exit_code);
}

}  // namespace ns::cli
