#include "daemon/lib/worker.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <new>
#include <thread>

#include "daemon/lib/config.h"
#include "daemon/lib/failure.h"
#include "engine/util/error.h"

namespace ns::daemon {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double mib(uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

std::string known_models(const std::map<std::string, std::string>& models) {
  if (models.empty()) return "none are configured";
  std::string list;
  for (const auto& [name, path] : models) list += (list.empty() ? "" : ", ") + name;
  return "known models: " + list;
}

// A model file that exists but that this user may not read is a
// configuration problem: retrying will not fix it.
void require_readable(const std::string& model, const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ::close(fd);
    return;
  }
  const int err = errno;
  if (err == EACCES || err == EPERM) {
    throw PermanentError(ErrorKind::io, "model '" + model + "': cannot read " + path + ": " + std::strerror(err) +
                                            " (the daemon runs as uid " + std::to_string(geteuid()) +
                                            "); fix the file's permissions, then `nightshift retry` the job");
  }
  throw Error(ErrorKind::io, "model '" + model + "': cannot open " + path + ": " + std::strerror(err));
}

}  // namespace

// What running a job produced, before anything is written to the queue.
struct Worker::Execution {
  JobOutcome outcome = JobOutcome::failed;  // done, failed, retrying, cancelled, released or lease_lost
  jobs::JobResult result;                   // done / cancelled
  std::vector<int32_t> tokens;              // all completion tokens (released: the final checkpoint)
  int32_t checkpointed = 0;                 // tokens in the saved checkpoint
  std::string error_kind, error;            // failed / retrying
};

WorkerOptions worker_options_from(const Config& config) {
  WorkerOptions o;
  o.worker_id = effective_worker_id(config);
  o.models = config.models;
  o.config_source = config.source;
  o.engine.threads = config.threads;
  o.engine.context = config.context;
  o.engine.memory_budget = config.memory_budget;
  o.engine.io_mode = config.io_mode;
  o.poll_interval_ms = config.poll_interval_ms;
  o.lease_ms = config.lease_ms;
  o.checkpoint_tokens = config.checkpoint_tokens;
  o.checkpoint_interval_ms = config.checkpoint_interval_ms;
  o.retry_backoff = {config.retry_backoff_ms, config.retry_backoff_max_ms};
  return o;
}

const char* outcome_name(JobOutcome o) {
  switch (o) {
    case JobOutcome::none_queued: return "none_queued";
    case JobOutcome::done: return "done";
    case JobOutcome::failed: return "failed";
    case JobOutcome::retrying: return "retrying";
    case JobOutcome::dead: return "dead";
    case JobOutcome::cancelled: return "cancelled";
    case JobOutcome::released: return "released";
    case JobOutcome::lease_lost: return "lease_lost";
    case JobOutcome::database_unavailable: return "database_unavailable";
  }
  return "failed";
}

Worker::Worker(jobs::Queue& queue, WorkerOptions options, const std::atomic<bool>& stop, RunStatus* status)
    : queue_(queue), options_(std::move(options)), stop_(stop), status_(status != nullptr ? *status : own_status_) {}

Worker::~Worker() = default;

void Worker::update_options(WorkerOptions options) {
  options.worker_id = options_.worker_id;  // leases are held under the id the worker started with
  const auto it = options.models.find(engine_model_);
  const bool engine_stale = engine_ && (it == options.models.end() || it->second != engine_path_ ||
                                        options.engine.threads != options_.engine.threads ||
                                        options.engine.context != options_.engine.context ||
                                        options.engine.memory_budget != options_.engine.memory_budget ||
                                        options.engine.io_mode != options_.engine.io_mode);
  if (engine_stale) {
    spdlog::info("model {}: its path or the engine options changed; it is loaded again for the next job",
                 engine_model_);
    engine_.reset();
    engine_model_.clear();
    engine_path_.clear();
  }
  options_ = std::move(options);
}

