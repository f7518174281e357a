#include "daemon/lib/worker.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <new>
#include <thread>

#include "daemon/lib/config.h"
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

}  // namespace

// What running a job produced, before anything is written to the queue.
struct Worker::Execution {
  JobOutcome outcome = JobOutcome::failed;
  jobs::JobResult result;         // done / cancelled
  std::string error_kind, error;  // failed
};

WorkerOptions worker_options_from(const Config& config) {
  WorkerOptions o;
  o.worker_id = effective_worker_id(config);
  o.models = config.models;
  o.config_source = config.source;
  o.engine.threads = config.threads;
  o.engine.context = config.context;
  o.poll_interval_ms = config.poll_interval_ms;
  return o;
}

const char* outcome_name(JobOutcome o) {
  switch (o) {
    case JobOutcome::none_queued: return "none_queued";
    case JobOutcome::done: return "done";
    case JobOutcome::failed: return "failed";
    case JobOutcome::cancelled: return "cancelled";
    case JobOutcome::released: return "released";
  }
  return "failed";
}

Worker::Worker(jobs::Queue& queue, WorkerOptions options, const std::atomic<bool>& stop)
    : queue_(queue), options_(std::move(options)), stop_(stop) {}

Worker::~Worker() = default;

Engine& Worker::engine_for(const std::string& model, double& load_ms) {
  load_ms = 0;
  if (engine_ && engine_model_ == model) return *engine_;

  auto it = options_.models.find(model);
  if (it == options_.models.end()) {
    throw Error(ErrorKind::invalid_input,
                "model '" + model + "' is not in the daemon's config (" + known_models(options_.models) +
                    "); add it under models: in " +
                    (options_.config_source.empty() ? std::string("the config") : options_.config_source) +
                    " or resubmit with one of those names");
  }
  const std::string& path = it->second;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw Error(ErrorKind::io, "model '" + model + "': file " + path + " does not exist or is not a regular file "
                               "(check models." + model + " in the config)");
  }

  // Free the previous model first: two models may not fit in memory together.
  engine_.reset();
  engine_model_.clear();
  spdlog::info("loading model {} from {}", model, path);
  const auto t0 = Clock::now();
  engine_ = Engine::load(path, options_.engine);
  load_ms = ms_since(t0);
  engine_model_ = model;
  spdlog::info("model {} loaded in {:.0f} ms", model, load_ms);
  return *engine_;
}

Worker::Execution Worker::execute(const jobs::Job& job) {
  Execution ex;
  try {
    if (std::string problem = job.spec.sampling.validate(); !problem.empty()) {
      throw Error(ErrorKind::invalid_input, "invalid sampling parameters: " + problem);
    }
    double load_ms = 0;
    Engine& engine = engine_for(job.spec.model, load_ms);
    if (stop_.load()) {  // a signal arrived during a long model load
      ex.outcome = JobOutcome::released;
      return ex;
    }

    bool stopped = false, cancelled = false;
    auto last_poll = Clock::now();
    const auto poll_every = std::chrono::milliseconds(options_.cancel_poll_ms);
    ProgressFn on_progress = [&](const GenerationProgress& p) {
      if (stop_.load()) {
        stopped = true;
        return false;
      }
      if (Clock::now() - last_poll >= poll_every) {
        last_poll = Clock::now();
        try {
          cancelled = queue_.cancel_requested(job.id);
        } catch (const Error& e) {
          // Never throw through the engine; a broken database shows up at the final write.
          spdlog::warn("job {}: cannot check for cancellation: {}", job.id, e.what());
        }
        if (cancelled) return false;
      }
      if (observer_) observer_(job, p);
      return true;
    };

    GenerationResult gen = engine.generate(job.spec.prompt, job.spec.sampling, on_progress);
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
    // A job that reached its end on the same token the stop or cancel was
    // noticed is simply done.
    if (r.finish_reason != "cancelled") {
      ex.outcome = JobOutcome::done;
    } else if (stopped) {
      ex.outcome = JobOutcome::released;
    } else if (cancelled) {
      ex.outcome = JobOutcome::cancelled;
    } else {
      throw Error(ErrorKind::internal, "the engine reported a cancellation nobody asked for");
    }
  } catch (const Error& e) {
    ex.outcome = JobOutcome::failed;
    ex.error_kind = error_kind_name(e.kind());
    ex.error = e.what();
  } catch (const std::bad_alloc&) {
    ex.outcome = JobOutcome::failed;
    ex.error_kind = error_kind_name(ErrorKind::internal);
    ex.error = "out of memory while running the job; lower `context` or use a smaller model";
    engine_.reset();  // its state is unknown now
    engine_model_.clear();
  } catch (const std::exception& e) {
    ex.outcome = JobOutcome::failed;
    ex.error_kind = error_kind_name(ErrorKind::internal);
    ex.error = std::string("internal error: ") + e.what();
    engine_.reset();
    engine_model_.clear();
  }
  return ex;
}

