#include "daemon/lib/job_run.h"

#include <utility>

#include "daemon/lib/config.h"
#include "daemon/lib/failure.h"

namespace ns::daemon {

WorkerOptions worker_options_from(const Config& config) {
  WorkerOptions o;
  o.worker_id = effective_worker_id(config);
  o.models = config.models;
  o.chat_templates = config.chat_templates;
  o.config_source = config.source;
  o.claim_configured_only = config.claim_models == "configured";
  o.engine = config.engine;  // every engine key at once (engine/api/engine_options.h)
  o.cpu_features = config.cpu_features;
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
    case JobOutcome::unservable: return "unservable";
  }
  return "failed";
}

Execution failure_of(const Error& e) {
  Execution ex;
  ex.outcome = is_transient_failure(e) ? JobOutcome::retrying : JobOutcome::failed;
  ex.error_kind = error_kind_name(e.kind());
  ex.error = e.what();
  return ex;
}

Execution ending(JobOutcome outcome, int32_t checkpointed, std::string error) {
  Execution ex;
  ex.outcome = outcome;
  ex.checkpointed = checkpointed;
  ex.error = std::move(error);
  return ex;
}

}  // namespace ns::daemon
