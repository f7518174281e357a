// nightshiftd: works through the job queue, one job at a time.
//
//   nightshiftd --config FILE [--db PATH] [--log-level L] [--drain]
//
// Exit status: 0 after SIGINT/SIGTERM (the running job goes back to the
// queue) or, with --drain, once nothing is queued; 1 when the database fails;
// 2 for a bad command line or config.
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>

#include "daemon/lib/config.h"
#include "daemon/lib/database_path.h"
#include "daemon/lib/logging.h"
#include "daemon/lib/worker.h"
#include "engine/util/error.h"
#include "jobs/queue.h"

namespace {

std::atomic<bool> g_stop{false};
std::atomic<int> g_signal{0};
static_assert(std::atomic<bool>::is_always_lock_free, "the signal handler needs a lock-free flag");

extern "C" void on_stop_signal(int sig) {
  g_signal.store(sig);
  g_stop.store(true);
}

// SA_RESETHAND: the first SIGINT/SIGTERM stops gracefully, a second one kills
// at once (e.g. during a long model load that cannot be interrupted).
void install_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

void log_startup(const ns::daemon::Config& config, const ns::daemon::WorkerOptions& opts, const std::string& db,
                 bool drain) {
  spdlog::info("nightshiftd starting: worker {}, database {}, config {}, {} model(s), threads {}, context {}{}",
               opts.worker_id, db, config.source, config.models.size(), config.threads, config.context,
               drain ? ", drain mode" : "");
  if (config.models.empty()) spdlog::warn("no models configured: every job will fail; add models: to {}", config.source);
  for (const auto& [name, path] : config.models) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) {
      spdlog::warn("model {}: file {} not found; jobs naming it will fail", name, path);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"nightshiftd: runs the LLM generation jobs queued with `nightshift submit`, one at a time, "
               "and writes results and timing stats back to the SQLite database.",
               "nightshiftd"};
  std::string config_path, db_path, log_level;
  bool drain = false;
  app.add_option("--config", config_path, "YAML config (see examples/config.yaml)")->required()->check(CLI::ExistingFile);
  app.add_option("--db", db_path,
                 "SQLite queue file; overrides the config's database:, $NIGHTSHIFT_DB and ./nightshift.db");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, critical or off; overrides log_level:");
  app.add_flag("--drain", drain, "exit 0 as soon as no job is queued (for batch runs and timers)");
  app.footer(
      "Examples:\n"
      "  nightshiftd --config /etc/nightshift/config.yaml\n"
      "  nightshiftd --config config.yaml --db jobs.db --drain   # run what is queued, then exit\n"
      "SIGINT/SIGTERM: the running job stops at the next token and returns to the queue; exit 0.\n");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }

  ns::daemon::Config config;
  try {
    config = ns::daemon::load_config(config_path);
    ns::daemon::setup_logging(log_level.empty() ? config.log_level : log_level);
  } catch (const ns::Error& e) {
    std::fprintf(stderr, "nightshiftd: %s\n", e.what());
    return 2;
  }

  install_signal_handlers();
  const std::string db = ns::daemon::resolve_database_path(db_path, &config);
  try {
    auto queue = ns::jobs::open_sqlite_queue(db);
    ns::daemon::WorkerOptions opts = ns::daemon::worker_options_from(config);
    log_startup(config, opts, db, drain);
    if (const int64_t n = queue->requeue_abandoned(opts.worker_id); n > 0) {
      spdlog::warn("requeued {} job(s) left running by an earlier nightshiftd with worker id {}", n, opts.worker_id);
    }
    ns::daemon::Worker worker(*queue, opts, g_stop);
    const int claimed = worker.run(drain);
    if (g_stop.load()) {
      spdlog::info("nightshiftd stopping on {} after {} job(s)", g_signal.load() == SIGINT ? "SIGINT" : "SIGTERM",
                   claimed);
    } else {
      spdlog::info("nightshiftd: queue drained after {} job(s)", claimed);
    }
    return 0;
  } catch (const ns::Error& e) {
    spdlog::critical("nightshiftd: {}", e.what());
    return 1;
  }
}