void Worker::record(const jobs::Job& job, const Execution& ex, JobOutcome outcome) {
  const jobs::JobResult& r = ex.result;
  switch (outcome) {
    case JobOutcome::done:
      queue_.complete(job.id, r);
      spdlog::info("job {} done: {} tokens, finish_reason {}", job.id, r.completion_tokens, r.finish_reason);
      break;
    case JobOutcome::cancelled:
      queue_.finish_cancelled(job.id, r);
      spdlog::info("job {} cancelled after {} tokens", job.id, r.completion_tokens);
      break;
    case JobOutcome::failed:
      queue_.fail(job.id, ex.error_kind, ex.error);
      spdlog::warn("job {} failed ({}): {}", job.id, ex.error_kind, ex.error);
      return;  // no stats for a job that did not run
    case JobOutcome::released:
      queue_.release(job.id);
      spdlog::info("job {} released back to the queue (shutting down)", job.id);
      return;
    case JobOutcome::none_queued:
      return;
  }
  spdlog::info(
      "job {} stats: model {}, prompt {} tok, completion {} tok, queue_wait {:.0f} ms, load {:.0f} ms, "
      "prefill {:.1f} ms ({:.2f} tok/s), decode {:.1f} ms ({:.2f} tok/s), peak_rss {:.1f} MiB, read {:.1f} MiB",
      job.id, job.spec.model, r.prompt_tokens, r.completion_tokens, r.queue_wait_ms, r.load_ms, r.prefill_ms,
      r.prefill_tok_s, r.decode_ms, r.decode_tok_s, mib(r.peak_rss_bytes), mib(r.bytes_read));
}

JobOutcome Worker::run_next() {
  std::optional<jobs::Job> job = queue_.claim(options_.worker_id);
  if (!job) return JobOutcome::none_queued;
  spdlog::info("job {} running: model {}, priority {}, attempt {}, waited {} ms", job->id, job->spec.model,
               job->spec.priority, job->attempts, job->started_ms - job->created_ms);

  Execution ex;
  if (stop_.load()) {
    ex.outcome = JobOutcome::released;
  } else {
    ex = execute(*job);
  }
  try {
    record(*job, ex, ex.outcome);
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::database) throw;
    // The row left `running` behind our back (edited by hand, or another
    // worker took it over): nothing to write, but no reason to stop either.
    spdlog::error("job {}: outcome {} not recorded: {}", job->id, outcome_name(ex.outcome), e.what());
  }
  return ex.outcome;
}

void Worker::sleep_unless_stopped(int ms) const {
  // Short naps so a signal is noticed within ~50 ms.
  const auto until = Clock::now() + std::chrono::milliseconds(ms);
  while (!stop_.load() && Clock::now() < until) {
    std::this_thread::sleep_for(std::min<Clock::duration>(std::chrono::milliseconds(50), until - Clock::now()));
  }
}

int Worker::run(bool drain) {
  int claimed = 0;
  while (!stop_.load()) {
    const JobOutcome o = run_next();
    if (o == JobOutcome::none_queued) {
      if (drain) break;
      sleep_unless_stopped(options_.poll_interval_ms);
    } else {
      ++claimed;
    }
  }
  return claimed;
}

}  // namespace ns::daemon
