#include "daemon/cli/run_batch.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/human_size.h"
#include "daemon/cli/batch_export.h"
#include "daemon/cli/command_support.h"
#include "daemon/cli/jsonl_submit.h"
#include "daemon/cli/model_check.h"
#include "daemon/cli/output_file.h"
#include "daemon/lib/progress_format.h"
#include "daemon/lib/config.h"
#include "daemon/lib/database_path.h"
#include "daemon/lib/heartbeat.h"
#include "daemon/lib/run_status.h"
#include "daemon/lib/service_notify.h"
#include "daemon/lib/worker.h"
#include "jobs/open_queue.h"

namespace ns::cli {
// The progress pieces (daemon/lib/progress_format.h).
using daemon::ago;
using daemon::eta_seconds;
using daemon::format_duration;
using daemon::format_rate;
using daemon::progress_bar;
namespace fs = std::filesystem;

std::string errors_path_for(const std::string& output) {
  const fs::path out(output);
  const std::string ext = out.has_extension() ? out.extension().string() : ".jsonl";
  return (out.parent_path() / (out.stem().string() + ".errors" + ext)).string();
}

std::string database_path_for(const std::string& output) {
  const fs::path out(output);
  return (out.parent_path() / (out.stem().string() + ".run-batch.db")).string();
}

namespace {

// The worker id of every run on a database: a run takes back what an earlier,
// killed run left running (Queue::recover_worker); the flock keeps it to one run.
constexpr const char* kWorkerId = "run-batch";

bool is_finished(jobs::JobState s) {
  return s == jobs::JobState::done || s == jobs::JobState::failed || s == jobs::JobState::dead ||
         s == jobs::JobState::cancelled;
}

// The config the run uses: --config's (or the defaults), the model, the overrides.
// Returns the model name the lines run on ("" = each line's body.model).
std::string prepare_config(const RunBatchOptions& o, daemon::Config& config) {
  config = o.config.empty() ? daemon::default_config() : daemon::load_config(o.config);
  config.worker_id = kWorkerId;
  for (const std::string& name : o.engine_given) copy_engine_option(config.engine, o.engine, name);
  if (o.model.empty()) {
    if (o.config.empty()) {
      throw Error(ErrorKind::invalid_input,
                  "no model: give --model PATH.gguf (or --config FILE, whose models: the lines' body.model name)");
    }
    return "";
  }
  if (config.models.count(o.model)) return o.model;
  std::error_code ec;
  if (!fs::is_regular_file(o.model, ec)) {
    std::string names;
    for (const auto& [name, path] : config.models) names += (names.empty() ? "" : ", ") + name;
    throw Error(ErrorKind::invalid_input,
                "--model " + o.model + ": no such GGUF file" +
                    (o.config.empty() ? std::string()
                                      : " and no model of that name in " + o.config + "'s models: (" +
                                            (names.empty() ? std::string("none") : names) + ")") +
                    "; give a model file's path or a configured name");
  }
  const std::string path = fs::absolute(o.model).lexically_normal().string();
  std::string name = fs::path(o.model).stem().string();
  // A configured model of that name with another file keeps its name; this one gets the path.
  if (auto it = config.models.find(name); it != config.models.end() && it->second != path) name = path;
  config.models[name] = path;
  return name;
}

// Holds the database for this run: a second run on it is refused while the first lives.
class RunLock {
 public:
  explicit RunLock(const std::string& db) {
    fd_ = ::open(db.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd_ < 0) throw Error(ErrorKind::io, "cannot open the run's database " + db + ": " + std::strerror(errno));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      ::close(fd_);
      if (err == EWOULDBLOCK) {
        throw Error(ErrorKind::invalid_input, "another nightshift run-batch is working on " + db +
                                                  " (the same -o); wait for it, or give another -o or --db");
      }
      throw Error(ErrorKind::io, "cannot lock " + db + ": " + std::strerror(err));
    }
  }
  ~RunLock() { ::close(fd_); }
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  int fd_ = -1;
};

// The progress line: "[#####-----] 57/200 lines, 2 failed, 8 running, 92.31 tok/s, ETA 1m20s". On a terminal
// redrawn in place ~10 times a second; otherwise one line each time another tenth of the lines has ended.
class BatchProgress {
 public:
  BatchProgress(FILE* out, bool enabled, int64_t total, int64_t finished_before)
      : out_(out),
        enabled_(enabled),
        tty_(enabled && ::isatty(::fileno(out)) == 1),
        total_(total),
        before_(finished_before) {}

