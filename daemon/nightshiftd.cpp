// nightshiftd: works through the job queue (SQLite or PostgreSQL), up to
// max_batch jobs of one model decoding together (daemon/lib/worker.h).
//
//   nightshiftd --config FILE [--db PATH] [--log-level L] [--drain]
//
// Start-up: open the database (integrity check, migrations), take back jobs
// left running by an earlier process with this worker id and jobs whose lease
// expired, tell systemd READY=1, then run jobs. A heartbeat thread renews the
// running job's lease and reports STATUS= / WATCHDOG=1.
//
// Signals: SIGINT/SIGTERM stop at the next token, checkpoint, release the job
// and exit 0 (after drain_timeout_ms at the latest); a second one kills at
// once. SIGHUP reloads the config (docs/operations.md lists what applies at
// run time; the rest is reported as needing a restart); a config that does
// not parse, or names no models, is rejected with an error line and the
// running one stays in effect.
//
// Exit status: 0 after SIGINT/SIGTERM or, with --drain, once nothing is left
// to run; 1 when the database is unusable; 2 for a bad command line or config;
// 3 when --drain left jobs held (models this daemon cannot serve).
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <unistd.h>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include "daemon/http/server.h"
#include "daemon/lib/bash_completion.h"
#include "daemon/lib/config.h"
#include "daemon/lib/database_path.h"
#include "daemon/lib/database_watch.h"
#include "daemon/lib/heartbeat.h"
#include "daemon/lib/logging.h"
#include "daemon/lib/run_status.h"
#include "daemon/lib/service_notify.h"
#include "daemon/lib/worker.h"
#include "daemon/lib/worker_identity.h"
#include "common/error.h"
#include "common/redact.h"
#include "engine/engine.h"
#include "jobs/queue.h"
#include "jobs/open_queue.h"
#include "jobs/pg_conn.h"
#include "jobs/time_format.h"

namespace {

using ns::daemon::Config;

std::atomic<bool> g_stop{false};
std::atomic<bool> g_reload{false};
std::atomic<int> g_signal{0};
std::atomic<bool> g_database_lost{false};  // the SQLite file was deleted or replaced (#30 J)
static_assert(std::atomic<bool>::is_always_lock_free, "the signal handler needs a lock-free flag");

extern "C" void on_stop_signal(int sig) {
  g_signal.store(sig);
  g_stop.store(true);
}

extern "C" void on_reload_signal(int) { g_reload.store(true); }

// SA_RESETHAND: the first SIGINT/SIGTERM stops gracefully, a second one kills
// at once (e.g. during a long model load that cannot be interrupted).
void install_signal_handlers() {
  struct sigaction stop {};
  stop.sa_handler = on_stop_signal;
  sigemptyset(&stop.sa_mask);
  stop.sa_flags = SA_RESETHAND;
  sigaction(SIGINT, &stop, nullptr);
  sigaction(SIGTERM, &stop, nullptr);
  struct sigaction reload {};
  reload.sa_handler = on_reload_signal;
  sigemptyset(&reload.sa_mask);
  reload.sa_flags = SA_RESTART;
  sigaction(SIGHUP, &reload, nullptr);
}

const char* signal_name() {
  if (g_database_lost.load()) return "the database file's loss";
  return g_signal.load() == SIGINT ? "SIGINT" : "SIGTERM";
}

std::string host_name() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "unknown");
  return host;
}

// This daemon's row in the workers table (`nightshift status` shows the fleet).
ns::jobs::WorkerInfo this_worker(const std::string& worker_id) {
  ns::jobs::WorkerInfo me;
  me.id = worker_id;
  me.host = host_name();
  me.pid = getpid();
  me.version = NS_VERSION;
  return me;
}

// "job 42" or "jobs 42, 43, 44".
std::string running_ids(const ns::daemon::RunStatus::Snapshot& s) {
  std::string ids;
  for (const auto& j : s.jobs) ids += (ids.empty() ? "" : ", ") + std::to_string(j.lease.job_id);
  return (s.jobs.size() == 1 ? "job " : "jobs ") + ids;
}

