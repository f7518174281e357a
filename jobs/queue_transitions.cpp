// The job state machine, once for every backend (contract in
// jobs/queue_transitions.h and jobs/queue.h).
#include "jobs/queue_transitions.h"

#include <string_view>

#include <nlohmann/json.hpp>

#include "jobs/time_format.h"

namespace ns::jobs {

Orphan read_orphan(const Row& row) {
  return read_columns<Orphan>(row, 0, &Orphan::id, &Orphan::attempt, &Orphan::attempts, &Orphan::max_attempts,
                              &Orphan::cancel_requested, &Orphan::worker, &Orphan::lease_expires_ms, &Orphan::run_alone,
                              &Orphan::shared);
}

const char* const kSharedCrash = R"(EXISTS (
    SELECT 1 FROM attempts AS other
    WHERE other.worker = jobs.worker AND other.job_id <> jobs.id
      AND (other.ended_ms IS NULL
           OR (other.outcome IN ('lease_expired', 'abandoned') AND other.ended_ms >= jobs.started_ms))))";

std::vector<int64_t> leading_run(const std::vector<QueueHead>& head, const std::string& model) {
  std::vector<int64_t> ids;
  std::string want = model;
  for (const QueueHead& h : head) {
    if (h.run_alone) {  // by itself, and only into an empty batch
      if (ids.empty() && model.empty()) ids.push_back(h.id);
      break;
    }
    if (want.empty()) want = h.model;
    if (h.model != want) break;  // never jump a job ahead in the queue
    ids.push_back(h.id);
  }
  return ids;
}

void add_count(QueueCounts& c, JobState state, int64_t n) {
  switch (state) {
    case JobState::queued: c.queued = n; break;
    case JobState::running: c.running = n; break;
    case JobState::done: c.done = n; break;
    case JobState::failed: c.failed = n; break;
    case JobState::cancelled: c.cancelled = n; break;
    case JobState::dead: c.dead = n; break;
  }
}

// ---- submitting -------------------------------------------------------------

void TransitionQueue::validate(const JobSpec& spec, const std::string& which) {
  if (std::string problem = spec_problem(spec); !problem.empty()) {
    throw Error(ErrorKind::invalid_input, which + problem);
  }
}

SubmitOutcome TransitionQueue::submit(const JobSpec& spec) {
  validate(spec, "");
  auto tx = begin_write();
  const SubmitOutcome out = insert(spec);
  tx->commit();  // nothing was written when the key matched: committing nothing is harmless
  return out;
}

std::vector<SubmitOutcome> TransitionQueue::submit_many(std::span<const JobSpec> specs) {
  for (size_t i = 0; i < specs.size(); ++i) validate(specs[i], "job " + std::to_string(i + 1) + ": ");
  std::vector<SubmitOutcome> out;
  out.reserve(specs.size());
  auto tx = begin_write();
  for (const JobSpec& spec : specs) out.push_back(insert(spec));
  tx->commit();
  return out;
}

// ---- the worker's side ------------------------------------------------------

std::optional<Job> TransitionQueue::claim(const std::string& worker, int64_t lease_ms) {
  // The best claimable job is the head of the queue, whatever its model.
  std::vector<Job> jobs = claim_batch(worker, lease_ms, 1, "", {});
  if (jobs.empty()) return std::nullopt;
  return std::move(jobs.front());
}

std::vector<Job> TransitionQueue::claim_batch(const std::string& worker, int64_t lease_ms, int max_jobs,
                                              const std::string& model, const std::vector<std::string>& servable) {
  if (max_jobs <= 0) return {};
  const std::string models = servable.empty() ? std::string() : nlohmann::json(servable).dump();
  // Idle daemons poll: look without the write lock first, so polling never blocks submitters.
  if (!anything_claimable(models)) return {};
  auto tx = begin_write();
  // Re-read under the lock: another worker may have taken them meanwhile.
  const std::vector<int64_t> ids = leading_run(claimable_head(max_jobs, models), model);
  if (ids.empty()) return {};
  std::vector<Job> out = claim_ids(ids, worker, lease_ms);
  tx->commit();
  return out;
}

std::string untrusted_lease_sql(const std::string& now) {
  return "(lease_expires_ms < " + now + " OR worker IN (SELECT id FROM workers WHERE stopped_ms IS NOT NULL OR " +
         "heartbeat_ms > " + now + " + " + std::to_string(kClockBackMs) + "))";
}