  void update(int64_t finished, int64_t failed, const daemon::RunStatus::Snapshot& s) {
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    double tok_s = 0;
    for (const auto& j : s.jobs) tok_s += j.tok_s;
    const int64_t this_run = finished - before_;
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    std::string line =
        progress_bar(finished, total_, 24) + " " + std::to_string(finished) + "/" + std::to_string(total_) + " lines";
    if (failed > 0) line += ", " + std::to_string(failed) + " failed";
    line += ", " + std::to_string(s.jobs.size()) + " running";
    if (tok_s > 0) line += ", " + format_rate(tok_s) + " tok/s";
    if (this_run > 0 && elapsed > 0) {
      if (auto eta = eta_seconds(finished, total_, static_cast<double>(this_run) / elapsed)) {
        line += ", ETA " + format_duration(*eta);
      }
    } else if (s.jobs.empty() && !s.loaded_model.empty()) {
      line += ", starting";
    } else if (s.loaded_model.empty()) {
      line += ", loading the model";
    }
    if (tty_) {
      std::fprintf(out_, "\r\x1b[Krun-batch %s", line.c_str());
      std::fflush(out_);
      shown_ = true;
      return;
    }
    const int64_t tenth = total_ > 0 ? finished * 10 / total_ : 10;
    if (tenth > last_tenth_) {
      last_tenth_ = tenth;
      std::fprintf(out_, "run-batch %s\n", line.c_str());
      std::fflush(out_);
    }
  }

  void finish() {
    if (tty_ && shown_) {
      std::fprintf(out_, "\r\x1b[K");
      std::fflush(out_);
    }
  }