void log_startup(const Config& config, const ns::daemon::WorkerOptions& opts, const std::string& db, bool drain) {
  spdlog::info(
      "nightshiftd starting: worker {}, database {}, config {}, {} model(s), threads {}, context {}, "
      "lease {} ms, checkpoint every {} tokens / {} ms, kernels {} (cpu_features {}; CPU has {}){}",
      opts.worker_id, ns::redact_secrets(db), config.source, config.models.size(), config.engine.threads,
      config.engine.context, config.lease_ms, config.checkpoint_tokens, config.checkpoint_interval_ms,
      ns::cpu_features_in_use(), config.cpu_features, ns::cpu_features_available(), drain ? ", drain mode" : "");
  if (config.models.empty())
    spdlog::warn("no models configured: every job will fail; add models: to {}", config.source);
  // An explicit budget above the cgroup's limit ends in OOM kills mid-batch (#30 G): said once, at start.
  if (const std::string w = ns::memory_budget_warning(config.engine.memory_budget); !w.empty()) spdlog::warn("{}", w);
  for (const auto& [name, path] : config.models) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) {
      // Such jobs are held (left queued, the reason on them): none is failed or dead.
      spdlog::warn(
          "model {}: file {} not found; jobs naming it are held (left queued) until it is there: fix the "
          "path or mount its disk, then reload",
          name, path);
    }
  }
}

void log_recovery(const std::string& what, const ns::jobs::Recovery& r) {
  if (r.total() == 0) return;
  spdlog::warn("{}: {} job(s) taken back: {} requeued (they resume from their checkpoints), {} dead, {} cancelled",
               what, r.total(), r.requeued, r.dead, r.cancelled);
}

// SIGHUP and SIGTERM as seen from the heartbeat thread's tick: a new config
// is parsed there and handed to the worker, which applies it between jobs;
// the drain deadline is enforced there because the worker thread may be
// inside a long token.
class Supervisor {
 public:
  Supervisor(std::string config_path, Config config, std::string log_level_override,
             const ns::daemon::ServiceNotifier& notifier, ns::daemon::RunStatus& status)
      : config_path_(std::move(config_path)),
        running_(std::move(config)),
        log_level_override_(std::move(log_level_override)),
        notifier_(notifier),
        status_(status) {}

  void attach(ns::daemon::Heartbeat* heartbeat) { heartbeat_.store(heartbeat); }
  void watch(const ns::daemon::DatabaseFileWatch* database) { database_ = database; }

  // Heartbeat thread.
  void tick() {
    if (g_reload.exchange(false)) reload();
    check_database();
    if (g_stop.load()) enforce_drain_deadline();
  }

  // Worker thread, between jobs.
  void apply_pending(ns::daemon::Worker& worker) {
    std::optional<Config> fresh;
    {
      std::lock_guard lock(mu_);
      fresh.swap(pending_);
    }
    if (fresh) worker.update_options(ns::daemon::worker_options_from(*fresh));
  }

 private:
  void reload() {
    notifier_.reloading();
    try {
      Config fresh = ns::daemon::load_config(config_path_);
      // A file caught half-written (an editor, a config manager) parses
      // with no models; taking it would leave every job unservable.
      if (fresh.models.empty()) {
        throw ns::Error(ns::ErrorKind::invalid_input,
                        config_path_ +
                            ": models: is empty or missing (a half-written file?); a daemon with no "
                            "models can serve nothing");
      }
      std::string applied, restart;
      Config running;
      {
        std::lock_guard lock(mu_);
        running = running_;
      }
      for (const std::string& key : ns::daemon::changed_keys(running, fresh)) {
        std::string& list = ns::daemon::is_reloadable(key) ? applied : restart;
        list += (list.empty() ? "" : ", ") + key;
      }
      // Logged before the new log level applies, so a quieter level still shows the reload.
      spdlog::info("config {} reloaded: {}{}", config_path_, applied.empty() ? "nothing changed" : "changed " + applied,
                   applied.empty() ? "" : " (applies from the next job)");
      if (!restart.empty())
        spdlog::warn("config {}: {} changed but only take effect after a restart", config_path_, restart);
      if (const std::string w = ns::memory_budget_warning(fresh.engine.memory_budget); !w.empty())
        spdlog::warn("{}", w);
      if (log_level_override_.empty()) spdlog::set_level(ns::daemon::parse_log_level(fresh.log_level));
      if (ns::daemon::Heartbeat* hb = heartbeat_.load()) hb->set_timing(fresh.lease_ms, fresh.stall_timeout_ms);
      {
        std::lock_guard lock(mu_);
        running_ = fresh;
        pending_ = fresh;
      }
    } catch (const ns::Error& e) {
      spdlog::error("config reload failed, the running config stays in effect: {}", e.what());
    }
    notifier_.ready(ns::daemon::status_line(status_.snapshot(), nullptr));
  }

