#include "daemon/lib/outcome_writer.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "daemon/lib/progress_policy.h"
#include "jobs/result_stats.h"
#include "common/utf8.h"

namespace ns::daemon {
namespace {

double mib(uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

}  // namespace

Execution finished(const RunningJob& run, const GenerationResult& gen) {
  const jobs::Job& job = run.job;
  Execution ex;
  ex.checkpointed = run.checkpointed;
  jobs::JobResult& r = ex.result;
  r.text = to_valid_utf8(gen.text);
  r.finish_reason = gen.finish_reason;
  r.prompt_tokens = gen.stats.prompt_tokens;
  r.completion_tokens = gen.stats.completion_tokens;
  r.queue_wait_ms = static_cast<double>(job.started_ms - job.created_ms);
  // The engine reports load time it spent inside generation (lazy loading),
  // the worker the time Engine::load took; a job pays for whichever happened.
  r.load_ms = run.load_ms + gen.stats.load_ms;
  jobs::copy_engine_stats(gen.stats, r);  // the rest of jobs/result_stats.h's table
  r.prompt_tokens_dropped = gen.prompt_tokens_dropped;
  std::vector<const GenerationChoice*> choices = {&gen};
  for (const GenerationChoice& c : gen.more_choices) {
    choices.push_back(&c);
    r.more_choices.push_back({to_valid_utf8(c.text), c.finish_reason, static_cast<int32_t>(c.tokens.size())});
  }
  ex.checkpoint = checkpoint_of(choices, job.spec.sampling.logprobs);
  if (job.spec.sampling.logprobs) {  // the same records, every token of every choice, with their texts
    std::vector<sampler::ChoiceLogprobs> records;
    for (const GenerationChoice* c : choices) records.push_back(c->logprobs);
    r.logprobs = sampler::encode_logprobs(records, &gen.pieces);
  }
  // The job is judged by every choice, not choice 0 alone: with n > 1 a drain
  // or a lost lease can cut one choice after another has finished (docs/fleet.md,
  // finding 3). A job whose choices all reached their end, some on the same
  // token the stop or cancel was noticed, is simply done.
  const auto ended = [&](const char* reason) {
    return std::find_if(choices.begin(), choices.end(),
                        [&](const GenerationChoice* c) { return c->finish_reason == reason; });
  };
  if (const auto bad = ended("error"); bad != choices.end()) {
    // This job alone (its grammar allows nothing the model can write).
    ex.outcome = JobOutcome::failed;
    ex.error_kind = error_kind_name(ErrorKind::invalid_input);
    ex.error = (*bad)->error;
  } else if (ended("cancelled") == choices.end()) {
    ex.outcome = JobOutcome::done;
  } else if (run.lost) {
    ex.outcome = JobOutcome::lease_lost;
  } else if (run.stopped) {
    ex.outcome = JobOutcome::released;
  } else if (run.cancelled) {
    ex.outcome = JobOutcome::cancelled;
  } else {
    ex.outcome = JobOutcome::failed;
    ex.error_kind = error_kind_name(ErrorKind::internal);
    ex.error = "internal error: the engine reported a cancellation nobody asked for";
  }
  return ex;
}

JobOutcome OutcomeWriter::write(const jobs::Job& job, const Execution& ex) {
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
        spdlog::warn("job {} attempt {} failed ({}), retrying after a backoff: {}", job.id, job.attempt, ex.error_kind,
                     ex.error);
      }
      break;
    }
    case JobOutcome::unservable:
      held = persist("release the job", job.id, [&] { return queue_.release(lease, ex.error); });
      if (held) spdlog::warn("job {} (model {}) left queued, its attempt not counted", job.id, job.spec.model);
      break;
    case JobOutcome::released:
      if (checkpoint_tokens(ex.checkpoint) > ex.checkpointed) {
        held = persist("save the checkpoint", job.id,
                       [&] { return queue_.save_checkpoint(lease, ex.checkpoint, options_.lease_ms); });
      }
      if (held) held = persist("release the job", job.id, [&] { return queue_.release(lease); });
      if (held) {
        spdlog::info("job {} released back to the queue ({}) with {} tokens checkpointed", job.id,
                     ex.error.empty() ? "shutting down" : ex.error,
                     std::max(checkpoint_tokens(ex.checkpoint), ex.checkpointed));
      }
      break;
    case JobOutcome::lease_lost: held = false; break;
    case JobOutcome::none_queued:
    case JobOutcome::dead:
    case JobOutcome::database_unavailable: break;
  }
  if (!held) {
    spdlog::error(
        "job {}: attempt {} no longer holds its lease (it expired and another worker took the job "
        "over, or the row was changed by hand); its outcome ({}) is dropped",
        job.id, job.attempt, outcome_name(ex.outcome));
    return JobOutcome::lease_lost;
  }
  if (outcome == JobOutcome::done || outcome == JobOutcome::cancelled) {
    spdlog::info(
        "job {} stats: model {}, prompt {} tok, completion {} tok, queue_wait {:.0f} ms, load {:.0f} ms, "
        "prefill {:.1f} ms ({:.2f} tok/s), decode {:.1f} ms ({:.2f} tok/s), batch {:.1f} jobs on average, "
        "peak_rss {:.1f} MiB, read {:.1f} MiB at {:.2f} GiB/s, io_wait {:.0f} ms, compute {:.0f} ms, "
        "cache hits {:.0f}%, prefetch accuracy {:.0f}%",
        job.id, job.spec.model, r.prompt_tokens, r.completion_tokens, r.queue_wait_ms, r.load_ms, r.prefill_ms,
        r.prefill_tok_s, r.decode_ms, r.decode_tok_s, r.avg_batch_size, mib(r.peak_rss_bytes), mib(r.bytes_read),
        r.read_gib_s, r.io_wait_ms, r.compute_ms, 100 * r.cache_hit_rate, 100 * r.prefetch_accuracy);
  }
  return outcome;
}

}  // namespace ns::daemon