template <class F>
auto Worker::persist(const char* what, int64_t job_id, F&& write) -> decltype(write()) {
  for (int32_t failures = 1;; ++failures) {
    try {
      return write();
    } catch (const jobs::DatabaseError& e) {
      if (!e.transient()) throw;
      const int64_t delay = jobs::backoff_delay_ms(options_.database_backoff, failures);
      spdlog::warn("job {}: cannot {} yet: {}; retrying in {} ms", job_id, what, e.what(), delay);
      // Not cut short by `stop`: the result of a finished job is worth the
      // wait, and the drain deadline bounds it.
      std::this_thread::sleep_for(std::chrono::milliseconds(delay));
      status_.touch();
    }
  }
}

Engine& Worker::engine_for(const std::string& model, double& load_ms) {
  load_ms = 0;
  auto it = options_.models.find(model);
  if (it == options_.models.end()) {
    throw Error(ErrorKind::invalid_input,
                "model '" + model + "' is not in the daemon's config (" + known_models(options_.models) +
                    "); add it under models: in " +
                    (options_.config_source.empty() ? std::string("the config") : options_.config_source) +
                    " or resubmit with one of those names");
  }
  const std::string& path = it->second;
  if (engine_ && engine_model_ == model && engine_path_ == path) return *engine_;

  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    // Transient: a model on a disk that is mounted late, or still being copied.
    throw Error(ErrorKind::io, "model '" + model + "': file " + path +
                                   " does not exist or is not a regular file (check models." + model +
                                   " in the config; the job is retried in case the disk is not mounted yet)");
  }
  require_readable(model, path);

  // Free the previous model first: two models may not fit in memory together.
  engine_.reset();
  engine_model_.clear();
  engine_path_.clear();
  spdlog::info("loading model {} from {}", model, path);
  const auto t0 = Clock::now();
  engine_ = Engine::load(path, options_.engine);
  load_ms = ms_since(t0);
  engine_model_ = model;
  engine_path_ = path;
  status_.touch();
  spdlog::info("model {} loaded in {:.0f} ms", model, load_ms);
  return *engine_;
}

