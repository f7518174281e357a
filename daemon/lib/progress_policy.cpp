#include "daemon/lib/progress_policy.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <stdexcept>
#include <utility>
#include <vector>

#include "common/error.h"

namespace ns::daemon {

jobs::Checkpoint checkpoint_of(std::span<const GenerationChoice* const> choices, bool logprobs) {
  jobs::Checkpoint cp;
  std::vector<sampler::ChoiceLogprobs> records;
  for (size_t k = 0; k < choices.size(); ++k) {
    if (k == 0)
      cp.tokens = choices[k]->tokens;
    else
      cp.more_tokens.push_back(choices[k]->tokens);
    if (logprobs) records.push_back(choices[k]->logprobs);
  }
  cp.logprobs = sampler::encode_logprobs(records);
  return cp;
}

int32_t checkpoint_tokens(const jobs::Checkpoint& cp) {
  size_t n = cp.tokens.size();
  for (const auto& t : cp.more_tokens) n += t.size();
  return static_cast<int32_t>(n);
}

int32_t resume_from(const jobs::Job& job, std::optional<jobs::Checkpoint> cp, GenerationRequest& request) {
  if (!cp) return 0;
  std::vector<sampler::ChoiceLogprobs> records;
  try {
    records = sampler::decode_logprobs(cp->logprobs);
  } catch (const std::invalid_argument& e) {
    spdlog::error("job {}: the logprobs of its checkpoint cannot be read, starting over: {}", job.id, e.what());
    cp = jobs::Checkpoint{};
  }
  const auto record = [&](size_t k) { return k < records.size() ? records[k] : sampler::ChoiceLogprobs{}; };
  const int32_t resumed = checkpoint_tokens(*cp);
  request.resume = std::move(cp->tokens);
  request.resume_logprobs = record(0);
  for (size_t k = 0; k < cp->more_tokens.size(); ++k) {
    GenerationChoice c;
    c.tokens = std::move(cp->more_tokens[k]);
    c.logprobs = record(k + 1);
    request.resume_more.push_back(std::move(c));
  }
  return resumed;
}

bool ProgressPolicy::on_progress(RunningJob& run, const GenerationProgress& p) {
  using Clock = RunningJob::Clock;
  status_.touch();
  const jobs::Job& job = run.job;
  if (stop_.load()) {
    run.stopped = true;
    return false;
  }
  if (status_.lease_lost(job.id)) {
    run.lost = true;
    return false;
  }
  const auto now = Clock::now();
  if (now - run.last_poll >= std::chrono::milliseconds(options_.cancel_poll_ms)) {
    run.last_poll = now;
    try {
      run.cancelled = queue_.cancel_requested(job.id);
    } catch (const Error& e) {
      // Never throw through the engine; a broken database shows up at the final write.
      spdlog::warn("job {}: cannot check for cancellation: {}", job.id, e.what());
    }
    if (run.cancelled) return false;
  }
  const int32_t unsaved = p.generated - run.checkpointed;
  const bool by_count = options_.checkpoint_tokens > 0 && unsaved >= options_.checkpoint_tokens;
  const bool by_time = options_.checkpoint_interval_ms > 0 &&
                       now - run.last_checkpoint >= std::chrono::milliseconds(options_.checkpoint_interval_ms);
  // A model file that took a SIGBUS during this pass (#30 F) made its tokens from zeros: the worker discards the
  // pass after the step, so nothing of it may reach a checkpoint first (a resume would replay it).
  if (p.tokens != nullptr && unsaved > 0 && (by_count || by_time) && now >= run.checkpoint_blocked_until &&
      damaged_model_files().empty()) {
    run.last_checkpoint = now;
    try {
      if (!queue_.save_checkpoint(job.lease(), checkpoint_of(p.choices, job.spec.sampling.logprobs),
                                  options_.lease_ms)) {
        run.lost = true;
        return false;
      }
      run.checkpointed = p.generated;
    } catch (const Error& e) {
      // A locked database or a full disk: generation goes on, the next
      // try waits a while (each try may block for the busy timeout).
      run.checkpoint_blocked_until = Clock::now() + std::chrono::seconds(5);
      spdlog::warn("job {}: checkpoint at {} tokens not saved (next try in 5 s): {}", job.id, p.generated, e.what());
    }
  }
  run.prompt_tokens = p.prompt_tokens;
  run.prefilled = p.prefilled;
  run.generated = p.generated;
  const bool decoding = p.prefilled >= p.prompt_tokens && p.generated > run.resumed;
  status_.progress(job.id, p.prompt_tokens, p.prefilled, p.generated, decoding ? run.tok_s : 0);
  if (observer_) observer_(job, p);
  return true;
}

}  // namespace ns::daemon
