// nightshift migrate-queue --from DB --to DB: moves a queue to another
// database (a SQLite file to PostgreSQL when one machine becomes a fleet, or
// back), with every job's state, result, attempt history and checkpoint.
//
// Into an empty queue the jobs keep their ids (ids printed by `submit` and
// used in scripts keep naming the same jobs; later submits get higher ids).
// Into a queue that already has jobs only with --append: new ids, and a job
// whose idempotency key is already there is skipped. Jobs are copied in
// pages, one transaction each, which also records in the target how far the
// copy from this source has come (Queue::MigrationMark, keyed by the source's
// canonical path or password-less URL): a run cut off at any point (killed,
// a lost connection, a refused row) leaves every page before it and nothing
// of the page it was in; the same command run again says so and continues
// after the last committed page, and a later --append run copies only the
// jobs the source got since. No job is copied twice, with or without an
// idempotency key. The mark is keyed by where the source is, so a copy of
// the file (moved, restored from a backup) is a new source to it: --append
// therefore also skips every job the target already holds by its fingerprint
// (creation time to the millisecond and whole input, which a copy keeps),
// and a rerun from a copy adds nothing. Running jobs are copied as running: their
// lease expires in the new queue and any daemon there recovers them (from
// their checkpoint); a job still running under a live lease means a daemon
// is still working on the source, so it is refused unless --allow-running.
#include "daemon/cli/migrate_queue_command.h"

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "daemon/cli/command_support.h"
#include "daemon/cli/commands.h"
#include "daemon/cli/sha256.h"
#include "common/redact.h"
#include "jobs/open_queue.h"
#include "jobs/pg_conn.h"
#include "jobs/queue.h"
#include "jobs/time_format.h"

