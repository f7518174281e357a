// The step loop (contract in worker.h): admit -> step -> finish, and the
// claim policy around it (orphaned leases, models this daemon cannot serve,
// the drain).
#include "daemon/lib/worker.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <new>
#include <thread>
#include <utility>

#include "common/error.h"
#include "daemon/lib/config.h"
#include "daemon/lib/failure.h"
#include "jobs/backoff.h"

namespace ns::daemon {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

double mib(uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

}  // namespace

Worker::Worker(jobs::Queue& queue, WorkerOptions options, const std::atomic<bool>& stop, RunStatus* status)
    : queue_(queue),
      options_(std::move(options)),
      stop_(stop),
      status_(status != nullptr ? *status : own_status_),
      host_(status_),
      progress_(queue_, options_, stop_, status_),
      writer_(queue_, options_, status_) {
  use_cpu_features(options_.cpu_features);
}

Worker::~Worker() = default;

int Worker::run(bool drain) {
  int claimed = 0;
  // After `stop`, the running jobs still go round until each is released.
  while (!stop_.load() || !active_.empty() || !outcomes_.empty()) {
    if (between_jobs_ && active_.empty()) between_jobs_();
    switch (run_next()) {
      case JobOutcome::none_queued:
        if (stop_.load()) return claimed;
        if (drain && !work_left()) {
          if (!blocked_.empty()) {
            left_held_ = true;
            held_reason_ = status_.snapshot().problem;
            spdlog::error("drained what this daemon can serve; jobs it cannot serve are left queued: {}", held_reason_);
          }
          return claimed;
        }
        sleep_unless_stopped(options_.poll_interval_ms);
        break;
      case JobOutcome::database_unavailable: break;  // run_next waited already
      case JobOutcome::unservable: break;            // not an end: the job is still queued
      default: ++claimed; break;
    }
  }
  return claimed;
}

JobOutcome Worker::run_next() {
  while (outcomes_.empty()) {
    status_.touch();
    if (active_.empty()) {
      if (stop_.load()) return JobOutcome::none_queued;
      recover_orphans();
      const Admitted admitted = admit();
      if (admitted == Admitted::database_unavailable && outcomes_.empty()) return JobOutcome::database_unavailable;
      if (active_.empty() && outcomes_.empty()) return JobOutcome::none_queued;
    } else {
      // Room in the batch: queued jobs join between steps, at once after a
      // job left, else every cancel_poll_ms (a claim is a write transaction,
      // not worth one on every step). Expired leases are taken back at the
      // same pace, busy or not: a killed daemon's jobs must not wait for
      // every survivor to run dry (measured before: 21.8 s under a 5 s lease).
      const bool poll_due = Clock::now() - last_admit_ >= std::chrono::milliseconds(options_.cancel_poll_ms);
      if (!stop_.load() && poll_due) recover_orphans();
      if (!stop_.load() && (slot_freed_ || poll_due)) {
        slot_freed_ = false;
        admit();
      }
      if (!active_.empty()) step();
    }
  }
  const JobOutcome o = outcomes_.front();
  outcomes_.pop_front();
  return o;
}

// Claims jobs for the free slots: any model when the batch is empty (then
// the engine for it is loaded), else only the loaded model's.
Worker::Admitted Worker::admit() {
  // engine.max_sequences is max_batch (the KV cache's contexts); a loaded
  // batch knows how many of them are free.
  Engine::Batch* batch = host_.batch();
  const int free_slots = batch ? batch->free_slots() : std::max(1, options_.engine.max_sequences);
  last_admit_ = Clock::now();
  if (free_slots <= 0 || stop_.load()) return Admitted::none;
  // A job suspected of a crash runs by itself (Queue::claim_batch, crash blame).
  if (std::any_of(active_.begin(), active_.end(), [](const auto& r) { return r->job.run_alone; }))
    return Admitted::none;
  if (wanted_slots_ > 0 && free_slots < wanted_slots_ && !active_.empty()) return Admitted::none;
  if (wanted_rows_ > 0 && batch && batch->largest_free_rows() < wanted_rows_ && !active_.empty()) return Admitted::none;
  wanted_slots_ = 0;
  wanted_rows_ = 0;
  std::vector<jobs::Job> claimed;
  try {
    std::vector<std::string> servable;
    // Backing off from a model its config cannot serve: claim only the
    // configured models not blocked (a model not configured is never one).
    const auto now = Clock::now();
    const bool backing_off =
        std::any_of(blocked_.begin(), blocked_.end(), [&](const auto& kv) { return kv.second.until > now; });
    if (options_.claim_configured_only || backing_off) {
      for (const auto& [name, path] : options_.models) {
        const auto b = blocked_.find(name);
        if (b == blocked_.end() || b->second.until <= now) servable.push_back(name);
      }
      if (servable.empty()) return Admitted::none;  // no models: nothing this daemon may claim
    }
    // Nothing running: load the next job's model first, then claim. A load that
    // crashes or outlasts the lease (#30 G, K) then costs no job an attempt.
    if (active_.empty()) {
      const std::optional<std::string> next = queue_.next_model(servable);
      if (!next) return Admitted::none;
      preload(*next);
    }
    claimed = queue_.claim_batch(options_.worker_id, options_.lease_ms, free_slots,
                                 active_.empty() ? std::string() : host_.model(), servable);
    queue_more_ = claimed.size() >= static_cast<size_t>(free_slots);
  } catch (const jobs::DatabaseError& e) {
    if (!e.transient()) throw;
    const int64_t delay = jobs::backoff_delay_ms(options_.database_backoff, 3);
    spdlog::warn("cannot claim a job yet: {}; trying again in {} ms", e.what(), delay);
    if (active_.empty()) sleep_unless_stopped(delay);
    return Admitted::database_unavailable;
  }
  if (claimed.empty()) return Admitted::none;

  if (active_.empty()) {
    const std::string& model = claimed.front().spec.model;
    try {
      // Loaded by preload() unless the queue's head changed between the look and the claim.
      if (preload_error_.error && preload_error_.model == model) std::rethrow_exception(preload_error_.error);
      host_.open(model, options_);
      unblock(model);
    } catch (const DaemonConfigError& e) {
      // Not the jobs' fault: they go back, this daemon stays away from the model for a while.
      // The attempt's error; its kind is daemon_config (Queue::release).
      for (const jobs::Job& job : claimed) end(job, ending(JobOutcome::unservable, 0, e.what()));
      block(model, e.what(), claimed);
      return Admitted::some;
    } catch (const Error& e) {
      // Every claimed job names this model: they share its fate.
      if (e.kind() == ErrorKind::io) host_.drop();  // the file may have changed: load it afresh next time
      for (const jobs::Job& job : claimed) end(job, failure_of(e));
      return Admitted::some;
    }
  }
  for (const jobs::Job& job : claimed) start(job);
  return Admitted::some;
}

// Loads `model` before its jobs are claimed. A load error is kept for the
// claim: its jobs share the model's fate as before (a daemon-config problem
// releases them held, with the reason on them; a bad file fails them).
void Worker::preload(const std::string& model) {
  preload_error_ = {};
  try {
    host_.open(model, options_);
  } catch (const std::exception&) {
    preload_error_ = {model, std::current_exception()};
  }
}

// One claimed job joins the batch (or ends at once: bad input, stop, no room).
void Worker::start(const jobs::Job& job) {
  GenerationRequest request;
  int32_t resumed = 0;
  try {
    resumed = resume_from(
        job, writer_.persist("read the checkpoint", job.id, [&] { return queue_.checkpoint(job.id); }), request);
  } catch (const jobs::DatabaseError& e) {  // a damaged checkpoint row costs the saved work, not the daemon
    spdlog::error("job {}: its checkpoint cannot be read, starting over: {}", job.id, e.what());
  }
  spdlog::info("job {} running: model {}, priority {}, attempt {} ({} of at most {}), waited {} ms{}{}{}", job.id,
               job.spec.model, job.spec.priority, job.attempt, job.attempts, job.spec.max_attempts,
               job.started_ms - job.created_ms,
               resumed == 0 ? "" : ", resuming from " + std::to_string(resumed) + " checkpointed tokens",
               active_.empty() ? "" : ", joining a batch of " + std::to_string(active_.size()),
               job.run_alone ? ", alone (a daemon died while it ran beside others)" : "");
  // Progress counts every choice's tokens: n choices may take n * max_tokens.
  status_.start_job(job.lease(), job.spec.model, job.spec.sampling.max_tokens * job.spec.sampling.n, resumed);

  Engine::Batch& batch = *host_.batch();
  // Stopping, or a model that fits fewer jobs than were claimed for it (its
  // memory plan holds fewer than max_batch): back to the queue, attempt given back.
  // A job of n choices needs n free slots (more than the batch has at all is
  // refused by the engine below, naming the fix).
  const int slots = batch.free_slots() + batch.active();
  const int needed = std::max(1, std::min(job.spec.sampling.n, slots));
  if (stop_.load() || batch.free_slots() < needed) {
    Execution ex = ending(JobOutcome::released, resumed);
    if (!stop_.load()) {
      wanted_slots_ = std::max(wanted_slots_, needed);
      ex.error = "it needs " + std::to_string(needed) + " batch slot(s), " + std::to_string(batch.free_slots()) +
                 " free";  // for the log: a release, not a failure
    }
    end(job, ex);
    return;
  }
  auto run = std::make_unique<RunningJob>();
  run->job = job;
  run->resumed = run->checkpointed = resumed;
  run->last_poll = run->last_checkpoint = Clock::now();
  request.params = job.spec.sampling;
  request.keep_tail = jobs::is_document_job(job.spec);
  request.on_progress = [this, r = run.get()](const GenerationProgress& p) { return progress_.on_progress(*r, p); };
  try {
    // Rows may have been written by hand or by an older client: check again.
    if (std::string problem = jobs::spec_problem(job.spec); !problem.empty()) {
      throw Error(ErrorKind::invalid_input, problem);
    }
    request.prompt = host_.render_prompt(job);
    run->handle = batch.add(std::move(request));
    if (run->handle == kBatchNoRoom) {
      // The KV pool lacks its rows while the others run: back to the queue
      // (attempt given back), claimed again once they are free.
      wanted_rows_ = std::max(wanted_rows_, batch.refused_rows());
      spdlog::info("job {}: needs {} tokens of KV cache, {} free beside {} running job(s); it waits for them", job.id,
                   batch.refused_rows(), batch.largest_free_rows(), active_.size());
      Execution ex = ending(JobOutcome::released, resumed);
      ex.error = "it waits for KV cache rows";  // for the log: a release, not a failure
      end(job, ex);
      return;
    }
  } catch (const Error& e) {  // this job alone: bad input, a prompt longer than the context, ...
    end(job, failure_of(e));
    return;
  } catch (const std::bad_alloc&) {  // its sequence's buffers: memory may be free again later
    Execution ex =
        ending(JobOutcome::retrying, resumed,
               "out of memory while starting the job; lower `context` or `max_batch`, or use a smaller model");
    ex.error_kind = error_kind_name(ErrorKind::internal);
    end(job, ex);
    return;
  }
  if (active_.empty()) totals_ = RunTotals{Clock::now()};
  ++totals_.jobs;
  run->load_ms = host_.take_load_ms();
  active_.push_back(std::move(run));
  totals_.max_size = std::max(totals_.max_size, static_cast<int>(active_.size()));
}

// One forward pass for every job in the batch; jobs that ended leave it.
void Worker::step() {
  const auto t0 = Clock::now();
  Engine::Batch& batch = *host_.batch();
  try {
    batch.step();
  } catch (const Error& e) {
    const Error named = model_run_error(host_.model(), host_.path(), e);
    fail_all(failure_of(named), e.kind() != ErrorKind::invalid_input);
    return;
  } catch (const std::bad_alloc&) {
    // Memory may be free again later (another process), so this is worth a retry.
    Execution ex =
        ending(JobOutcome::retrying, 0,
               "out of memory while running the job; lower `context` or `max_batch`, or use a smaller model");
    ex.error_kind = error_kind_name(ErrorKind::internal);
    fail_all(ex, true);
    return;
  } catch (const std::exception& e) {
    Execution ex = ending(JobOutcome::failed, 0, std::string("internal error: ") + e.what());
    ex.error_kind = error_kind_name(ErrorKind::internal);
    fail_all(ex, true);
    return;
  }
  if (const std::vector<std::string> damaged = damaged_model_files(); !damaged.empty()) {
    // The file changed under the pass (#30 F): its results are zeros' work. No job's fault: they go back
    // queued (from their last checkpoint) and the model is loaded afresh after the block.
    const std::string model = host_.model();
    const std::string reason = "its file " + damaged.front() +
                               " was truncated or rewritten while in use (copied "
                               "over?); loaded again once the file is whole";
    std::vector<jobs::Job> released;
    for (const auto& run : active_) released.push_back(run->job);
    fail_all(ending(JobOutcome::unservable, 0, reason), true);
    block(model, reason, released);
    return;
  }
  const int64_t size = static_cast<int64_t>(active_.size());
  ++totals_.steps;
  const BatchStepStats& st = batch.last_step();
  rate_.add(t0, Clock::now(), st);
  spdlog::debug(
      "step {}: {} job(s), {} tokens ({} prefill, {} keys, {} prompt tokens copied from prefixes), {} experts "
      "({} read, {} cached), {:.1f} MiB read, {:.1f} ms ({:.1f} ms waiting for reads)",
      totals_.steps, size, st.tokens, st.prefill_tokens, st.keys, st.prefix_tokens, st.experts_used, st.experts_read,
      st.experts_cached, mib(st.bytes_read), ms_since(t0), 1e3 * st.io_wait_s);
  for (auto& [handle, gen] : batch.take_finished()) {
    auto it = std::find_if(active_.begin(), active_.end(), [&](const auto& r) { return r->handle == handle; });
    if (it == active_.end()) continue;  // not ours (cannot happen: every request is a job)
    std::unique_ptr<RunningJob> run = std::move(*it);
    active_.erase(it);
    finish(std::move(run), gen);
    slot_freed_ = true;  // the next queued job joins at the next step
  }
  estimate();  // for the jobs still in the batch
  if (active_.empty() && totals_.steps > 0) log_run_summary();
}

// A job's generation ended: its outcome is written and it leaves the batch.
void Worker::finish(std::unique_ptr<RunningJob> run, const GenerationResult& gen) {
  const Execution ex = finished(*run, gen);
  totals_.tokens += ex.result.completion_tokens - run->resumed;
  end(run->job, ex);
}

// Writes the job's end to the queue and takes it off the status.
void Worker::end(const jobs::Job& job, const Execution& ex) {
  JobOutcome outcome = JobOutcome::lease_lost;
  try {
    outcome = writer_.write(job, ex);
  } catch (...) {
    status_.end_job(job.id);
    throw;
  }
  status_.end_job(job.id);
  outcomes_.push_back(outcome);
}

// The batch's forward pass failed: every job in it shares the failure.
void Worker::fail_all(const Execution& failure, bool drop) {
  std::vector<std::unique_ptr<RunningJob>> jobs = std::move(active_);
  active_.clear();
  host_.close_batch();  // its state is unknown now; reopened at the next admission
  if (drop) host_.drop();
  totals_ = RunTotals{};
  rate_.reset();
  for (auto& run : jobs) {
    Execution ex = failure;
    ex.checkpointed = run->checkpointed;
    end(run->job, ex);
  }
}

// Every running job's rate and ETA from the batch's step model (daemon/lib/step_rate.h).
void Worker::estimate() {
  std::vector<StepRate::Job> jobs;
  jobs.reserve(active_.size());
  for (const auto& a : active_) {
    const int n = std::max(1, a->job.spec.sampling.n);
    jobs.push_back({a->prefilled + a->generated / n, std::max(a->prompt_tokens - a->prefilled, 0),
                    int64_t{a->job.spec.sampling.max_tokens} * n - a->generated, n});
  }
  // Jobs that end are replaced while the queue lasts: its depth is not read
  // (a count on every job's end), but a claim that filled every free slot
  // may have left more.
  const std::vector<StepRate::Estimate> est = rate_.estimate(jobs, queue_more_ ? options_.engine.max_sequences : 0);
  for (size_t i = 0; i < active_.size(); ++i) {
    RunningJob& a = *active_[i];
    a.tok_s = est[i].tok_s;
    status_.estimate(a.job.id, a.prefilled >= a.prompt_tokens && a.generated > a.resumed ? a.tok_s : 0,
                     est[i].eta_s.value_or(-1));
  }
}

// The batch run ended (its last job left): its summary line, and the next run starts afresh.
void Worker::log_run_summary() {
  Engine::Batch& batch = *host_.batch();
  const double secs = std::chrono::duration<double>(Clock::now() - totals_.started).count();
  const BatchRunStats& run = batch.totals();
  spdlog::info(
      "batch run: {} job(s) (at most {} together) in {} steps, {} tokens in {:.1f} s = {:.2f} tok/s "
      "aggregate, {:.1f} MiB read ({:.2f} MiB per token, {:.2f} GiB/s while reading), {:.0f}% of the "
      "time waiting for reads, expert cache hits {:.0f}%; {} prompt tokens prefilled, {} copied from shared "
      "prefixes",
      totals_.jobs, totals_.max_size, totals_.steps, totals_.tokens, secs, secs > 0 ? totals_.tokens / secs : 0,
      mib(run.bytes_read), totals_.tokens > 0 ? mib(run.bytes_read) / static_cast<double>(totals_.tokens) : 0,
      run.read_gib_s(), 100 * run.io_share(), 100 * run.cache_hit_rate(), run.prefill_tokens, run.prefix_tokens);
  batch.reset_totals();
  totals_ = RunTotals{};
  rate_.reset();
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

bool Worker::work_left() {
  try {
    const jobs::QueueCounts c = queue_.counts();
    // Running jobs are not ours here (the batch is empty): another daemon's,
    // or a dead one's under an unexpired lease. Those are taken over once
    // the lease expires (recover_orphans), so the drain waits for them.
    if (c.running > 0 && !waiting_for_others_) {
      spdlog::info(
          "drain: {} job(s) running under another worker; waiting until they end or their leases expire "
          "(then they are taken over here)",
          c.running);
    }
    waiting_for_others_ = c.running > 0;
    return c.retry_waiting > 0 || c.running > 0;
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

void Worker::block(const std::string& model, const std::string& reason, const std::vector<jobs::Job>& released) {
  Blocked& b = blocked_[model];
  ++b.failures;
  std::string ids;
  for (const jobs::Job& job : released) {
    b.jobs.insert(job.id);
    ids += (ids.empty() ? "" : ", ") + std::to_string(job.id);
  }
  b.reason = reason.substr(0, reason.find('\n'));
  // At least a second (and a poll interval): even with retry_backoff_ms 0
  // the job must not be claimed hot, and a --drain run must see the model
  // blocked once to end.
  const int64_t delay = std::max<int64_t>(jobs::backoff_delay_ms(options_.retry_backoff, b.failures),
                                          std::max(1000, options_.poll_interval_ms));
  b.until = Clock::now() + std::chrono::milliseconds(delay);
  spdlog::error(
      "THIS DAEMON CANNOT SERVE MODEL {}: {}. Job(s) {} left queued, attempts not counted ({} job(s) "
      "so far); its jobs are not claimed for {} ms. Fix the config and reload it (SIGHUP) to try again at "
      "once.",
      model, reason, ids, b.jobs.size(), delay);
  publish_problem();
}

void Worker::unblock(const std::string& model) {
  if (blocked_.erase(model) == 0) return;
  spdlog::info("model {}: served again", model);
  publish_problem();
}

void Worker::publish_problem() {
  std::string problem;
  for (const auto& [model, b] : blocked_) {
    problem += (problem.empty() ? "" : "; ") +
               ("model " + model + ": " + b.reason + " (" + std::to_string(b.jobs.size()) + " job(s) left queued)");
  }
  status_.set_problem(problem);
}

void Worker::update_options(WorkerOptions options) {
  options.worker_id = options_.worker_id;  // leases are held under the id the worker started with
  if (host_.stale(options, options_) && active_.empty()) {
    spdlog::info("model {}: its path or the engine options changed; it is loaded again for the next job",
                 host_.model());
    host_.drop();
  }
  if (options.cpu_features != options_.cpu_features) {
    // Between jobs, like the other options; every matmul reads the path once.
    use_cpu_features(options.cpu_features);
    spdlog::info("cpu_features {}: compute kernels now {}", options.cpu_features, cpu_features_in_use());
  }
  options_ = std::move(options);
  if (!blocked_.empty()) {
    spdlog::info("config reloaded: trying the model(s) this daemon could not serve again");
    blocked_.clear();
    publish_problem();
  }
}

}  // namespace ns::daemon
