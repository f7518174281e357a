#include "daemon/lib/worker.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <new>
#include <span>
#include <stdexcept>
#include <thread>
#include <utility>

#include "daemon/lib/config.h"
#include "daemon/lib/failure.h"
#include "jobs/result_stats.h"
#include "jobs/valid_utf8.h"
#include "engine/chat/chat_messages_json.h"
#include "engine/chat/chat_template.h"
#include "engine/chat/model_chat_template.h"
#include "engine/gguf/gguf_file.h"
#include "engine/kernels/kernels.h"
#include "common/error.h"

namespace ns::daemon {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double mib(uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

// What a checkpoint holds of a generation so far: every choice's tokens and,
// with logprobs, their records (engine/sampler/logprobs.h).
jobs::Checkpoint checkpoint_of(std::span<const GenerationChoice* const> choices, bool logprobs) {
  jobs::Checkpoint cp;
  std::vector<sampler::ChoiceLogprobs> records;
  for (size_t k = 0; k < choices.size(); ++k) {
    if (k == 0) cp.tokens = choices[k]->tokens;
    else cp.more_tokens.push_back(choices[k]->tokens);
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

std::string known_models(const std::map<std::string, std::string>& models) {
  if (models.empty()) return "none are configured";
  std::string list;
  for (const auto& [name, path] : models) list += (list.empty() ? "" : ", ") + name;
  return "known models: " + list;
}

// A model file this daemon's user may not reach (a directory on the way it
// cannot enter) or read is a problem of the daemon's deployment, not of the
// jobs: they stay queued (DaemonConfigError) until the permissions are fixed
// and the daemon reloaded. Names the first directory it cannot enter, as
// "does not exist" would send the user looking for a missing file.
void require_reachable(const std::string& model, const std::string& path) {
  const std::string who = " (the daemon runs as uid " + std::to_string(geteuid()) + ")";
  const std::string after = "; fix the permissions and reload the daemon (systemctl reload nightshiftd): its jobs "
                            "stay queued meanwhile";
  std::filesystem::path dir;
  for (const auto& part : std::filesystem::path(path).parent_path()) {
    dir /= part;
    if (::access(dir.c_str(), X_OK) != 0 && (errno == EACCES || errno == EPERM)) {
      throw DaemonConfigError(ErrorKind::io, "model '" + model + "': cannot enter directory " + dir.string() +
                                                 " on the way to " + path + ": " + std::strerror(errno) + who + after);
    }
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ::close(fd);
    return;
  }
  const int err = errno;
  if (err == EACCES || err == EPERM) {
    throw DaemonConfigError(ErrorKind::io, "model '" + model + "': cannot read " + path + ": " + std::strerror(err) +
                                               who + after);
  }
}

}  // namespace

// What running a job produced, before anything is written to the queue.
struct Worker::Execution {
  JobOutcome outcome = JobOutcome::failed;  // done, failed, retrying, cancelled, released or lease_lost
  jobs::JobResult result;                   // done / cancelled
  jobs::Checkpoint checkpoint;              // all completion tokens (released: the final checkpoint)
  int32_t checkpointed = 0;                 // tokens in the saved checkpoint
  std::string error_kind, error;            // failed / retrying
};

// A job in the batch.
struct Worker::Active {
  jobs::Job job;
  int handle = -1;             // its GenerationBatch handle
  int32_t resumed = 0;         // checkpointed tokens it started from
  int32_t checkpointed = 0;    // tokens in the saved checkpoint
  // The model load it paid for: the first job to join the batch after a load
  // carries it whole, the others 0 (so a batch's sum is the loads it waited for).
  double load_ms = 0;
  bool stopped = false, cancelled = false, lost = false;  // why on_progress said stop
  Clock::time_point last_poll{}, last_checkpoint{}, checkpoint_blocked_until{};
  // Its latest progress, for the batch's estimate after each step (StepRate).
  int32_t prompt_tokens = 0, prefilled = 0, generated = 0;
  double tok_s = 0;  // its rate now, from the batch's estimate
};

WorkerOptions worker_options_from(const Config& config) {
  WorkerOptions o;
  o.worker_id = effective_worker_id(config);
  o.models = config.models;
  o.config_source = config.source;
  o.claim_configured_only = config.claim_models == "configured";
  o.engine.threads = config.threads;
  o.engine.context = config.context;
  o.engine.memory_budget = config.memory_budget;
  o.engine.io_mode = config.io_mode;
  o.cpu_features = config.cpu_features;
  o.engine.max_sequences = config.max_batch;
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

Worker::Worker(jobs::Queue& queue, WorkerOptions options, const std::atomic<bool>& stop, RunStatus* status)
    : queue_(queue), options_(std::move(options)), stop_(stop), status_(status != nullptr ? *status : own_status_) {
  kernels::set_isa_override(options_.cpu_features);
}

Worker::~Worker() = default;

void Worker::update_options(WorkerOptions options) {
  options.worker_id = options_.worker_id;  // leases are held under the id the worker started with
  const auto it = options.models.find(engine_model_);
  const bool engine_stale = engine_ && (it == options.models.end() || it->second != engine_path_ ||
                                        options.engine.threads != options_.engine.threads ||
                                        options.engine.context != options_.engine.context ||
                                        options.engine.memory_budget != options_.engine.memory_budget ||
                                        options.engine.io_mode != options_.engine.io_mode ||
                                        options.engine.max_sequences != options_.engine.max_sequences);
  if (engine_stale && active_.empty()) {
    spdlog::info("model {}: its path or the engine options changed; it is loaded again for the next job",
                 engine_model_);
    drop_engine();
  }
  if (options.cpu_features != options_.cpu_features) {
    // Between jobs, like the other options; every matmul reads the path once.
    kernels::set_isa_override(options.cpu_features);
    spdlog::info("cpu_features {}: compute kernels now {}", options.cpu_features,
                 kernels::isa_name(kernels::active_isa()));
  }
  options_ = std::move(options);
  if (!blocked_.empty()) {
    spdlog::info("config reloaded: trying the model(s) this daemon could not serve again");
    blocked_.clear();
    publish_problem();
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
  spdlog::error("THIS DAEMON CANNOT SERVE MODEL {}: {}. Job(s) {} left queued, attempts not counted ({} job(s) "
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
    throw DaemonConfigError(ErrorKind::invalid_input,
                            "model '" + model + "' is not in the daemon's config (" + known_models(options_.models) +
                                "); add it under models: in " +
                                (options_.config_source.empty() ? std::string("the config")
                                                                : options_.config_source) +
                                " and reload (SIGHUP); if the name is wrong, `nightshift cancel` the jobs and "
                                "`nightshift retry --model RIGHT` them (docs/operations.md, \"A bad night\")");
  }
  const std::string& path = it->second;
  if (engine_ && engine_model_ == model && engine_path_ == path) return *engine_;

  require_reachable(model, path);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    // Transient: a model on a disk that is mounted late, or still being copied.
    throw Error(ErrorKind::io, "model '" + model + "': file " + path +
                                   " does not exist or is not a regular file (check models." + model +
                                   " in the config; the job is retried in case the disk is not mounted yet)");
  }

  // Free the previous model first: two models may not fit in memory together.
  drop_engine();
  spdlog::info("loading model {} from {} (batches of up to {} jobs)", model, path, options_.engine.max_sequences);
  const auto t0 = Clock::now();
  EngineOptions eo = options_.engine;
  for (;;) {
    try {
      engine_ = Engine::load(path, eo);
      break;
    } catch (const Error& e) {
      // The KV cache grows with the batch: a budget that cannot hold
      // max_batch contexts may hold fewer. Halve rather than fail the jobs.
      if (e.kind() != ErrorKind::invalid_input) throw;
      // Loading sees no job: an invalid_input here is the engine settings
      // (memory_budget, io_mode, context) against this model.
      if (eo.max_sequences <= 1) {
        throw DaemonConfigError(ErrorKind::invalid_input,
                                "this daemon's configuration cannot load model '" + model + "': " + e.what());
      }
      spdlog::warn("model {}: a batch of {} jobs does not fit ({}); trying {}", model, eo.max_sequences, e.what(),
                   eo.max_sequences / 2);
      eo.max_sequences /= 2;
    }
  }
  load_ms = ms_since(t0);
  try {
    chat_template_ = chat::read_chat_template(*gguf::GgufFile::open(path));
  } catch (const Error& e) {
    chat_template_.reset();
    spdlog::warn("model {}: its chat template cannot be read ({}); chat jobs for it will fail", model, e.what());
  }
  engine_model_ = model;
  engine_path_ = path;
  status_.set_loaded_model(model);
  status_.touch();
  spdlog::info("model {} loaded in {:.0f} ms", model, load_ms);
  return *engine_;
}

void Worker::drop_engine() {
  batch_.reset();  // refers to the engine's model
  unpaid_load_ms_ = 0;  // that load served no job
  engine_.reset();
  engine_model_.clear();
  engine_path_.clear();
  chat_template_.reset();
  status_.set_loaded_model("");
}

std::string Worker::render_prompt(const jobs::Job& job) {
  if (!job.spec.is_chat()) return job.spec.prompt;
  if (!chat_template_) {
    throw Error(ErrorKind::invalid_input,
                "model '" + job.spec.model + "' has no chat template (tokenizer.chat_template is not in its GGUF): "
                "it is a base model or a conversion without one; submit the job as a plain prompt "
                "(/v1/completions) or use an instruct model");
  }
  return chat::render_chat(*chat_template_, chat::chat_messages_from_json(job.spec.messages),
                           /*add_assistant=*/true);
}

// Claims jobs for the free slots: any model when the batch is empty (then
// the engine for it is loaded), else only the loaded model's.
Worker::Admitted Worker::admit() {
  // engine.max_sequences is max_batch (the KV cache's contexts); a loaded
  // batch knows how many of them are free.
  const int free_slots = batch_ ? batch_->free_slots() : std::max(1, options_.engine.max_sequences);
  last_admit_ = Clock::now();
  if (free_slots <= 0 || stop_.load()) return Admitted::none;
  // A job suspected of a crash runs by itself (Queue::claim_batch, crash blame).
  if (std::any_of(active_.begin(), active_.end(), [](const auto& a) { return a->job.run_alone; })) return Admitted::none;
  if (wanted_slots_ > 0 && free_slots < wanted_slots_ && !active_.empty()) return Admitted::none;
  if (wanted_rows_ > 0 && batch_ && batch_->largest_free_rows() < wanted_rows_ && !active_.empty())
    return Admitted::none;
  wanted_slots_ = 0;
  wanted_rows_ = 0;
  std::vector<jobs::Job> claimed;
  try {
    std::vector<std::string> servable;
    // Backing off from a model its config cannot serve: claim only the
    // configured models not blocked (a model not configured is never one).
    const auto now = Clock::now();
    const bool backing_off = std::any_of(blocked_.begin(), blocked_.end(),
                                         [&](const auto& kv) { return kv.second.until > now; });
    if (options_.claim_configured_only || backing_off) {
      for (const auto& [name, path] : options_.models) {
        const auto b = blocked_.find(name);
        if (b == blocked_.end() || b->second.until <= now) servable.push_back(name);
      }
      if (servable.empty()) return Admitted::none;  // no models: nothing this daemon may claim
    }
    claimed = queue_.claim_batch(options_.worker_id, options_.lease_ms, free_slots,
                                 active_.empty() ? std::string() : engine_model_, servable);
  } catch (const jobs::DatabaseError& e) {
    if (!e.transient()) throw;
    const int64_t delay = jobs::backoff_delay_ms(options_.database_backoff, 3);
    spdlog::warn("cannot claim a job yet: {}; trying again in {} ms", e.what(), delay);
    if (active_.empty()) sleep_unless_stopped(delay);
    return Admitted::database_unavailable;
  }
  if (claimed.empty()) return Admitted::none;

  if (active_.empty()) {
    try {
      double load_ms = 0;
      engine_for(claimed.front().spec.model, load_ms);
      unpaid_load_ms_ += load_ms;
      if (!batch_) batch_ = engine_->open_batch();
      unblock(claimed.front().spec.model);
    } catch (const DaemonConfigError& e) {
      // Not the jobs' fault: they go back, this daemon stays away from the model for a while.
      Execution ex;
      ex.outcome = JobOutcome::unservable;
      ex.error = e.what();  // the attempt's error; its kind is daemon_config (Queue::release)
      for (const jobs::Job& job : claimed) end(job, ex);
      block(claimed.front().spec.model, e.what(), claimed);
      return Admitted::some;
    } catch (const Error& e) {
      // Every claimed job names this model: they share its fate.
      Execution ex;
      ex.outcome = is_transient_failure(e) ? JobOutcome::retrying : JobOutcome::failed;
      ex.error_kind = error_kind_name(e.kind());
      ex.error = e.what();
      if (e.kind() == ErrorKind::io) drop_engine();  // the file may have changed: load it afresh next time
      for (const jobs::Job& job : claimed) end(job, ex);
      return Admitted::some;
    }
  }
  for (const jobs::Job& job : claimed) start(job);
  return Admitted::some;
}

// One claimed job joins the batch (or ends at once: bad input, stop).
void Worker::start(const jobs::Job& job) {
  std::vector<int32_t> resume;
  std::vector<GenerationChoice> resume_more;
  sampler::ChoiceLogprobs resume_logprobs;
  int32_t resumed_total = 0;
  try {
    if (std::optional<jobs::Checkpoint> cp =
            persist("read the checkpoint", job.id, [&] { return queue_.checkpoint(job.id); })) {
      // Each choice's tokens with, for a logprobs job, their records (the
      // engine replays a choice only as far as its records go).
      std::vector<sampler::ChoiceLogprobs> records;
      try {
        records = sampler::decode_logprobs(cp->logprobs);
      } catch (const std::invalid_argument& e) {
        spdlog::error("job {}: the logprobs of its checkpoint cannot be read, starting over: {}", job.id, e.what());
        cp = jobs::Checkpoint{};
      }
      const auto record = [&](size_t k) { return k < records.size() ? records[k] : sampler::ChoiceLogprobs{}; };
      resumed_total = checkpoint_tokens(*cp);
      resume = std::move(cp->tokens);
      resume_logprobs = record(0);
      for (size_t k = 0; k < cp->more_tokens.size(); ++k) {
        GenerationChoice c;
        c.tokens = std::move(cp->more_tokens[k]);
        c.logprobs = record(k + 1);
        resume_more.push_back(std::move(c));
      }
    }
  } catch (const jobs::DatabaseError& e) {  // a damaged checkpoint row costs the saved work, not the daemon
    spdlog::error("job {}: its checkpoint cannot be read, starting over: {}", job.id, e.what());
  }
  spdlog::info("job {} running: model {}, priority {}, attempt {} ({} of at most {}), waited {} ms{}{}{}", job.id,
               job.spec.model, job.spec.priority, job.attempt, job.attempts, job.spec.max_attempts,
               job.started_ms - job.created_ms,
               resumed_total == 0 ? "" : ", resuming from " + std::to_string(resumed_total) + " checkpointed tokens",
               active_.empty() ? "" : ", joining a batch of " + std::to_string(active_.size()),
               job.run_alone ? ", alone (a daemon died while it ran beside others)" : "");
  // Progress counts every choice's tokens: n choices may take n * max_tokens.
  status_.start_job(job.lease(), job.spec.model, job.spec.sampling.max_tokens * job.spec.sampling.n, resumed_total);

  auto a = std::make_unique<Active>();
  a->job = job;
  a->resumed = a->checkpointed = resumed_total;
  a->last_poll = a->last_checkpoint = Clock::now();
  // Stopping, or a model that fits fewer jobs than were claimed for it (its
  // budget halved max_batch at load): back to the queue, attempt given back.
  // A job of n choices needs n free slots (more than the batch has at all is
  // refused by the engine below, naming the fix).
  const int slots = batch_->free_slots() + batch_->active();
  const int needed = std::max(1, std::min(job.spec.sampling.n, slots));
  if (stop_.load() || batch_->free_slots() < needed) {
    if (!stop_.load()) wanted_slots_ = std::max(wanted_slots_, needed);
    Execution ex;
    ex.outcome = JobOutcome::released;
    ex.checkpointed = a->checkpointed;
    end(job, ex);
    return;
  }
  Active& act = *a;
  GenerationRequest request;
  request.params = job.spec.sampling;
  request.resume = std::move(resume);
  request.resume_logprobs = std::move(resume_logprobs);
  request.resume_more = std::move(resume_more);
  request.keep_tail = jobs::is_document_job(job.spec);
  request.on_progress = [this, &act](const GenerationProgress& p) {
    status_.touch();
    const jobs::Job& job = act.job;
    if (stop_.load()) {
      act.stopped = true;
      return false;
    }
    if (status_.lease_lost(job.id)) {
      act.lost = true;
      return false;
    }
    const auto now = Clock::now();
    if (now - act.last_poll >= std::chrono::milliseconds(options_.cancel_poll_ms)) {
      act.last_poll = now;
      try {
        act.cancelled = queue_.cancel_requested(job.id);
      } catch (const Error& e) {
        // Never throw through the engine; a broken database shows up at the final write.
        spdlog::warn("job {}: cannot check for cancellation: {}", job.id, e.what());
      }
      if (act.cancelled) return false;
    }
    const int32_t unsaved = p.generated - act.checkpointed;
    const bool by_count = options_.checkpoint_tokens > 0 && unsaved >= options_.checkpoint_tokens;
    const bool by_time = options_.checkpoint_interval_ms > 0 &&
                         now - act.last_checkpoint >= std::chrono::milliseconds(options_.checkpoint_interval_ms);
    if (p.tokens != nullptr && unsaved > 0 && (by_count || by_time) && now >= act.checkpoint_blocked_until) {
      act.last_checkpoint = now;
      try {
        if (!queue_.save_checkpoint(job.lease(), checkpoint_of(p.choices, job.spec.sampling.logprobs),
                                    options_.lease_ms)) {
          act.lost = true;
          return false;
        }
        act.checkpointed = p.generated;
      } catch (const Error& e) {
        // A locked database or a full disk: generation goes on, the next
        // try waits a while (each try may block for the busy timeout).
        act.checkpoint_blocked_until = Clock::now() + std::chrono::seconds(5);
        spdlog::warn("job {}: checkpoint at {} tokens not saved (next try in 5 s): {}", job.id, p.generated,
                     e.what());
      }
    }
    act.prompt_tokens = p.prompt_tokens;
    act.prefilled = p.prefilled;
    act.generated = p.generated;
    const bool decoding = p.prefilled >= p.prompt_tokens && p.generated > act.resumed;
    status_.progress(job.id, p.prompt_tokens, p.prefilled, p.generated, decoding ? act.tok_s : 0);
    if (observer_) observer_(job, p);
    return true;
  };
  try {
    // Rows may have been written by hand or by an older client: check again.
    if (std::string problem = jobs::spec_problem(job.spec); !problem.empty()) {
      throw Error(ErrorKind::invalid_input, problem);
    }
    request.prompt = render_prompt(job);
    act.handle = batch_->add(std::move(request));
    if (act.handle == GenerationBatch::kNoRoom) {
      // The KV pool lacks its rows while the others run: back to the queue
      // (attempt given back), claimed again once they are free.
      wanted_rows_ = std::max(wanted_rows_, batch_->refused_rows());
      spdlog::info("job {}: needs {} tokens of KV cache, {} free beside {} running job(s); it waits for them",
                   job.id, batch_->refused_rows(), batch_->largest_free_rows(), active_.size());
      Execution ex;
      ex.outcome = JobOutcome::released;
      ex.checkpointed = a->checkpointed;
      end(job, ex);
      return;
    }
  } catch (const Error& e) {  // this job alone: bad input, a prompt longer than the context, ...
    Execution ex;
    ex.outcome = is_transient_failure(e) ? JobOutcome::retrying : JobOutcome::failed;
    ex.error_kind = error_kind_name(e.kind());
    ex.error = e.what();
    end(job, ex);
    return;
  }
  if (active_.empty()) totals_ = RunTotals{Clock::now()};
  ++totals_.jobs;
  a->load_ms = std::exchange(unpaid_load_ms_, 0.0);
  active_.push_back(std::move(a));
  totals_.max_size = std::max(totals_.max_size, static_cast<int>(active_.size()));
}

// One forward pass for every job in the batch; jobs that ended leave it.
void Worker::step() {
  const auto t0 = Clock::now();
  try {
    batch_->step();
  } catch (const Error& e) {
    Execution ex;
    ex.outcome = is_transient_failure(e) ? JobOutcome::retrying : JobOutcome::failed;
    ex.error_kind = error_kind_name(e.kind());
    ex.error = e.what();
    fail_all(ex, e.kind() == ErrorKind::io || e.kind() == ErrorKind::internal);
    return;
  } catch (const std::bad_alloc&) {
    // Memory may be free again later (another process), so this is worth a retry.
    Execution ex;
    ex.outcome = JobOutcome::retrying;
    ex.error_kind = error_kind_name(ErrorKind::internal);
    ex.error = "out of memory while running the job; lower `context` or `max_batch`, or use a smaller model";
    fail_all(ex, true);
    return;
  } catch (const std::exception& e) {
    Execution ex;
    ex.outcome = JobOutcome::failed;
    ex.error_kind = error_kind_name(ErrorKind::internal);
    ex.error = std::string("internal error: ") + e.what();
    fail_all(ex, true);
    return;
  }
  const int64_t size = static_cast<int64_t>(active_.size());
  ++totals_.steps;
  const BatchStepStats& st = batch_->last_step();
  rate_.add(t0, Clock::now(), st);
  spdlog::debug("step {}: {} job(s), {} tokens ({} prefill), {} experts ({} read, {} cached), {:.1f} MiB read, "
                "{:.1f} ms ({:.1f} ms waiting for reads)",
                totals_.steps, size, st.tokens, st.prefill_tokens, st.experts_used, st.experts_read,
                st.experts_cached, mib(st.bytes_read), ms_since(t0), 1e3 * st.io_wait_s);
  for (auto& [handle, gen] : batch_->take_finished()) {
    auto it = std::find_if(active_.begin(), active_.end(), [&](const auto& a) { return a->handle == handle; });
    if (it == active_.end()) continue;  // not ours (cannot happen: every request is a job)
    std::unique_ptr<Active> a = std::move(*it);
    active_.erase(it);
    finish(*a, std::move(gen));
    slot_freed_ = true;  // the next queued job joins at the next step
  }
  estimate();  // for the jobs still in the batch
  if (active_.empty() && totals_.steps > 0) {
    const double secs = std::chrono::duration<double>(Clock::now() - totals_.started).count();
    const BatchRunStats& run = batch_->totals();
    spdlog::info("batch run: {} job(s) (at most {} together) in {} steps, {} tokens in {:.1f} s = {:.2f} tok/s "
                 "aggregate, {:.1f} MiB read ({:.2f} MiB per token, {:.2f} GiB/s while reading), {:.0f}% of the "
                 "time waiting for reads, expert cache hits {:.0f}%",
                 totals_.jobs, totals_.max_size, totals_.steps, totals_.tokens, secs,
                 secs > 0 ? totals_.tokens / secs : 0, mib(run.bytes_read),
                 totals_.tokens > 0 ? mib(run.bytes_read) / static_cast<double>(totals_.tokens) : 0,
                 run.read_gib_s(), 100 * run.io_share(), 100 * run.cache_hit_rate());
    batch_->reset_totals();
    totals_ = RunTotals{};
    rate_.reset();
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
  const std::vector<StepRate::Estimate> est = rate_.estimate(jobs);
  for (size_t i = 0; i < active_.size(); ++i) {
    Active& a = *active_[i];
    a.tok_s = est[i].tok_s;
    status_.estimate(a.job.id, a.prefilled >= a.prompt_tokens && a.generated > a.resumed ? a.tok_s : 0,
                     est[i].eta_s.value_or(-1));
  }
}

void Worker::finish(Active& a, GenerationResult gen) {
  const jobs::Job& job = a.job;
  Execution ex;
  ex.checkpointed = a.checkpointed;
  jobs::JobResult& r = ex.result;
  r.text = jobs::to_valid_utf8(gen.text);
  r.finish_reason = gen.finish_reason;
  r.prompt_tokens = gen.stats.prompt_tokens;
  r.completion_tokens = gen.stats.completion_tokens;
  r.queue_wait_ms = static_cast<double>(job.started_ms - job.created_ms);
  // The engine reports load time it spent inside generation (lazy loading),
  // the worker the time Engine::load took; a job pays for whichever happened.
  r.load_ms = a.load_ms + gen.stats.load_ms;
  jobs::copy_engine_stats(gen.stats, r);  // the rest of jobs/result_stats.h's table
  r.peak_rss_bytes = gen.stats.peak_rss_bytes != 0 ? gen.stats.peak_rss_bytes : peak_rss_bytes();
  r.prompt_tokens_dropped = gen.prompt_tokens_dropped;
  std::vector<const GenerationChoice*> choices = {&gen};
  for (const GenerationChoice& c : gen.more_choices) {
    choices.push_back(&c);
    r.more_choices.push_back({jobs::to_valid_utf8(c.text), c.finish_reason, static_cast<int32_t>(c.tokens.size())});
  }
  ex.checkpoint = checkpoint_of(choices, job.spec.sampling.logprobs);
  if (job.spec.sampling.logprobs) {  // the same records, every token of every choice, with their texts
    std::vector<sampler::ChoiceLogprobs> records;
    for (const GenerationChoice* c : choices) records.push_back(c->logprobs);
    r.logprobs = sampler::encode_logprobs(records, &gen.pieces);
  }
  totals_.tokens += r.completion_tokens - a.resumed;
  // A job that reached its end on the same token the stop or cancel was
  // noticed is simply done.
  if (r.finish_reason == "error") {  // this job alone (its grammar allows nothing the model can write)
    ex.outcome = JobOutcome::failed;
    ex.error_kind = error_kind_name(ErrorKind::invalid_input);
    ex.error = gen.error;
  } else if (r.finish_reason != "cancelled") {
    ex.outcome = JobOutcome::done;
  } else if (a.lost) {
    ex.outcome = JobOutcome::lease_lost;
  } else if (a.stopped) {
    ex.outcome = JobOutcome::released;
  } else if (a.cancelled) {
    ex.outcome = JobOutcome::cancelled;
  } else {
    ex.outcome = JobOutcome::failed;
    ex.error_kind = error_kind_name(ErrorKind::internal);
    ex.error = "internal error: the engine reported a cancellation nobody asked for";
  }
  end(job, ex);
}

// The batch's forward pass failed: every job in it shares the failure.
void Worker::fail_all(const Execution& failure, bool drop) {
  std::vector<std::unique_ptr<Active>> jobs = std::move(active_);
  active_.clear();
  batch_.reset();  // its state is unknown now; reopened at the next admission
  if (drop) drop_engine();
  totals_ = RunTotals{};
  rate_.reset();
  for (auto& a : jobs) {
    Execution ex = failure;
    ex.checkpointed = a->checkpointed;
    end(a->job, ex);
  }
}

// Writes the job's end to the queue and takes it off the status.
void Worker::end(const jobs::Job& job, const Execution& ex) {
  JobOutcome outcome = JobOutcome::lease_lost;
  try {
    outcome = record(job, ex);
  } catch (...) {
    status_.end_job(job.id);
    throw;
  }
  status_.end_job(job.id);
  outcomes_.push_back(outcome);
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
        spdlog::info("job {} released back to the queue (shutting down) with {} tokens checkpointed", job.id,
                     std::max(checkpoint_tokens(ex.checkpoint), ex.checkpointed));
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
        "prefill {:.1f} ms ({:.2f} tok/s), decode {:.1f} ms ({:.2f} tok/s), batch {:.1f} jobs on average, "
        "peak_rss {:.1f} MiB, read {:.1f} MiB at {:.2f} GiB/s, io_wait {:.0f} ms, compute {:.0f} ms, "
        "cache hits {:.0f}%, prefetch accuracy {:.0f}%",
        job.id, job.spec.model, r.prompt_tokens, r.completion_tokens, r.queue_wait_ms, r.load_ms, r.prefill_ms,
        r.prefill_tok_s, r.decode_ms, r.decode_tok_s, r.avg_batch_size, mib(r.peak_rss_bytes), mib(r.bytes_read),
        r.read_gib_s, r.io_wait_ms, r.compute_ms, 100 * r.cache_hit_rate, 100 * r.prefetch_accuracy);
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

bool Worker::work_left() {
  try {
    const jobs::QueueCounts c = queue_.counts();
    // Running jobs are not ours here (the batch is empty): another daemon's,
    // or a dead one's under an unexpired lease. Those are taken over once
    // the lease expires (recover_orphans), so the drain waits for them.
    if (c.running > 0 && !waiting_for_others_) {
      spdlog::info("drain: {} job(s) running under another worker; waiting until they end or their leases expire "
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
            spdlog::error("drained what this daemon can serve; jobs it cannot serve are left queued: {}",
                          status_.snapshot().problem);
          }
          return claimed;
        }
        sleep_unless_stopped(options_.poll_interval_ms);
        break;
      case JobOutcome::database_unavailable:
        break;  // run_next waited already
      case JobOutcome::unservable:
        break;  // not an end: the job is still queued
      default:
        ++claimed;
        break;
    }
  }
  return claimed;
}

}  // namespace ns::daemon
