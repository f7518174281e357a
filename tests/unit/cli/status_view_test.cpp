// What `status` and `watch` print, from a real queue where the daemon's side
// (claim, heartbeat with progress, complete, fail, the workers table) is done
// through the queue interface.
#include <doctest/doctest.h>

#include <sstream>
#include <string>

#include "daemon/cli/command_support.h"
#include "daemon/cli/jsonl_submit.h"
#include "daemon/cli/status_view.h"
#include "daemon/lib/job_format.h"
#include "tests/unit/cli/cli_queue.h"

using namespace ns::cli;

namespace {

ns::jobs::JobSpec spec(const std::string& prompt, int32_t max_tokens, const std::string& batch = "") {
  ns::jobs::JobSpec s;
  s.model = "tiny";
  s.prompt = prompt;
  s.sampling.max_tokens = max_tokens;
  s.batch = batch;
  if (!batch.empty()) s.custom_id = prompt;
  return s;
}

bool has(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

}  // namespace

TEST_CASE("a job's progress: waiting, prefill, decode with tok/s and ETA") {
  ns::jobs::Job job;
  job.spec.sampling.max_tokens = 200;
  job.started_ms = 1'000;
  CHECK(job_progress_text(job, 6'000) == "started 5s ago, waiting for its first progress report");
  job.progress = {.prompt_tokens = 4096, .prefilled = 1024, .generated = 0, .tok_s = 0, .updated_ms = 5'000};
  CHECK(job_progress_text(job, 6'000) == "prefill 1024/4096 prompt tok");
  job.progress.eta_s = 95;  // the daemon's estimate: the prompt's rest, then 200 tokens
  CHECK(job_progress_text(job, 6'000) == "prefill 1024/4096 prompt tok, ETA 1m34s");
  // A daemon that writes no ETA (an older version): from the rate, counted down too.
  job.progress = {.prompt_tokens = 4096, .prefilled = 4096, .generated = 37, .tok_s = 3.26, .updated_ms = 5'000};
  CHECK(job_progress_text(job, 5'000) == "37/200 tok, 3.26 tok/s, ETA 50s");
  CHECK(job_progress_text(job, 6'000) == "37/200 tok, 3.26 tok/s, ETA 49s");
}

TEST_CASE("the ETA counts down between heartbeats from the daemon's estimate, not below 0") {
  ns::jobs::Job job;
  job.spec.sampling.max_tokens = 200;
  job.progress = {.prompt_tokens = 10,
                  .prefilled = 10,
                  .generated = 100,
                  .tok_s = 2.0,
                  .updated_ms = 10'000,
                  .eta_s = 40};  // the batch's step rate says 40 s, not 100 / 2.0 = 50 s
  CHECK(job_progress_text(job, 10'000) == "100/200 tok, 2.00 tok/s, ETA 40s");
  CHECK(job_progress_text(job, 14'000) == "100/200 tok, 2.00 tok/s, ETA 36s");
  CHECK(job_progress_text(job, 39'000) == "100/200 tok, 2.00 tok/s, ETA 11s");
  CHECK(job_progress_text(job, 90'000) == "100/200 tok, 2.00 tok/s, ETA 0s");
}

namespace {

// A daemon running a full batch of `n` jobs with long labels, 20 finished
// jobs, 15 batches and a second daemon: more than any terminal shows.
StatusSnapshot crowded(int n) {
  StatusSnapshot s;
  s.now_ms = 1'000'000;
  s.counts = {.queued = 9000, .running = n, .done = 990, .failed = 2};
  for (int i = 0; i < n; ++i) {
    ns::jobs::Job j;
    j.id = 10'000 + i;
    j.worker = "nightbox-with-a-long-hostname:41210";
    j.spec.model = "kimi-k2-instruct-q4";
    j.spec.batch = "reviews-2026-11-29-the-long-batch-name";
    j.spec.custom_id = "request-number-" + std::to_string(i) + "-with-a-long-custom-id";
    j.spec.sampling.max_tokens = 2000;
    j.started_ms = 900'000;
    j.progress = {.prompt_tokens = 1500,
                  .prefilled = 1500,
                  .generated = 150 * (i + 1),
                  .tok_s = 11.5,
                  .updated_ms = 998'000,
                  .eta_s = 100.0 + 10 * i};
    s.running.push_back(j);
  }
  for (int i = 0; i < 20; ++i) {
    ns::jobs::Job j;
    j.id = 9'000 + i;
    j.state = ns::jobs::JobState::done;
    j.finished_ms = 990'000;
    ns::jobs::JobResult r{.text = std::string(300, 'w'), .completion_tokens = 2000, .decode_tok_s = 11.5};
    j.result = r;
    s.recent.push_back(j);
  }
  for (int i = 0; i < 15; ++i) {
    ns::jobs::BatchSummary b;
    b.name = "batch-" + std::to_string(i) + "-with-a-name-longer-than-the-terminal-is-wide-for-sure-really";
    b.created_ms = 100'000;
    b.counts = {.queued = 100, .running = 1, .done = 10};
    s.batches.push_back(b);
  }
  for (const char* id : {"nightbox-with-a-long-hostname:41210", "otherbox:7"}) {
    ns::jobs::WorkerInfo w;
    w.id = id;
    w.model = "kimi-k2-instruct-q4";
    w.started_ms = 0;
    w.heartbeat_ms = 999'000;
    s.workers.push_back(w);
  }
  return s;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1)
    out.push_back(text.substr(start, nl - start));
  if (start < text.size()) out.push_back(text.substr(start));
  return out;
}

}  // namespace

TEST_CASE("watch's screen fits 80x24 with a batch of 8: one line per job, the batch's tok/s and ETA") {
  for (const auto& [width, height] : {std::pair{80, 24}, std::pair{60, 16}, std::pair{120, 40}}) {
    CAPTURE(width);
    const StatusSnapshot s = crowded(8);
    const std::string screen = format_status(s, StatusStyle{true, width, height});
    const std::vector<std::string> lines = lines_of(screen);
    CHECK(static_cast<int>(lines.size()) <= height - 1);  // and `watch`'s footer line
    for (const std::string& l : lines) {
      CAPTURE(l);
      CHECK(l.size() <= static_cast<size_t>(width));
    }
    CHECK(has(screen, "queue: 9000 queued, 8 running"));
    // The daemon's batch: 8 x 11.5 tok/s; the last job ends in 170 s, 2 s of it gone since the heartbeat.
    CHECK(has(screen, "8 jobs, 92.00 tok/s, ETA 2m48s"));
    CHECK(has(screen, " shown\n"));  // sections cut to what fits say so
    if (height >= 24) {
      for (const ns::jobs::Job& j : s.running) CHECK(has(screen, "  " + std::to_string(j.id) + " "));
    }
  }
  // Without a height, status prints everything.
  const std::string all = format_status(crowded(8), StatusStyle{true, 80});
  CHECK(lines_of(all).size() > 40);
  CHECK(has(all, "batch: 8 jobs, 92.00 tok/s, ETA 2m48s"));
}

TEST_CASE("a daemon is up, stopped, or silent") {
  ns::jobs::WorkerInfo w;
  w.started_ms = 0;
  w.heartbeat_ms = 3'600'000;
  CHECK(worker_state_text(w, 3'605'000) == "up 1h00m");
  CHECK(worker_state_text(w, 3'600'000 + 10 * 60'000) == "silent for 10m00s (crashed or hung?)");
  w.stopped_ms = 3'600'000;
  CHECK(worker_state_text(w, 3'600'000 + 125'000) == "stopped 2m05s ago");
}

TEST_CASE("status shows counts, running jobs with progress, the last finished, batches and daemons") {
  ns::test::CliQueue db;
  auto& q = *db.queue;
  q.submit(spec("first", 10, "nightly"));
  q.submit(spec("second", 200, "nightly"));
  q.submit(spec("third", 50));
  db.finish_next("It was a dark and stormy night", 10);
  auto running = q.claim("host:42", 60'000);
  REQUIRE(running);
  q.heartbeat(running->lease(), 60'000,
              ns::jobs::JobProgress{.prompt_tokens = 12, .prefilled = 12, .generated = 37, .tok_s = 3.26});
  ns::jobs::WorkerInfo w;
  w.id = "host:42";
  w.host = "host";
  w.pid = 42;
  w.model = "tiny";
  w.version = "nightshift 0.1.0";
  q.register_worker(w);
  const int64_t ids[] = {running->id};
  q.worker_heartbeat("host:42", "tiny", ids);

  const StatusSnapshot s = take_status(q, "", 5, 10);
  CHECK(s.counts.queued == 1);
  CHECK(s.counts.running == 1);
  CHECK(s.counts.done == 1);
  REQUIRE(s.running.size() == 1);
  CHECK(s.running[0].progress.generated == 37);

  const std::string plain = format_status(s, StatusStyle{false, 100});
  CHECK(has(plain, "queue: 1 queued, 1 running, 1 done, 0 failed, 0 cancelled, 0 dead"));
  CHECK(has(plain, "job " + std::to_string(running->id) + "  tiny  nightly second  (host:42)"));
  CHECK(has(plain, "37/200 tok, 3.26 tok/s, ETA 50s"));
  CHECK_FALSE(has(plain, "[#"));
  CHECK(has(plain, "last finished:\n  job 1  done"));
  CHECK(has(plain, "10 tok"));
  CHECK(has(plain, "\"It was a dark and stormy night\""));
  CHECK(has(plain, "nightly  1/2 finished"));
  CHECK(has(plain, "host:42  up "));
  CHECK(has(plain, "model tiny  jobs " + std::to_string(running->id)));

  const std::string tty = format_status(s, StatusStyle{true, 100});
  CHECK(has(tty, "decode  [######"));  // 37/200 of a 33-cell bar

  const std::string line = format_status_line(s);
  CHECK(line.find('\n') == std::string::npos);
  CHECK(has(line, "Z 1 queued, 1 running, 1 done"));
  CHECK(has(line, "| job " + std::to_string(running->id) + " 37/200 tok"));

  const nlohmann::json j = status_to_json(s);
  CHECK(j["counts"]["running"] == 1);
  CHECK(j["running"][0]["generated"] == 37);
  CHECK(j["running"][0]["eta_s"].get<double>() == doctest::Approx(163 / 3.26).epsilon(0.01));
  CHECK(j["workers"][0]["batch_jobs"] == 1);
  CHECK(j["workers"][0]["batch_tok_s"].get<double>() == doctest::Approx(3.26));
  CHECK(j["batches"][0]["name"] == "nightly");
  CHECK(j["workers"][0]["id"] == "host:42");
  CHECK_FALSE(queue_idle(s));
}

TEST_CASE("status of one batch; idle once nothing is queued or running") {
  ns::test::CliQueue db;
  auto& q = *db.queue;
  q.submit(spec("a", 5, "b1"));
  q.submit(spec("b", 5, "b2"));
  db.finish_next("x");
  StatusSnapshot s = take_status(q, "b1", 5, 10);
  CHECK(queue_idle(s));
  CHECK(s.batches.size() == 1);
  CHECK(has(format_status(s, {}), "batch b1: 0 queued, 0 running, 1 done"));
  CHECK(has(format_status(s, {}), "daemons: none has registered"));
  s = take_status(q, "b2", 5, 10);
  CHECK_FALSE(queue_idle(s));
  CHECK(s.recent.empty());
}

TEST_CASE("text from jobs cannot drive the terminal: control characters and bad UTF-8 are neutralised") {
  ns::test::CliQueue db;
  db.queue->submit(spec("line one\nline two \x1b[31mred", 5));
  db.finish_next("ok\x1b[2Jcleared\xff\xfe end\n");
  db.queue->submit(spec("a prompt\twith a tab", 5));
  db.queue->claim("w", 60'000);
  const std::string text = format_status(take_status(*db.queue, "", 5, 10), StatusStyle{true, 100});
  CHECK(text.find('\x1b') == std::string::npos);
  CHECK(has(text, "\"ok\\x1b[2Jcleared\xEF\xBF\xBD\xEF\xBF\xBD end \""));  // escaped as text (escape_controls)
  CHECK(has(text, "\"a prompt with a tab\""));
}

// Issue #30 M: names and texts from the queue (anyone who may submit writes
// them) went to the terminal raw: ESC sequences in a model or batch name, the
// C1 control CSI (U+009B, bytes C2 9B) in prompts and outputs.
TEST_CASE("status and watch print no terminal control from the queue's names and texts") {
  const std::string esc = "\x1b[2J", csi =
                                         "\xc2\x9b"
                                         "31m";
  StatusSnapshot s;
  s.now_ms = 100'000;
  s.batch = "b" + esc;
  s.counts.running = 1;
  s.counts.done = 1;
  ns::jobs::Job run;
  run.spec = spec("prompt " + csi, 20, "batch" + esc);
  run.id = 1;
  run.state = ns::jobs::JobState::running;
  run.spec.model = "model" + esc;
  run.worker = "w" + csi;
  run.started_ms = 90'000;
  run.progress = {.prompt_tokens = 4, .prefilled = 4, .generated = 3, .tok_s = 1.0, .updated_ms = 99'000};
  ns::jobs::Job done;
  done.spec = spec("p", 20);
  done.id = 2;
  done.state = ns::jobs::JobState::done;
  done.spec.model = "m" + csi;
  done.finished_ms = 95'000;
  done.result =
      ns::jobs::JobResult{.text = "out " + csi + " " + esc, .finish_reason = "length", .completion_tokens = 3};
  s.running = {run};
  s.recent = {done};
  ns::jobs::BatchSummary b;
  b.name = "batch" + esc;
  b.counts.running = 1;
  s.batches = {b};
  ns::jobs::WorkerInfo w;
  w.id = "w" + csi;
  w.model = "model" + esc;
  w.heartbeat_ms = 99'000;
  s.workers = {w};

  const std::string outputs[] = {format_status(s, StatusStyle{}), format_status(s, StatusStyle{true, 120, 0}),
                                 format_status(s, StatusStyle{true, 120, 30}), format_status_line(s)};
  for (const std::string& out : outputs) {
    CAPTURE(out);
    CHECK_FALSE(has(out, "\x1b"));
    CHECK_FALSE(has(out, "\xc2\x9b"));
  }
  for (size_t i = 0; i < 3; ++i) CHECK(has(outputs[i], "model\\x1b[2J"));  // shown, as text
  CHECK(has(format_status(s, StatusStyle{}), "\\x9b31m"));
}

TEST_CASE("CLI messages are printable: controls escaped, passwords redacted") {
  CHECK(printable(std::string("custom_id \"a\0b\x1b[2J\"", 19)) == "custom_id \"a\\x00b\\x1b[2J\"");
  CHECK(printable("bad\xc2\x9b"
                  "31m\nsecond line") == "bad\\x9b31m\nsecond line");
  CHECK(printable("postgresql://u:S3cr?t@db/q") == "postgresql://u:***@db/q");
}

TEST_CASE("held jobs: status, watch at 80x24, the line, JSON and list show why, whole, and the command that fixes it") {
  ns::test::CliQueue db;
  auto& q = *db.queue;
  q.submit(spec("a", 5, "nightly"));
  q.submit(spec("b", 5, "nightly"));
  q.submit(spec("c", 5));
  const std::string why =
      "model 'chta' is not in the daemon's config (known models: chat, tiny); fix the job's model or add it to "
      "/etc/nightshift/config.yaml";
  for (const ns::jobs::Job& j : q.claim_batch("night-1", 60'000, 3, "")) REQUIRE(q.release(j.lease(), why));

  StatusSnapshot s = take_status(q, "", 5, 10);
  CHECK(s.counts.held == 3);
  const std::string plain = format_status(s, StatusStyle{false, 100});
  CHECK(has(plain, "queue: 3 queued (3 held), 0 running"));
  CHECK(has(plain, "nightly  0/2 finished  (0 done, 0 failed, 0 cancelled, 0 dead, 2 queued (2 held), 0 running)"));
  CHECK(
      has(plain, "    held: 2 job(s) of batch nightly left queued by a daemon that cannot serve their model: " + why));
  CHECK(has(plain, "re-point them: nightshift retry --batch nightly --model NAME"));
  // One held job has no batch: the whole queue's line says so.
  CHECK(has(plain, "held: 3 job(s) left queued by a daemon that cannot serve their model: " + why));

  // watch on 80x24: every line fits, and the reason is there whole, wrapped.
  const std::string screen = format_status(s, StatusStyle{false, 80, 24});
  std::string joined;
  std::istringstream lines(screen);
  for (std::string line; std::getline(lines, line);) {
    CHECK(line.size() <= 80);
    joined += line + " ";
  }
  std::string squeezed;  // the wrapped lines' indentation and breaks as single spaces
  for (char c : joined) {
    if (c != ' ' || squeezed.empty() || squeezed.back() != ' ') squeezed += c;
  }
  CHECK(has(squeezed, "held: 2 job(s) of batch nightly left queued by a daemon that cannot serve their model: " + why));
  CHECK(has(squeezed, "nightshift retry --batch nightly --model NAME"));

  CHECK(has(format_status_line(s), "3 queued (3 held)"));
  CHECK(has(format_status_line(s), "| held: " + why));
  const nlohmann::json j = status_to_json(s);
  CHECK(j["counts"]["held"] == 3);
  CHECK(j["counts"]["held_reason"] == why);
  CHECK(j["batches"][0]["counts"]["held"] == 2);

  StatusSnapshot one = take_status(q, "nightly", 5, 10);
  const std::string batch = format_status(one, StatusStyle{false, 100});
  CHECK(has(batch, "batch nightly: 2 queued (2 held)"));
  CHECK(has(batch, "held: 2 job(s) of batch nightly left queued by a daemon that cannot serve their model: " + why));

  ns::jobs::ListFilter all;
  all.limit = 0;
  const std::vector<ns::jobs::Job> jobs = q.list(all);
  const std::string table = ns::daemon::format_job_table(jobs);
  CHECK(has(table, "held   tiny"));
  CHECK(has(table, "held: model 'chta' is not in the daemon's config"));
  CHECK(ns::daemon::job_to_json(jobs[0])["held"] == why);
}

// #31 item 9: at 80x24 with rows to spare, batch lines and a daemon's CANNOT SERVE reason were cut while rows
// stayed blank, and every `--drain` run's stopped daemon took a line.
TEST_CASE("watch at 80x24 uses its rows: whole batch lines and reasons, stopped daemons on one line") {
  StatusSnapshot s;
  s.now_ms = 10'000'000;
  s.counts = {.queued = 30, .running = 1, .done = 12};
  ns::jobs::Job j;
  j.id = 77;
  j.worker = "box:1";
  j.spec.model = "tiny";
  j.spec.batch = "reviews";
  j.spec.sampling.max_tokens = 200;
  j.started_ms = 9'990'000;
  j.progress = {.prompt_tokens = 10, .prefilled = 10, .generated = 50, .tok_s = 4, .updated_ms = 9'999'000};
  s.running.push_back(j);
  for (int i = 0; i < 2; ++i) {
    ns::jobs::BatchSummary b;
    b.name = "reviews-2026-12-04-" + std::to_string(i) + "-a-long-batch-name";
    b.created_ms = 9'000'000;
    b.counts = {.queued = 15, .running = i == 0 ? 1 : 0, .done = 6};
    b.progress = {.first_started_ms = 9'400'000,
                  .done = 6,
                  .done_tokens = 600,
                  .result_tokens = 600,
                  .queued = 15,
                  .queued_max_tokens = 3000};
    s.batches.push_back(b);
  }
  const std::string why =
      "model 'chat-large' does not fit: it needs 41.2 GiB with its KV cache and the daemon's "
      "memory_budget is 32 GiB; lower max_batch or context, or raise memory_budget";
  ns::jobs::WorkerInfo up;
  up.id = "box:1";
  up.model = "tiny";
  up.heartbeat_ms = 9'999'000;
  up.problem = why;
  s.workers.push_back(up);
  for (int i = 0; i < 5; ++i) {
    ns::jobs::WorkerInfo w;
    w.id = "box:" + std::to_string(100 + i);
    w.started_ms = 1'000'000;
    w.heartbeat_ms = w.stopped_ms = 9'000'000 + 100'000 * i;  // the last stopped 10 min - 4 x 100 s ago
    s.workers.push_back(w);
  }
  const std::string screen = format_status(s, StatusStyle{false, 80, 24});
  INFO(screen);
  const std::vector<std::string> lines = lines_of(screen);
  CHECK(lines.size() <= 23);
  for (const std::string& l : lines) CHECK(l.size() <= 80);
  // Every batch line whole (wrapped, nothing cut) with its ETA.
  CHECK(screen.find("...") == std::string::npos);
  for (const ns::jobs::BatchSummary& b : s.batches) {
    const std::string finished = "6/" + std::to_string(21 + b.counts.running) + " finished, ETA ";
    CHECK(has(screen, "  " + b.name + "  " + finished));
    CHECK(has(format_status_line(s), "| " + b.name + " " + finished));  // watch --plain: the batch's ETA
  }
  std::string joined;
  for (const std::string& l : lines) joined += l + "\n";
  std::string squeezed;  // the wrapped lines as one, spaces squeezed
  for (char c : joined) {
    if (c == '\n') c = ' ';
    if (c != ' ' || squeezed.empty() || squeezed.back() != ' ') squeezed += c;
  }
  CHECK(has(squeezed, "(6 done, 0 failed, 0 cancelled, 0 dead, 15 queued, 1 running) created 16m40s ago"));
  // The reason whole, on its own lines.
  CHECK(has(squeezed, "CANNOT SERVE: " + why));
  // Five stopped daemons: one line.
  CHECK(has(screen, "  5 stopped daemons, the last 10m00s ago\n"));
  CHECK_FALSE(has(screen, "box:101"));
  // status lists them the same way.
  const std::string plain = format_status(s, StatusStyle{false, 100});
  CHECK(has(plain, "  5 stopped daemons, the last 10m00s ago\n"));
  CHECK_FALSE(has(plain, "box:101"));
  CHECK(has(plain, "CANNOT SERVE: " + why));
  // JSON keeps every daemon, and the batch ETA.
  const nlohmann::json js = status_to_json(s);
  CHECK(js["workers"].size() == 6);
  CHECK(js["batches"][0]["eta_s"].is_number());
}