  // Once a second: a daemon writing to a deleted or swapped-out file loses
  // every result silently, so it stops (exit 1) and its restart opens the file now there.
  void check_database() {
    const auto now = std::chrono::steady_clock::now();
    if (!database_ || g_database_lost.load() || now - database_checked_ < std::chrono::seconds(1)) return;
    database_checked_ = now;
    const std::string what = database_->changed();
    if (what.empty()) return;
    const ns::daemon::RunStatus::Snapshot s = status_.snapshot();
    spdlog::critical(
        "the database file was {} while this daemon had it open: no more jobs are claimed{}; exiting "
        "(status 1) so that a restart opens the file now at that path. Results written since went to "
        "the old file; restore it, or run those jobs again",
        what, s.jobs.empty() ? "" : ", " + running_ids(s) + " stop(s) at the next token");
    g_database_lost.store(true);
    g_stop.store(true);
    const std::string moved = database_->set_aside_companions();
    if (!moved.empty()) {
      spdlog::warn(
          "the old file's write-ahead log and index were beside the new path, where the next program to "
          "open it would apply them to the new file; moved to {}",
          moved);
    }
  }

  void enforce_drain_deadline() {
    const auto now = std::chrono::steady_clock::now();
    if (!stop_seen_) {
      stop_seen_ = now;
      const ns::daemon::RunStatus::Snapshot s = status_.snapshot();
      if (!g_database_lost.load()) {  // check_database() said it
        spdlog::info("{} received: {}", signal_name(),
                     s.jobs.empty() ? std::string("no job is running")
                                    : running_ids(s) +
                                          " stop(s) at the next token, are checkpointed and go back to "
                                          "the queue");
      }
      notifier_.stopping("draining after " + std::string(signal_name()));
      return;
    }
    int drain_timeout_ms = 0;
    {
      std::lock_guard lock(mu_);
      drain_timeout_ms = running_.drain_timeout_ms;
    }
    if (now - *stop_seen_ < std::chrono::milliseconds(drain_timeout_ms)) return;
    const ns::daemon::RunStatus::Snapshot s = status_.snapshot();
    spdlog::error("the drain did not finish within drain_timeout_ms ({} ms); exiting now. {}", drain_timeout_ms,
                  s.jobs.empty() ? std::string("No job was running")
                                 : "Job(s) " + running_ids(s) +
                                       " were not released: they resume from their last checkpoint once their "
                                       "lease expires");
    spdlog::default_logger()->flush();
    std::_Exit(0);  // like a crash as far as the database is concerned: every commit is atomic
  }

