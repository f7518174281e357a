// nightshift run-batch: the command line of daemon/cli/run_batch.h, with its
// SIGINT/SIGTERM handling (stop at the next token, keep the database).
#include "daemon/cli/run_batch_command.h"

#include <signal.h>

#include <atomic>
#include <cstdio>
#include <memory>

#include "daemon/cli/command_support.h"
#include "daemon/cli/commands.h"
#include "daemon/cli/engine_flags.h"
#include "daemon/cli/run_batch.h"
#include "daemon/lib/config.h"

namespace ns::cli {
namespace {

std::atomic<bool> g_stop{false};
static_assert(std::atomic<bool>::is_always_lock_free, "the signal handler needs a lock-free flag");
extern "C" void on_stop(int) { g_stop.store(true); }

// The exit status of an interrupted run (128 + SIGINT, as shells report Ctrl-C).
constexpr int kInterrupted = 130;

}  // namespace

void add_run_batch_command(CLI::App& app, int& exit_code) {
  struct Args {
    RunBatchOptions options;
    EngineOverrides engine;
    bool quiet = false;
  };
  auto a = std::make_shared<Args>();
  RunBatchOptions* o = &a->options;
  a->engine.flags = daemon::Config{}.engine;  // --help shows the config's defaults
  CLI::App* cmd =
      app.add_subcommand("run-batch",
                         "Run an OpenAI Batch JSONL file through a model now, without a daemon, and write the output "
                         "file (resumable: Ctrl-C, then the same command again)");
  cmd->add_option("-i,--input", o->input, "the OpenAI Batch input file (- = stdin)")->required();
  cmd->add_option("-o,--output", o->output,
                  "the output file: one OpenAI Batch output line per finished request, in input order; failed and "
                  "rejected lines go to its sibling NAME.errors.jsonl")
      ->required();
  cmd->add_option("--model,-m", o->model,
                  "a GGUF file (or, with --config, a configured model name) that runs every line, whatever its "
                  "body.model says; without it the lines' body.model name models from --config");
  cmd->add_option("--config", o->config,
                  "a daemon config: its models: and engine settings (its database: is not used)");
  cmd->add_option("--db", o->db, "the run's SQLite queue (default: NAME.run-batch.db beside the output)");
  // Rows of the option table (engine_flags.h); each given flag overrides the config's key of that name.
  a->engine.add(cmd, "threads", "-t");
  a->engine.add(cmd, "max_batch");
  a->engine.add(cmd, "memory_budget");
  cmd->add_flag("--keep-db", o->keep_db, "keep the run's database after it completes (to browse jobs and stats)");
  cmd->add_flag("--no-progress", a->quiet, "no progress on stderr");
  cmd->footer(
      "Examples:\n"
      "  nightshift run-batch -i requests.jsonl -o results.jsonl --model model.gguf\n"
      "  nightshift run-batch -i requests.jsonl -o results.jsonl --config config.yaml --model kimi-k2\n"
      "The lines run as `nightshift submit --jsonl` + nightshiftd would run them (docs/batch-jsonl.md), from a\n"
      "queue in NAME.run-batch.db beside the output. Ctrl-C (or SIGTERM) stops at the next token and keeps that\n"
      "database: the same command again resumes (finished lines are not computed again) and writes the same\n"
      "output. The database is removed once the output is written, unless --keep-db.\n"
      "--threads, --max-batch and --memory-budget override the --config's keys of those names.\n"
      "Exit status: 0 every line succeeded, 4 some lines were rejected or failed (see NAME.errors.jsonl; the\n"
      "others are in the output), 130 interrupted, 2 bad command line, 1 failure.\n");
  cmd->callback([a, o, &exit_code] {
    run_command("run-batch", exit_code, [&] {
      o->progress = !a->quiet;
      o->engine = a->engine.flags;
      o->engine_given = a->engine.given();
      struct sigaction sa {};
      sa.sa_handler = on_stop;
      sigemptyset(&sa.sa_mask);
      sa.sa_flags = SA_RESETHAND;  // a second Ctrl-C kills at once (e.g. during a model load)
      ::sigaction(SIGINT, &sa, nullptr);
      ::sigaction(SIGTERM, &sa, nullptr);
      const RunBatchReport r = run_batch(*o, g_stop, stderr);
      if (r.interrupted) {
        std::fprintf(stderr,
                     "run-batch: interrupted with %lld of %lld lines finished; they are kept in %s: run the same "
                     "command again to resume\n",
                     static_cast<long long>(r.finished), static_cast<long long>(r.valid), r.db.c_str());
        exit_code = kInterrupted;
        return;
      }
      std::fprintf(stderr, "run-batch: %lld lines: %lld written to %s", static_cast<long long>(r.lines),
                   static_cast<long long>(r.written), o->output.c_str());
      if (r.errors > 0)
        std::fprintf(stderr, ", %lld errors in %s", static_cast<long long>(r.errors), r.errors_path.c_str());
      if (r.resumed_done > 0)
        std::fprintf(stderr, " (%lld finished by an earlier run)", static_cast<long long>(r.resumed_done));
      std::fprintf(stderr, "\n");
      if (r.errors > 0) exit_code = kInvalidInput;
    });
  });
}

}  // namespace ns::cli