std::optional<std::string> TransitionQueue::next_model(const std::vector<std::string>& servable) {
  const std::string models = servable.empty() ? std::string() : nlohmann::json(servable).dump();
  if (!anything_claimable(models)) return std::nullopt;
  const std::vector<QueueHead> head = claimable_head(1, models);
  if (head.empty()) return std::nullopt;
  return head.front().model;
}

bool TransitionQueue::heartbeat(const Lease& lease, int64_t lease_ms, const std::optional<JobProgress>& progress) {
  auto tx = begin_write();
  if (!extend_lease(lease, lease_ms, progress ? &*progress : nullptr)) return false;
  tx->commit();
  return true;
}

bool TransitionQueue::save_checkpoint(const Lease& lease, const Checkpoint& cp, int64_t lease_ms) {
  auto tx = begin_write();
  if (!extend_lease(lease, lease_ms, nullptr)) return false;
  put_checkpoint(lease, cp);
  tx->commit();
  return true;
}

bool TransitionQueue::complete(const Lease& lease, const JobResult& result) {
  return end_with_result(lease, "done", result);
}

bool TransitionQueue::fail(const Lease& lease, const std::string& error_kind, const std::string& message) {
  auto tx = begin_write();
  if (!end_running(lease, "failed", &error_kind, &message)) return false;
  end_attempt(lease, {"failed", &error_kind, &message});
  tx->commit();
  return true;
}

std::optional<JobState> TransitionQueue::fail_transient(const Lease& lease, const std::string& error_kind,
                                                        const std::string& message, const Backoff& backoff) {
  auto tx = begin_write();
  std::optional<Orphan> job = running_under(lease);
  if (!job) return std::nullopt;
  end_attempt(lease, {"transient_error", &error_kind, &message});
  const JobState state = requeue_or_bury(*job, error_kind, message, backoff);
  tx->commit();
  return state;
}

bool TransitionQueue::finish_cancelled(const Lease& lease, const JobResult& partial) {
  return end_with_result(lease, "cancelled", partial);
}

bool TransitionQueue::end_with_result(const Lease& lease, const char* state, const JobResult& result) {
  auto tx = begin_write();
  if (!end_running(lease, state, nullptr, nullptr)) return false;
  write_result(lease.job_id, result);
  end_attempt(lease, {state});  // the attempt's outcome is the job's state: done or cancelled
  tx->commit();
  return true;
}

bool TransitionQueue::release(const Lease& lease, const std::string& reason) {
  auto tx = begin_write();
  std::optional<Orphan> job = running_under(lease);
  if (!job) return false;
  if (job->cancel_requested) {
    end_running(lease, "cancelled", nullptr, nullptr);
    end_attempt(lease, {"cancelled"});
  } else {
    release_fenced(lease, false, reason.empty() ? nullptr : &reason);
    static const std::string kDaemonConfig = kHeldErrorKind;
    end_attempt(lease, reason.empty() ? AttemptEnd{"released"} : AttemptEnd{"released", &kDaemonConfig, &reason});
  }
  tx->commit();
  return true;
}

bool TransitionQueue::end_running(const Lease& lease, const char* state, const std::string* error_kind,
                                  const std::string* error) {
  if (!finish_fenced(lease, state, error_kind, error)) return false;
  if (std::string_view(state) != "dead") drop_checkpoint(lease.job_id);
  return true;
}

JobState TransitionQueue::requeue_or_bury(const Orphan& job, const std::string& error_kind, const std::string& error,
                                          const Backoff& backoff) {
  const Lease lease = job.lease();
  if (job.cancel_requested) {  // a cancel requested while it ran wins over a retry
    end_running(lease, "cancelled", nullptr, nullptr);
    return JobState::cancelled;
  }
  if (job.attempts >= job.max_attempts) {
    const std::string why = error + " (attempt " + std::to_string(job.attempts) + " of " +
                            std::to_string(job.max_attempts) + "; no attempts left: `nightshift retry " +
                            std::to_string(job.id) + "` queues it again)";
    end_running(lease, "dead", &error_kind, &why);
    return JobState::dead;
  }
  requeue_fenced(lease, backoff_delay_ms(backoff, job.attempts), error_kind, error);
  return JobState::queued;
}

// ---- recovery ---------------------------------------------------------------

Recovery TransitionQueue::recover_expired(const Backoff& backoff) {
  return recover(OrphanScope{}, "lease_expired", backoff);
}