 private:
  FILE* out_;
  bool enabled_, tty_;
  int64_t total_, before_;
  int64_t last_tenth_ = -1;
  bool shown_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// A rejected input line as an OpenAI error line.
std::string rejected_line(const BatchLineError& e) {
  nlohmann::ordered_json line;
  line["id"] = "batch_req_line_" + std::to_string(e.line);
  line["custom_id"] = e.custom_id.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(e.custom_id);
  line["response"] = nullptr;
  line["error"] = {{"code", "invalid_request"}, {"message", "line " + std::to_string(e.line) + ": " + e.message}};
  return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void write_whole(const std::string& path, const std::string& text) {
  const fs::path target(path);
  const OutputFolder folder(target.has_parent_path() ? target.parent_path() : fs::path("."));
  write_output_file(folder, target.filename().string(), text);
}

void remove_database(const std::string& db) {
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
    std::error_code ec;
    fs::remove(db + suffix, ec);
  }
}

}  // namespace

RunBatchReport run_batch(const RunBatchOptions& o, const std::atomic<bool>& stop, FILE* err) {
  if (o.output.empty() || o.output == "-") {
    throw Error(ErrorKind::invalid_input, "-o needs a file (its errors file and database go beside it)");
  }
  {
    const fs::path folder = fs::path(o.output).has_parent_path() ? fs::path(o.output).parent_path() : fs::path(".");
    std::error_code ec;
    if (!fs::is_directory(folder, ec)) {
      throw Error(ErrorKind::invalid_input, "-o " + o.output + ": the folder " + folder.string() +
                                                " does not exist; create it (mkdir -p) or give another -o");
    }
  }
  daemon::Config config;
  const std::string model = prepare_config(o, config);
  RunBatchReport report;
  report.db = o.db.empty() ? database_path_for(o.output) : o.db;
  report.errors_path = errors_path_for(o.output);
  report.batch = batch_name_from_path(o.input);
  const std::string text = read_file_or_stdin(o.input, "the input JSONL file");

  if (jobs::is_postgres_url(report.db)) {
    throw Error(ErrorKind::invalid_input, "--db " + report.db +
                                              ": run-batch keeps its queue in a SQLite file of its own; give a file "
                                              "path (to use a shared queue: nightshift submit --jsonl + nightshiftd)");
  }
  const RunLock lock(report.db);
  jobs::SqliteOptions db_options = daemon::sqlite_options_from(&config);
  auto queue = jobs::open_queue(report.db, db_options);
  {
    // The worker drains the whole database: a queue shared with other work (a daemon's) must not be run here.
    const jobs::QueueCounts all = queue->counts(), mine = queue->counts(report.batch);
    const int64_t others = all.queued + all.running - mine.queued - mine.running;
    if (others > 0) {
      throw Error(ErrorKind::invalid_input,
                  report.db + " holds " + std::to_string(others) + " unfinished jobs of other batches than '" +
                      report.batch +
                      "' (another input, or a daemon's queue): run-batch needs a database of its "
                      "own; give another -o or --db, or delete " +
                      report.db + " to start afresh");
    }
  }

  JsonlSubmitOptions submit;
  submit.batch = report.batch;
  if (o.input != "-") submit.source_path = fs::absolute(o.input).lexically_normal().string();
  submit.model = model;
  auto check = std::make_shared<ModelCheck>(config);
  submit.check = [check](const jobs::JobSpec& spec) { return check->problem(spec); };
  const JsonlSubmitReport submitted = submit_jsonl(*queue, text, submit);
  report.lines = submitted.lines;
  if (submitted.lines == 0) throw Error(ErrorKind::invalid_input, o.input + " has no request line");

  // The lines of this input; the batch's other jobs (lines an earlier input had) are not run.
  std::set<int64_t> ids;
  for (const JsonlSubmitted& s : submitted.submitted) ids.insert(s.id);
  auto batch_jobs = [&](jobs::Queue& q) {
    jobs::ListFilter filter;
    filter.batch = report.batch;
    filter.limit = 0;
    filter.order = jobs::ListFilter::Order::oldest_first;
    return q.list(filter);
  };
  const daemon::WorkerOptions worker_options = daemon::worker_options_from(config);
  queue->recover_worker(kWorkerId, worker_options.retry_backoff);  // a killed earlier run's lines
  // The batch's jobs this input no longer has (an earlier version of the file): cancelled, and left out of
  // the progress counts (`others`, all finished now).
  jobs::QueueCounts others;
  for (const jobs::Job& j : batch_jobs(*queue)) {
    if (ids.count(j.id)) {
      if (is_finished(j.state)) ++report.resumed_done;
      continue;
    }
    jobs::JobState state = j.state;
    if (!is_finished(state) && queue->cancel(j.id)) state = jobs::JobState::cancelled;
    if (state == jobs::JobState::done)
      ++others.done;
    else if (state == jobs::JobState::failed)
      ++others.failed;
    else if (state == jobs::JobState::dead)
      ++others.dead;
    else if (state == jobs::JobState::cancelled)
      ++others.cancelled;
  }
  const int64_t total = static_cast<int64_t>(ids.size());
  report.valid = total;
  if (o.progress) {
    std::fprintf(err, "run-batch: %lld lines, %lld valid (%lld already finished in %s), %lld rejected\n",
                 static_cast<long long>(submitted.lines), static_cast<long long>(total),
                 static_cast<long long>(report.resumed_done), report.db.c_str(),
                 static_cast<long long>(submitted.rejected.size()));
  }

  std::string held;  // why the worker left lines queued
  if (report.resumed_done < total) {
    daemon::RunStatus status;
    const daemon::ServiceNotifier notifier;
    jobs::SqliteOptions side_db = db_options;
    side_db.integrity_check = jobs::IntegrityCheck::off;
    {
      jobs::WorkerInfo me;
      me.id = kWorkerId;
      char host[256] = {};
      me.host = ::gethostname(host, sizeof host - 1) == 0 ? host : "localhost";
      me.pid = ::getpid();
      me.version = NS_VERSION;
      queue->register_worker(me);
    }
    daemon::Heartbeat heartbeat([&] { return jobs::open_queue(report.db, side_db); }, status, notifier,
                                {.lease_ms = config.lease_ms,
                                 .stall_timeout_ms = config.stall_timeout_ms,
                                 .status_interval_ms = 5000,
                                 .progress_interval_ms = 2000,
                                 .tick_ms = 50,
                                 .worker_id = kWorkerId});
    // The progress line: its own thread and queue (a Queue is used from one thread).
    std::atomic<bool> done{false};
    std::thread progress_thread([&] {
      BatchProgress bar(err, o.progress, total, report.resumed_done);
      std::unique_ptr<jobs::Queue> q;
      int64_t finished = report.resumed_done, failed = 0;
      auto last_read = std::chrono::steady_clock::time_point{};
      while (!done.load()) {
        const auto now = std::chrono::steady_clock::now();
        if (now - last_read >= std::chrono::milliseconds(500)) {
          last_read = now;
          try {
            if (!q) q = jobs::open_queue(report.db, side_db);
            const jobs::QueueCounts c = q->counts(report.batch);
            failed = c.failed + c.dead + c.cancelled - others.failed - others.dead - others.cancelled;
            finished = c.done - others.done + failed;
          } catch (const jobs::DatabaseError&) {
            // a locked moment: the line shows the last counts
          }
        }
        bar.update(finished, failed, status.snapshot());
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      bar.finish();
    });
    daemon::Worker worker(*queue, worker_options, stop, &status);
    try {
      worker.run(true);
    } catch (...) {
      done = true;
      progress_thread.join();
      throw;
    }
    done = true;
    progress_thread.join();
    heartbeat.stop();
    try {
      queue->worker_stopped(kWorkerId);
    } catch (const jobs::DatabaseError&) {
      // only the workers row's stopped mark is lost
    }
    report.interrupted = stop.load();
    if (worker.left_held()) held = worker.held_reason();
  }

  std::vector<jobs::Job> mine;
  for (jobs::Job& j : batch_jobs(*queue)) {
    if (ids.count(j.id)) mine.push_back(std::move(j));
  }
  std::sort(mine.begin(), mine.end(), [](const jobs::Job& a, const jobs::Job& b) {
    return std::pair(a.spec.source_line, a.id) < std::pair(b.spec.source_line, b.id);
  });
  report.finished = std::count_if(mine.begin(), mine.end(), [](const jobs::Job& j) { return is_finished(j.state); });
  if (report.interrupted) return report;
  if (report.finished < total) {
    throw Error(ErrorKind::invalid_input,
                std::to_string(total - report.finished) + " of " + std::to_string(total) +
                    " lines could not run and are still queued in " + report.db + ": " +
                    (held.empty() ? std::string("see the messages above") : held) +
                    "; fix --model / --config (or --memory-budget) and run the same command again to finish them");
  }

  // Output and errors, in input order.
  const ToolFormatOf tool_format = [check](const std::string& m) { return check->tool_format(m); };
  std::string out, errors;
  size_t next_rejected = 0;
  auto flush_rejected = [&](int64_t before_line) {
    for (; next_rejected < submitted.rejected.size() && submitted.rejected[next_rejected].line < before_line;
         ++next_rejected) {
      errors += rejected_line(submitted.rejected[next_rejected]) + "\n";
      ++report.errors;
    }
  };
  for (const jobs::Job& j : mine) {
    flush_rejected(j.spec.source_line);
    const std::string line = batch_output_line(j, tool_format);
    if (j.state == jobs::JobState::done) {
      out += line + "\n";
      ++report.written;
    } else {
      errors += line + "\n";
      ++report.errors;
    }
  }
  flush_rejected(INT64_MAX);
  write_whole(o.output, out);
  if (report.errors > 0) {
    write_whole(report.errors_path, errors);
  } else {
    std::error_code ec;
    fs::remove(report.errors_path, ec);  // an earlier run's errors no longer hold
  }
  queue.reset();
  if (!o.keep_db) remove_database(report.db);
  return report;
}

}  // namespace ns::cli