Worker::Execution Worker::execute(const jobs::Job& job, const std::vector<int32_t>& resume) {
  Execution ex;
  ex.checkpointed = static_cast<int32_t>(resume.size());
  const jobs::Lease lease = job.lease();
  try {
    // Rows may have been written by hand or by an older client: check again.
    if (std::string problem = jobs::spec_problem(job.spec); !problem.empty()) {
      throw Error(ErrorKind::invalid_input, problem);
    }
    double load_ms = 0;
    Engine& engine = engine_for(job.spec.model, load_ms);
    if (stop_.load()) {  // a signal arrived during a long model load
      ex.outcome = JobOutcome::released;
      return ex;
    }

    bool stopped = false, cancelled = false, lost = false;
    auto last_poll = Clock::now();
    auto last_checkpoint = Clock::now();
    Clock::time_point checkpoint_blocked_until{};  // after a failed save: not on every token
    std::optional<Clock::time_point> first_token;
    int32_t first_token_count = 0;
    const auto poll_every = std::chrono::milliseconds(options_.cancel_poll_ms);
    ProgressFn on_progress = [&](const GenerationProgress& p) {
      status_.touch();
      if (stop_.load()) {
        stopped = true;
        return false;
      }
      if (status_.lease_lost()) {
        lost = true;
        return false;
      }
      const auto now = Clock::now();
      if (now - last_poll >= poll_every) {
        last_poll = now;
        try {
          cancelled = queue_.cancel_requested(job.id);
        } catch (const Error& e) {
          // Never throw through the engine; a broken database shows up at the final write.
          spdlog::warn("job {}: cannot check for cancellation: {}", job.id, e.what());
        }
        if (cancelled) return false;
      }
      const int32_t unsaved = p.generated - ex.checkpointed;
      const bool by_count = options_.checkpoint_tokens > 0 && unsaved >= options_.checkpoint_tokens;
      const bool by_time = options_.checkpoint_interval_ms > 0 &&
                           now - last_checkpoint >= std::chrono::milliseconds(options_.checkpoint_interval_ms);
      if (p.tokens != nullptr && unsaved > 0 && (by_count || by_time) && now >= checkpoint_blocked_until) {
        last_checkpoint = now;
        try {
          if (!queue_.save_checkpoint(lease, *p.tokens, options_.lease_ms)) {
            lost = true;
            return false;
          }
          ex.checkpointed = p.generated;
        } catch (const Error& e) {
          // A locked database or a full disk: generation goes on, the next
          // try waits a while (each try may block for the busy timeout).
          checkpoint_blocked_until = Clock::now() + std::chrono::seconds(5);
          spdlog::warn("job {}: checkpoint at {} tokens not saved (next try in 5 s): {}", job.id, p.generated,
                       e.what());
        }
      }
      if (p.prefilled >= p.prompt_tokens && p.generated > static_cast<int32_t>(resume.size())) {
        if (!first_token) {
          first_token = now;
          first_token_count = p.generated;
        }
        const double secs = std::chrono::duration<double>(now - *first_token).count();
        status_.progress(p.generated, secs > 0 ? (p.generated - first_token_count) / secs : 0);
      }
      if (observer_) observer_(job, p);
      return true;
    };

    GenerationResult gen = engine.generate(job.spec.prompt, job.spec.sampling, on_progress, resume);
    jobs::JobResult& r = ex.result;
    r.text = std::move(gen.text);
    r.finish_reason = gen.finish_reason;
    r.prompt_tokens = gen.stats.prompt_tokens;
    r.completion_tokens = gen.stats.completion_tokens;
    r.queue_wait_ms = static_cast<double>(job.started_ms - job.created_ms);
    // The engine reports load time it spent inside generate (lazy loading), the
    // worker the time Engine::load took; a job pays for whichever happened.
    r.load_ms = load_ms + gen.stats.load_ms;
    r.prefill_ms = gen.stats.prefill_ms;
    r.decode_ms = gen.stats.decode_ms;
    r.prefill_tok_s = gen.stats.prefill_tok_s;
    r.decode_tok_s = gen.stats.decode_tok_s;
    r.peak_rss_bytes = gen.stats.peak_rss_bytes != 0 ? gen.stats.peak_rss_bytes : peak_rss_bytes();
    r.bytes_read = gen.stats.bytes_read;
    ex.tokens = std::move(gen.tokens);
    // A job that reached its end on the same token the stop or cancel was
    // noticed is simply done.
    if (r.finish_reason != "cancelled") {
      ex.outcome = JobOutcome::done;
    } else if (lost) {
      ex.outcome = JobOutcome::lease_lost;
    } else if (stopped) {
      ex.outcome = JobOutcome::released;
    } else if (cancelled) {
      ex.outcome = JobOutcome::cancelled;
    } else {
      throw Error(ErrorKind::internal, "the engine reported a cancellation nobody asked for");
    }
  } catch (const Error& e) {
    ex.outcome = is_transient_failure(e) ? JobOutcome::retrying : JobOutcome::failed;
    ex.error_kind = error_kind_name(e.kind());
    ex.error = e.what();
    if (e.kind() == ErrorKind::io) {  // the model file may have changed under us: load it afresh next time
      engine_.reset();
      engine_model_.clear();
      engine_path_.clear();
    }
  } catch (const std::bad_alloc&) {
    // Memory may be free again later (another process), so this is worth a retry.
    ex.outcome = JobOutcome::retrying;
    ex.error_kind = error_kind_name(ErrorKind::internal);
    ex.error = "out of memory while running the job; lower `context` or use a smaller model";
    engine_.reset();  // its state is unknown now
    engine_model_.clear();
    engine_path_.clear();
  } catch (const std::exception& e) {
    ex.outcome = JobOutcome::failed;
    ex.error_kind = error_kind_name(ErrorKind::internal);
    ex.error = std::string("internal error: ") + e.what();
    engine_.reset();
    engine_model_.clear();
    engine_path_.clear();
  }
  return ex;
}