  const std::string config_path_;
  std::mutex mu_;
  Config running_;
  std::optional<Config> pending_;
  const std::string log_level_override_;
  const ns::daemon::ServiceNotifier& notifier_;
  ns::daemon::RunStatus& status_;
  std::atomic<ns::daemon::Heartbeat*> heartbeat_{nullptr};          // set once the heartbeat runs
  std::optional<std::chrono::steady_clock::time_point> stop_seen_;  // heartbeat thread only
  const ns::daemon::DatabaseFileWatch* database_ = nullptr;
  std::chrono::steady_clock::time_point database_checked_{};  // heartbeat thread only
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "nightshiftd: runs the LLM generation jobs queued with `nightshift submit`, up to "
      "max_batch of one model together, and writes results and timing stats back to the queue's "
      "database (SQLite, or PostgreSQL for a fleet).",
      "nightshiftd"};
  std::string config_path, db_path, log_level;
  bool drain = false;
  app.set_version_flag("--version", std::string("nightshiftd ") + NS_VERSION);
  app.add_option("--config", config_path, "YAML config (see examples/config.yaml)")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--db", db_path,
                 "the queue (a SQLite file or a postgresql:// URL); overrides the config's database:, "
                 "$NIGHTSHIFT_DB and ./nightshift.db");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, critical or off; overrides log_level:");
  app.add_flag("--drain", drain,
               "exit 0 once nothing is claimable, no job waits for a retry and none runs anywhere (a killed "
               "daemon's jobs are taken over when their leases expire) (for batch runs and timers)");
  app.add_flag_callback(
      "--bash-completion",
      [&app] {
    std::fputs(ns::daemon::bash_completion(app, "nightshiftd").c_str(), stdout);
    throw CLI::Success();
      },
      "print the bash completion script for these options and exit");
  app.footer(
      "Examples:\n"
      "  nightshiftd --config /etc/nightshift/config.yaml\n"
      "  nightshiftd --config config.yaml --db jobs.db --drain   # run what is queued, then exit\n"
      "Signals: SIGINT/SIGTERM stop the running job at its next token, checkpoint it and return it to the\n"
      "queue, then exit 0 (within drain_timeout_ms). SIGHUP reloads the config.\n"
      "HTTP (http.listen in the config): OpenAI's Files and Batches API under /v1/, the status page at /,\n"
      "Prometheus metrics at /metrics; bearer keys from http.keys_file (docs/operations.md).\n"
      "Exit status: 0 stopped or drained, 1 database unusable, 2 bad command line or config, 3 drained but jobs\n"
      "this daemon cannot serve (a model name or file its config gets wrong, a model that does not fit) were left\n"
      "queued (the log names them; nightshift status shows them).\n");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }

  Config config;
  try {
    config = ns::daemon::load_config(config_path);
    ns::daemon::setup_logging(log_level.empty() ? config.log_level : log_level);
  } catch (const ns::Error& e) {
    std::fprintf(stderr, "nightshiftd: %s\n", e.what());
    return 2;
  }

  install_signal_handlers();
  const ns::daemon::ServiceNotifier notifier;
  const std::string db = ns::daemon::resolve_database_path(db_path, &config);
  const ns::jobs::SqliteOptions db_options = ns::daemon::sqlite_options_from(&config);
  const ns::jobs::PgOptions pg_options = ns::daemon::pg_options_from(&config);
  try {
    ns::daemon::WorkerOptions opts = ns::daemon::worker_options_from(config);
    log_startup(config, opts, db, drain);
    // A database locked by another writer or on a full disk at start-up is
    // waited out (with backoff) rather than treated as fatal.
    std::unique_ptr<ns::jobs::Queue> queue;
    for (int32_t failures = 1; !g_stop.load(); ++failures) {
      try {
        if (!queue) queue = ns::jobs::open_queue(db, db_options, pg_options);
        // Before taking its worker id's jobs back: is another live daemon using that id? Checked and
        // registered in one transaction, so two daemons started together cannot both pass.
        const ns::daemon::Self self{opts.worker_id, host_name(), config.source, getpid()};
        const std::string conflict = queue->register_worker(this_worker(opts.worker_id), [&](const auto& rows) {
          return ns::daemon::worker_id_conflict(rows, self, ns::jobs::now_epoch_ms(), config.lease_ms,
                                                ns::daemon::pid_runs_nightshiftd);
        });
        if (!conflict.empty()) {
          spdlog::critical("nightshiftd: {}", conflict);
          notifier.stopping("refused: " + conflict);
          return 2;
        }
        log_recovery("jobs left running by an earlier nightshiftd with worker id " + opts.worker_id,
                     queue->recover_worker(opts.worker_id, opts.retry_backoff));
        log_recovery("jobs whose lease expired", queue->recover_expired(opts.retry_backoff));
        break;
      } catch (const ns::jobs::DatabaseError& e) {
        if (!e.transient()) throw;
        const int64_t delay = ns::jobs::backoff_delay_ms(opts.database_backoff, failures);
        spdlog::warn("cannot start on the database yet: {}; trying again in {} ms", e.what(), delay);
        notifier.status(std::string("waiting for the database: ") + e.what());
        for (int64_t waited = 0; waited < delay && !g_stop.load(); waited += 50) {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
      }
    }
    if (!queue || g_stop.load()) {
      spdlog::info("nightshiftd stopping on {} before it started", signal_name());
      return 0;
    }

    const ns::daemon::DatabaseFileWatch database_watch(db);
    // The HTTP API (http.listen), up before READY=1. Its configuration's
    // mistakes stop the daemon here, before a job is claimed: they stay queued.
    ns::jobs::SqliteOptions http_db = db_options;
    http_db.integrity_check = ns::jobs::IntegrityCheck::off;  // checked once above
    std::unique_ptr<ns::http::HttpService> http;
    if (!config.http.listen.empty()) {
      try {
        http = std::make_unique<ns::http::HttpService>(config, db, http_db);
      } catch (const ns::Error& e) {
        spdlog::critical("nightshiftd: {}; no job was claimed", e.what());
        notifier.stopping(std::string("refused: ") + e.what());
        try {
          queue->worker_stopped(opts.worker_id);
        } catch (const ns::jobs::DatabaseError&) {
        }
        return 2;
      }
    }

    ns::daemon::RunStatus status;
    Supervisor supervisor(config_path, config, log_level, notifier, status);
    supervisor.watch(&database_watch);
    // READY=1 before the heartbeat starts, so it is the first message systemd gets.
    std::optional<ns::jobs::QueueCounts> counts;
    try {
      counts = queue->counts();
    } catch (const ns::jobs::DatabaseError& e) {
      if (!e.transient()) throw;  // a locked database only costs the numbers in the first STATUS=
    }
    notifier.ready(ns::daemon::status_line(status.snapshot(), counts ? &*counts : nullptr));
    spdlog::info("ready: {} queued, {} running elsewhere", counts ? counts->queued : -1, counts ? counts->running : -1);
    ns::jobs::SqliteOptions heartbeat_db = db_options;
    heartbeat_db.integrity_check = ns::jobs::IntegrityCheck::off;  // checked once above
    ns::daemon::Heartbeat heartbeat([&] { return ns::jobs::open_queue(db, heartbeat_db, pg_options); }, status,
                                    notifier,
                                    {.lease_ms = config.lease_ms,
                                     .stall_timeout_ms = config.stall_timeout_ms,
                                     .status_interval_ms = 5000,
                                     .progress_interval_ms = 5000,
                                     .tick_ms = 50,
                                     .worker_id = opts.worker_id},
                                    [&] { supervisor.tick(); });
    supervisor.attach(&heartbeat);

    ns::daemon::Worker worker(*queue, opts, g_stop, &status);
    worker.set_between_jobs([&] { supervisor.apply_pending(worker); });

    const int claimed = worker.run(drain);
    if (g_stop.load()) {
      spdlog::info("nightshiftd stopping on {} after {} job(s)", signal_name(), claimed);
    } else {
      spdlog::info("nightshiftd: queue drained after {} job(s)", claimed);
    }
    // A night that left jobs held must not look like a success to the unit that ran it.
    const int rc = g_database_lost.load() ? 1 : drain && !g_stop.load() && worker.left_held() ? 3 : 0;
    if (http) http->stop();
    notifier.stopping("stopped after " + std::to_string(claimed) + " job(s)");
    // The heartbeat refreshes the workers row (clearing stopped_ms): it must
    // be gone before the row is marked stopped, or a last tick undoes it.
    heartbeat.stop();
    try {
      queue->worker_stopped(opts.worker_id);
    } catch (const ns::jobs::DatabaseError& e) {
      spdlog::warn("cannot mark this worker stopped in the workers table: {}", e.what());
    }
    return rc;
  } catch (const ns::Error& e) {
    spdlog::critical("nightshiftd: {}", e.what());
    notifier.stopping(std::string("failed: ") + e.what());
    return 1;
  } catch (const std::exception& e) {  // never std::terminate: the log says what happened
    spdlog::critical("nightshiftd: internal error: {}", e.what());
    notifier.stopping(std::string("failed: internal error: ") + e.what());
    return 1;
  }
}