Recovery TransitionQueue::recover_worker(const std::string& worker, const Backoff& backoff) {
  return recover(OrphanScope{worker}, "abandoned", backoff);
}

Recovery TransitionQueue::recover(const OrphanScope& scope, const char* outcome, const Backoff& backoff) {
  // Called on every idle poll: look without the write lock first.
  if (!any_orphan(scope)) return {};
  auto tx = begin_write();
  Recovery r;
  const std::string kind = outcome;
  for (const Orphan& o : orphans(scope)) {
    const std::string n = std::to_string(o.attempt);
    const std::string error =
        kind == "abandoned" ? "worker " + o.worker + " was restarted while it ran attempt " + n
                            : "worker " + o.worker + " stopped renewing its lease during attempt " + n +
                                  " (crashed, killed or hung); " +
                                  (o.lease_expires_ms > 0 ? "the lease expired at " + iso8601_utc(o.lease_expires_ms)
                                                          : std::string("it was claimed before the upgrade to leases"));
    if (kind != "abandoned" && o.lease_expires_ms > now_epoch_ms()) {
      // Taken for its worker's row, not an expired lease (untrusted_lease_sql): no fault of the job's.
      const std::string why = "worker " + o.worker + " cannot renew the lease of attempt " + n + " (it stopped, or " +
                              "the clock went back since it last beat: the lease read " +
                              iso8601_utc(o.lease_expires_ms) + "); the attempt is not counted";
      end_attempt(o.lease(), {outcome, &kind, &why});
      release_fenced(o.lease(), false, nullptr);
      ++r.requeued;
      continue;
    }
    if (o.shared && !o.run_alone && !o.cancel_requested) {
      // Which job of the batch (if any) brought the process down is unknown:
      // charge none of them; each runs alone next, where a crash is its own.
      const std::string unblamed = error +
                                   "; other jobs ran beside it, so the attempt is not counted and it runs "
                                   "alone next";
      end_attempt(o.lease(), {outcome, &kind, &unblamed});
      release_fenced(o.lease(), true, nullptr);
      ++r.requeued;
      continue;
    }
    end_attempt(o.lease(), {outcome, &kind, &error});
    switch (requeue_or_bury(o, kind, error, backoff)) {
      case JobState::cancelled: ++r.cancelled; break;
      case JobState::dead: ++r.dead; break;
      default: ++r.requeued; break;
    }
  }
  tx->commit();
  return r;
}

// ---- people's side ----------------------------------------------------------

bool TransitionQueue::cancel(int64_t id) {
  auto tx = begin_write();
  const std::optional<std::string> state = locked_state_of(id);
  if (state == "queued") {
    finish_unfenced(id, "cancelled");
    drop_checkpoint(id);
  } else if (state == "running") {
    request_cancel(id);
  } else {
    return false;  // unknown or already final; nothing written
  }
  tx->commit();
  return true;
}

RetryOutcome TransitionQueue::retry(int64_t id, const std::string& model) {
  auto tx = begin_write();
  const std::optional<std::string> state = locked_state_of(id);
  if (!state) return RetryOutcome::not_found;
  // A queued job may be re-pointed (a job held under a model name or file its daemon cannot serve).
  const bool repoint = *state == "queued" && !model.empty();
  if (*state != "failed" && *state != "dead" && *state != "cancelled" && !repoint) return RetryOutcome::not_retryable;
  reset_to_queued(id, model);
  if (*state != "dead" || !model.empty()) drop_checkpoint(id);  // a dead job resumes where it stopped
  tx->commit();
  return RetryOutcome::requeued;
}

std::vector<SubmitOutcome> TransitionQueue::import_jobs(std::span<const JobCopy> copies, bool keep_ids,
                                                        const std::string& source) {
  std::vector<SubmitOutcome> out;
  out.reserve(copies.size());
  auto tx = begin_write();
  if (keep_ids && !copies.empty()) refuse_taken_ids(copies);
  int64_t created = 0;
  for (const JobCopy& c : copies) {
    out.push_back(import_one(c, keep_ids));
    created += out.back().created ? 1 : 0;
  }
  if (!source.empty() && !copies.empty()) {
    mark_page(source, keep_ids, copies.back().job.id, created, static_cast<int64_t>(copies.size()) - created);
  }
  if (keep_ids) after_kept_ids();
  tx->commit();
  return out;
}

}  // namespace ns::jobs