JobOutcome Worker::record(const jobs::Job& job, const Execution& ex) {
  const jobs::Lease lease = job.lease();
  const jobs::JobResult& r = ex.result;
  JobOutcome outcome = ex.outcome;
  bool held = true;
  switch (ex.outcome) {
    case JobOutcome::done:
      held = persist("store the result", job.id, [&] { return queue_.complete(lease, r); });
      if (held) spdlog::info("job {} done: {} tokens, finish_reason {}", job.id, r.completion_tokens, r.finish_reason);
      break;
    case JobOutcome::cancelled:
      held = persist("store the cancellation", job.id, [&] { return queue_.finish_cancelled(lease, r); });
      if (held) spdlog::info("job {} cancelled after {} tokens", job.id, r.completion_tokens);
      break;
    case JobOutcome::failed:
      held = persist("store the failure", job.id, [&] { return queue_.fail(lease, ex.error_kind, ex.error); });
      if (held) spdlog::warn("job {} failed ({}): {}", job.id, ex.error_kind, ex.error);
      break;
    case JobOutcome::retrying: {
      const std::optional<jobs::JobState> state = persist("store the failure", job.id, [&] {
        return queue_.fail_transient(lease, ex.error_kind, ex.error, options_.retry_backoff);
      });
      held = state.has_value();
      if (state == jobs::JobState::dead) {
        outcome = JobOutcome::dead;
        spdlog::error("job {} dead after {} attempts ({}): {}", job.id, job.attempts, ex.error_kind, ex.error);
      } else if (state == jobs::JobState::cancelled) {
        outcome = JobOutcome::cancelled;
        spdlog::info("job {} cancelled (its attempt failed: {})", job.id, ex.error);
      } else if (held) {
        spdlog::warn("job {} attempt {} failed ({}), retrying after a backoff: {}", job.id, job.attempt,
                     ex.error_kind, ex.error);
      }
      break;
    }
    case JobOutcome::released:
      if (static_cast<int32_t>(ex.tokens.size()) > ex.checkpointed) {
        held = persist("save the checkpoint", job.id,
                       [&] { return queue_.save_checkpoint(lease, ex.tokens, options_.lease_ms); });
      }
      if (held) held = persist("release the job", job.id, [&] { return queue_.release(lease); });
      if (held) {
        spdlog::info("job {} released back to the queue (shutting down) with {} tokens checkpointed", job.id,
                     std::max<size_t>(ex.tokens.size(), static_cast<size_t>(ex.checkpointed)));
      }
      break;
    case JobOutcome::lease_lost:
      held = false;
      break;
    case JobOutcome::none_queued:
    case JobOutcome::dead:
    case JobOutcome::database_unavailable:
      break;
  }
  if (!held) {
    spdlog::error("job {}: attempt {} no longer holds its lease (it expired and another worker took the job "
                  "over, or the row was changed by hand); its outcome ({}) is dropped",
                  job.id, job.attempt, outcome_name(ex.outcome));
    return JobOutcome::lease_lost;
  }
  if (outcome == JobOutcome::done || outcome == JobOutcome::cancelled) {
    spdlog::info(
        "job {} stats: model {}, prompt {} tok, completion {} tok, queue_wait {:.0f} ms, load {:.0f} ms, "
        "prefill {:.1f} ms ({:.2f} tok/s), decode {:.1f} ms ({:.2f} tok/s), peak_rss {:.1f} MiB, read {:.1f} MiB",
        job.id, job.spec.model, r.prompt_tokens, r.completion_tokens, r.queue_wait_ms, r.load_ms, r.prefill_ms,
        r.prefill_tok_s, r.decode_ms, r.decode_tok_s, mib(r.peak_rss_bytes), mib(r.bytes_read));
  }
  return outcome;
}