namespace ns::cli {
namespace {

struct MigrateArgs {
  std::string from, to;
  bool append = false;
  bool allow_running = false;
  int32_t page = 500;
};

int64_t total(const jobs::QueueCounts& c) { return c.queued + c.running + c.done + c.failed + c.cancelled + c.dead; }

std::string shown(const std::string& database) {
  return jobs::is_postgres_url(database) ? redact_secrets(database) : database;
}

std::string counts_text(const jobs::QueueCounts& c) {
  return std::to_string(c.queued) + " queued, " + std::to_string(c.running) + " running, " + std::to_string(c.done) +
         " done, " + std::to_string(c.failed) + " failed, " + std::to_string(c.cancelled) + " cancelled, " +
         std::to_string(c.dead) + " dead";
}

std::unique_ptr<jobs::Queue> open(const std::string& database) {
  jobs::SqliteOptions options;
  options.integrity_check = jobs::IntegrityCheck::quick;  // never copy from (or into) a damaged file
  return jobs::open_queue(database, options);
}

// Running jobs whose lease has not expired: some daemon still holds them.
void refuse_live_leases(jobs::Queue& source, const std::string& from) {
  jobs::ListFilter running;
  running.state = jobs::JobState::running;
  running.limit = 0;
  const int64_t now = jobs::now_epoch_ms();
  int64_t live = 0;
  std::string example;
  for (const jobs::Job& j : source.list(running)) {
    if (j.lease_expires_ms <= now) continue;
    if (live++ == 0) example = "job " + std::to_string(j.id) + " on worker " + j.worker;
  }
  if (live == 0) return;
  throw CommandError{kFailure, std::to_string(live) + " job(s) in " + shown(from) +
                                   " are running under a live lease (" + example +
                                   "): a daemon is still working on this queue. Stop every nightshiftd "
                                   "that uses it first (systemctl stop nightshiftd), or pass --allow-running to "
                                   "copy them as running (they are recovered in the new queue once their lease "
                                   "expires)"};
}

// A job as it was submitted: its creation time and whole input, the same in
// every copy of its queue (migrate-queue keeps created_ms) and hardly ever in
// two jobs submitted apart.
std::string fingerprint(const jobs::Job& j) {
  Sha256 h;
  const auto add = [&](const std::string& s) { h.update(std::to_string(s.size())).update(":").update(s); };
  for (const std::string& field :
       {std::to_string(j.created_ms), j.spec.model, j.spec.prompt, j.spec.messages, j.spec.batch, j.spec.custom_id,
        j.spec.source_path, std::to_string(j.spec.source_line), std::to_string(j.spec.sampling.seed),
        j.spec.idempotency_key}) {
    add(field);
  }
  const std::array<uint8_t, 32> d = h.finish();
  return std::string(d.begin(), d.end());
}

// The fingerprints of every job in `queue`.
std::set<std::string> fingerprints(jobs::Queue& queue, int32_t page) {
  std::set<std::string> out;
  for (int64_t after = 0;;) {
    const std::vector<jobs::Queue::JobCopy> jobs = queue.export_jobs(after, page);
    if (jobs.empty()) return out;
    after = jobs.back().job.id;
    for (const jobs::Queue::JobCopy& c : jobs) out.insert(fingerprint(c.job));
  }
}

// What names the source in the target's MigrationMark: the same queue under
// another spelling (a relative path, a symlink) is the same source.
std::string source_identity(const std::string& database) {
  if (jobs::is_postgres_url(database)) return redact_secrets(database);
  std::error_code ec;
  const std::filesystem::path canonical = std::filesystem::canonical(database, ec);
  return ec ? database : canonical.string();
}

// The copy mode and where this run starts, from the target's record of `source`;
// explains a resumed or continued copy on stdout.
struct Resume {
  bool keep_ids;
  int64_t after = 0;
};

Resume plan_resume(const MigrateArgs& a, const std::optional<jobs::Queue::MigrationMark>& mark, int64_t in_target) {
  if (mark && mark->finished_ms == 0) {
    std::printf(
        "resuming the copy of %s started %s, cut off after job %lld of the source (%lld job(s) copied); "
        "copying the rest\n",
        shown(a.from).c_str(), jobs::iso8601_utc(mark->started_ms).c_str(),
        static_cast<long long>(mark->last_source_id), static_cast<long long>(mark->copied));
    return {mark->keep_ids, mark->last_source_id};
  }
  if (in_target > 0 && !a.append) {
    const std::string before = mark ? " (the copy of " + shown(a.from) + " finished " +
                                          jobs::iso8601_utc(mark->finished_ms) +
                                          ": --append copies only the jobs submitted there since)"
                                    : "";
    throw CommandError{kFailure, shown(a.to) + " already holds " + std::to_string(in_target) + " job(s)" + before +
                                     "; migrate into an empty queue (the jobs keep their ids), or pass "
                                     "--append to add them under new ids (jobs whose idempotency key is already "
                                     "there are skipped)"};
  }
  if (!mark) return {!a.append, 0};
  std::printf(
      "%lld job(s) up to job %lld of %s were copied here by an earlier run (finished %s); copying only the "
      "jobs after it\n",
      static_cast<long long>(mark->copied), static_cast<long long>(mark->last_source_id), shown(a.from).c_str(),
      jobs::iso8601_utc(mark->finished_ms).c_str());
  return {!a.append, mark->last_source_id};
}

void run(const MigrateArgs& a) {
  if (a.from == a.to) throw CommandError{kUsage, "--from and --to name the same database"};
  std::error_code ec;
  if (!jobs::is_postgres_url(a.from) && !std::filesystem::exists(a.from, ec)) {
    throw CommandError{kNotFound, "database " + a.from + " does not exist; --from names the queue to copy"};
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto source = open(a.from);
  auto target = open(a.to);
  const std::string source_id = source_identity(a.from);
  const Resume resume = plan_resume(a, target->migration_mark(source_id), total(target->counts()));
  const bool keep_ids = resume.keep_ids;
  if (!a.allow_running) refuse_live_leases(*source, a.from);
  const jobs::QueueCounts source_counts = source->counts();

  // --append: what the target holds already (from this source under another path, say).
  const std::set<std::string> present = keep_ids ? std::set<std::string>() : fingerprints(*target, a.page);
  int64_t copied = 0, skipped = 0, already = 0, attempts = 0, checkpoints = 0, results = 0, after = resume.after;
  std::map<jobs::JobState, int64_t> by_state;
  // Where a run that stops here leaves both queues, and how it finishes.
  const auto cut_off = [&](int64_t copied_now, int64_t stopped_at) {
    return "; the copy is cut off: the " + std::to_string(copied_now) + " job(s) copied by this run stay in " +
           shown(a.to) + ", nothing from job " + std::to_string(stopped_at) +
           " on was copied. Run the same command again to copy the rest (it continues where this one stopped)";
  };
  while (true) {
    std::vector<jobs::Queue::JobCopy> page = source->export_jobs(after, a.page);
    if (page.empty()) break;
    after = page.back().job.id;
    already += static_cast<int64_t>(
        std::erase_if(page, [&](const jobs::Queue::JobCopy& c) { return present.count(fingerprint(c.job)) != 0; }));
    if (page.empty()) continue;
    // Rows from before NUL bytes were refused at submit (jobs/job_spec.cpp):
    // copied, PostgreSQL would change them; no queue should hold them.
    for (const jobs::Queue::JobCopy& c : page) {
      const std::string& input = c.job.spec.is_chat() ? c.job.spec.messages : c.job.spec.prompt;
      if (input.find('\0') == std::string::npos) continue;
      throw CommandError{kFailure, "job " + std::to_string(c.job.id) + " in " + shown(a.from) +
                                       " holds a NUL byte in its prompt (submitted before such prompts were refused); "
                                       "it cannot be copied unchanged. Cancel it there (nightshift cancel " +
                                       std::to_string(c.job.id) +
                                       "; then prune it), resubmit its text without the "
                                       "NUL, and run migrate-queue again" +
                                       cut_off(copied, page.front().job.id)};
    }
    std::vector<jobs::SubmitOutcome> out;
    try {
      out = target->import_jobs(page, keep_ids, source_id);
    } catch (const Error& e) {
      throw CommandError{kFailure, std::string(e.what()) + " (while copying jobs " +
                                       std::to_string(page.front().job.id) + ".." + std::to_string(after) + ")" +
                                       cut_off(copied, page.front().job.id)};
    }
    for (size_t i = 0; i < page.size(); ++i) {
      if (!out[i].created) {
        ++skipped;
        continue;
      }
      ++copied;
      ++by_state[page[i].job.state];
      attempts += static_cast<int64_t>(page[i].history.size());
      checkpoints += page[i].checkpoint ? 1 : 0;
      results += page[i].job.result ? 1 : 0;
    }
    std::fprintf(stderr, "\rmigrate-queue: %lld job(s) copied...", static_cast<long long>(copied));
  }
  std::fprintf(stderr, "\r");
  target->finish_migration(source_id, keep_ids);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::string states;
  for (const auto& [state, n] : by_state) {
    states += (states.empty() ? "" : ", ") + std::to_string(n) + " " + jobs::state_name(state);
  }
  std::printf("copied %lld job(s) from %s to %s in %.1f s%s\n", static_cast<long long>(copied), shown(a.from).c_str(),
              shown(a.to).c_str(), seconds, states.empty() ? "" : (" (" + states + ")").c_str());
  std::printf("  with %lld result(s), %lld attempt record(s), %lld checkpoint(s)\n", static_cast<long long>(results),
              static_cast<long long>(attempts), static_cast<long long>(checkpoints));
  if (skipped > 0) {
    std::printf("  skipped %lld job(s) whose idempotency key the target already had\n",
                static_cast<long long>(skipped));
  }
  if (already > 0) {
    std::printf("  skipped %lld job(s) the target already held (copied before from this queue or a copy of it)\n",
                static_cast<long long>(already));
  }
  const jobs::QueueCounts after_counts = target->counts();
  std::printf("source: %s\ntarget: %s\n", counts_text(source_counts).c_str(), counts_text(after_counts).c_str());
  if (keep_ids && total(after_counts) != total(source_counts)) {
    throw CommandError{kFailure, "the target holds " + std::to_string(total(after_counts)) + " job(s) but the source " +
                                     std::to_string(total(source_counts)) +
                                     "; was a job submitted to either while copying? Check both and run again into "
                                     "an empty queue"};
  }
  if (by_state.count(jobs::JobState::running) != 0) {
    std::printf("  the %lld running job(s) are recovered by a daemon on the target once their lease expires\n",
                static_cast<long long>(by_state[jobs::JobState::running]));
  }
}

}  // namespace

void add_migrate_queue_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<MigrateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "migrate-queue",
      "Copy every job (state, result, attempt history, checkpoint) of one queue into another, e.g. a SQLite file "
      "into PostgreSQL for a fleet of daemons (docs/fleet.md)");
  cmd->add_option("--from", a->from, "the queue to copy: a SQLite file or a postgresql:// URL")->required();
  cmd->add_option("--to", a->to, "where to: a postgresql:// URL or a SQLite file (created if needed)")->required();
  cmd->add_flag("--append", a->append,
                "the target may already hold jobs: copy under new ids, skipping jobs whose idempotency key it has");
  cmd->add_flag("--allow-running", a->allow_running,
                "copy jobs that a daemon still holds under a live lease (as running; recovered once it expires)");
  cmd->add_option("--page", a->page, "jobs per transaction")->check(CLI::Range(1, 100000));
  // Its own footer: a subcommand without one printed the top-level workflows (#31).
  cmd->footer(
      "Examples:\n"
      "  nightshift migrate-queue --from /var/lib/nightshift/nightshift.db --to postgresql://night@db/queue\n"
      "  nightshift migrate-queue --from old.db --to postgresql://night@db/queue --append\n"
      "Stopped halfway (killed, a lost connection)? Run the same command again: it resumes (docs/fleet.md).\n"
      "Exit status: 0 copied, 2 bad command line, 3 no such source file, 1 a database failure or jobs still\n"
      "running under a live lease (without --allow-running).\n");
  cmd->callback([a, &exit_code] { run_command("migrate-queue", exit_code, [&] { run(*a); }); });
}

}  // namespace ns::cli