void Worker::recover_orphans() {
  try {
    const jobs::Recovery r = queue_.recover_expired(options_.retry_backoff);
    if (r.total() > 0) {
      spdlog::warn("recovered {} job(s) whose worker stopped renewing its lease: {} requeued, {} dead, {} cancelled",
                   r.total(), r.requeued, r.dead, r.cancelled);
    }
  } catch (const jobs::DatabaseError& e) {
    if (!e.transient()) throw;
    spdlog::warn("cannot look for expired leases yet: {}", e.what());
  }
}

JobOutcome Worker::run_next() {
  status_.touch();
  recover_orphans();
  std::optional<jobs::Job> job;
  try {
    job = queue_.claim(options_.worker_id, options_.lease_ms);
  } catch (const jobs::DatabaseError& e) {
    if (!e.transient()) throw;
    const int64_t delay = jobs::backoff_delay_ms(options_.database_backoff, 3);
    spdlog::warn("cannot claim a job yet: {}; trying again in {} ms", e.what(), delay);
    sleep_unless_stopped(delay);
    return JobOutcome::database_unavailable;
  }
  if (!job) return JobOutcome::none_queued;

  std::vector<int32_t> resume;
  try {
    if (std::optional<jobs::Checkpoint> cp =
            persist("read the checkpoint", job->id, [&] { return queue_.checkpoint(job->id); })) {
      resume = std::move(cp->tokens);
    }
  } catch (const jobs::DatabaseError& e) {  // a damaged checkpoint row costs the saved work, not the daemon
    spdlog::error("job {}: its checkpoint cannot be read, starting over: {}", job->id, e.what());
  }
  spdlog::info("job {} running: model {}, priority {}, attempt {} ({} of at most {}), waited {} ms{}", job->id,
               job->spec.model, job->spec.priority, job->attempt, job->attempts, job->spec.max_attempts,
               job->started_ms - job->created_ms,
               resume.empty() ? "" : ", resuming from " + std::to_string(resume.size()) + " checkpointed tokens");
  status_.start_job(job->lease(), job->spec.model, job->spec.sampling.max_tokens,
                    static_cast<int32_t>(resume.size()));

  Execution ex;
  if (stop_.load()) {
    ex.outcome = JobOutcome::released;
    ex.checkpointed = static_cast<int32_t>(resume.size());
  } else {
    ex = execute(*job, resume);
  }
  JobOutcome outcome = JobOutcome::lease_lost;
  try {
    outcome = record(*job, ex);
  } catch (...) {
    status_.end_job();
    throw;
  }
  status_.end_job();
  return outcome;
}

bool Worker::retries_pending() {
  try {
    return queue_.counts().retry_waiting > 0;
  } catch (const jobs::DatabaseError& e) {
    if (!e.transient()) throw;
    return true;  // cannot tell: keep going rather than leave work behind
  }
}

void Worker::sleep_unless_stopped(int64_t ms) const {
  // Short naps so a signal is noticed within ~50 ms.
  const auto until = Clock::now() + std::chrono::milliseconds(ms);
  while (!stop_.load() && Clock::now() < until) {
    std::this_thread::sleep_for(std::min<Clock::duration>(std::chrono::milliseconds(50), until - Clock::now()));
  }
}

int Worker::run(bool drain) {
  int claimed = 0;
  while (!stop_.load()) {
    if (between_jobs_) between_jobs_();
    switch (run_next()) {
      case JobOutcome::none_queued:
        if (drain && !retries_pending()) return claimed;
        sleep_unless_stopped(options_.poll_interval_ms);
        break;
      case JobOutcome::database_unavailable:
        break;  // run_next waited already
      default:
        ++claimed;
        break;
    }
  }
  return claimed;
}

}  // namespace ns::daemon
