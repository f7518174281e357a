// nightshift export / status / watch: getting results out of a batch or a
// folder of documents, and seeing how the queue is doing.
#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "daemon/cli/batch_export.h"
#include "daemon/cli/command_support.h"
#include "daemon/cli/commands.h"
#include "daemon/cli/document_export.h"
#include "daemon/cli/model_check.h"
#include "daemon/cli/output_file.h"
#include "daemon/cli/status_view.h"
#include "daemon/lib/job_format.h"
#include "daemon/lib/metrics_text.h"
#include "daemon/lib/status_page.h"
#include "common/error.h"

namespace ns::cli {
namespace {

namespace fs = std::filesystem;

// ---- export -------------------------------------------------------------------

struct ExportArgs {
  DatabaseArgs db;
  std::string batch, jsonl, dir;
  bool with_document = false;
};

void export_jsonl(const ExportArgs& a) {
  if (a.batch.empty()) throw CommandError{kUsage, "--jsonl needs --batch NAME (nightshift status lists the batches)"};
  auto queue = open_existing(a.db);
  require_batch(*queue, a.batch);
  // With --config, replies to requests that offered tools become tool_calls in the model's markup.
  auto models = std::make_shared<ModelCheck>(model_check_for(a.db, false));
  const ToolFormatOf tool_format = [models](const std::string& model) { return models->tool_format(model); };
  ExportCounts counts;
  FILE* report = stdout;
  if (a.jsonl == "-") {
    counts = export_batch_jsonl(*queue, a.batch, std::cout, tool_format);
    std::cout.flush();
    report = stderr;
  } else {
    // Written beside the target and renamed over it, never through a link,
    // mode 0600: a reader never sees half a file (output_file.h).
    const fs::path target(a.jsonl);
    const fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
    const OutputFolder folder(parent);
    OutputFile out(folder, target.filename().string());
    counts = export_batch_jsonl(*queue, a.batch, out.stream(), tool_format);
    out.commit();
  }
  std::fprintf(report, "batch %s: %s; wrote %lld lines (%lld errors) to %s\n", a.batch.c_str(),
               describe_counts(counts.states).c_str(), static_cast<long long>(counts.written),
               static_cast<long long>(counts.errors), a.jsonl == "-" ? "stdout" : a.jsonl.c_str());
  if (counts.pending() > 0) {
    std::fprintf(report,
                 "%lld jobs are not finished and were left out: export again once `nightshift watch --batch %s "
                 "--until-done` returns\n",
                 static_cast<long long>(counts.pending()), a.batch.c_str());
  }
}

void export_dir(const ExportArgs& a) {
  auto queue = open_existing(a.db);
  if (!a.batch.empty()) require_batch(*queue, a.batch);
  DocumentExportOptions options;
  options.batch = a.batch;
  options.with_document = a.with_document;
  const DocumentExportReport r = export_documents(*queue, a.dir, options);
  for (const std::string& f : r.written) std::cout << "wrote " << (fs::path(a.dir) / f).string() << "\n";
  for (const DocumentExportProblem& p : r.problems) {
    std::fprintf(stderr, "nightshift export: %s (job %lld) %s\n", p.name.c_str(), static_cast<long long>(p.job_id),
                 p.message.c_str());
  }
  std::cout << (a.batch.empty() ? std::string("documents") : "batch " + a.batch) << ": " << r.written.size()
            << " written, " << r.unchanged << " unchanged, " << r.problems.size() << " failed, " << r.pending
            << " not finished yet, " << r.superseded << " older versions skipped\n";
  if (r.written.empty() && r.unchanged == 0 && r.problems.empty() && r.pending == 0) {
    // A named batch of prompts or JSONL lines is the wrong command, not an empty morning.
    if (!a.batch.empty()) {
      throw CommandError{kInvalidInput, "batch " + a.batch +
                                            " has no document jobs (they are queued by `nightshift "
                                            "submit --dir`): export its results with --jsonl OUT"};
    }
    std::cout << "no documents found: they are queued by `nightshift submit --dir`\n";
  }
  if (!r.problems.empty()) {
    std::cout << "see why with `nightshift show ID`; queue them again with `nightshift retry ID`\n";
    // The others are written; a script (the morning export unit) must still see that some are missing.
    throw CommandError{kFailure, std::to_string(r.problems.size()) +
                                     " document(s) failed and have no continuation "
                                     "(listed above)"};
  }
}

void add_export(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<ExportArgs>();
  CLI::App* cmd = app.add_subcommand(
      "export",
      "Write finished results out: a batch as OpenAI Batch output JSONL, or documents' continuations as files");
  auto* jsonl = cmd->add_option("--jsonl", a->jsonl,
                                "write the batch's finished jobs to this file (- = stdout), one OpenAI Batch output "
                                "line each, in input order; failures as error lines");
  auto* dir = cmd->add_option("--dir", a->dir,
                              "write each finished document's continuation to this folder: DOCS/path/name.md -> "
                              "OUT/path/name.continued.md (may be the documents' folder itself)");
  jsonl->excludes(dir);
  dir->excludes(jsonl);
  cmd->add_option("--batch", a->batch,
                  "the batch (required with --jsonl; with --dir, default: every batch of documents)");
  cmd->add_flag("--with-document", a->with_document, "with --dir: write the document followed by its continuation");
  add_database_options(cmd, a->db);
  cmd->footer(
      "Examples:\n"
      "  nightshift export --batch reviews-0412 --jsonl results.jsonl\n"
      "  nightshift export --batch reviews-0412 --jsonl - | jq -r '.response.body.choices[0].text'\n"
      "  nightshift export --dir ~/notes-continued\n"
      "  nightshift export --dir ~/notes --batch notes --with-document\n"
      "Jobs still queued or running are counted and left out: export again later (files are replaced whole).\n"
      "Exit status: 0 written, 3 no such batch, 2 bad command line, 4 (--dir) a batch without document\n"
      "jobs, 1 database or file failure, or (--dir) a document whose job failed (the others are written).\n");
  cmd->callback([a, &exit_code] {
    run_command("export", exit_code, [&] {
      if (a->jsonl.empty() && a->dir.empty())
        throw CommandError{kUsage, "give --jsonl FILE (with --batch) or --dir FOLDER"};
      if (!a->jsonl.empty()) return export_jsonl(*a);
      if (a->with_document && a->dir.empty()) throw CommandError{kUsage, "--with-document goes with --dir"};
      export_dir(*a);
    });
  });
}

// ---- status / watch -------------------------------------------------------------

struct StatusArgs {
  DatabaseArgs db;
  std::string batch;
  int recent = 5, batches = 10;
  bool json = false, prometheus = false, html = false;
  double interval = 2;
  bool until_done = false, plain = false;
};

// The terminal's columns or rows: the tty's size, else $COLUMNS / $LINES, else `fallback`.
int terminal_size(bool rows, int fallback) {
  winsize ws{};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && (rows ? ws.ws_row : ws.ws_col) > 0) {
    return rows ? ws.ws_row : ws.ws_col;
  }
  if (const char* c = std::getenv(rows ? "LINES" : "COLUMNS")) {
    if (int n = std::atoi(c); n > 0) return n;
  }
  return fallback;
}
int terminal_width() { return terminal_size(false, 100); }

void add_status_options(CLI::App* cmd, StatusArgs& a) {
  cmd->add_option("--batch", a.batch, "only this batch's jobs");
  cmd->add_option("--recent", a.recent, "how many finished jobs to show")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000));
  cmd->add_option("--batches", a.batches, "how many batches to show")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000));
  add_database_options(cmd, a.db);
}

void add_status(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<StatusArgs>();
  CLI::App* cmd = app.add_subcommand("status",
                                     "The queue at a glance: counts by state, running jobs with tokens done/max, "
                                     "tok/s and ETA, the last finished jobs, batches, daemons");
  add_status_options(cmd, *a);
  auto* json = cmd->add_flag("--json", a->json, "print one JSON object (counts, running, recent, batches, workers)");
  auto* prometheus = cmd->add_flag("--prometheus", a->prometheus,
                                   "print the metrics in Prometheus text format (what a server's /metrics serves: jobs "
                                   "by state and model, tokens, tok/s, bytes read, I/O wait, cache hits, batch size, "
                                   "queue wait)");
  auto* html = cmd->add_flag("--html", a->html,
                             "print the status page: one self-contained HTML file (batches with progress bars, ETA "
                             "and throughput, a tok/s chart of the last hours, daemons, the last failures)");
  json->excludes(prometheus)->excludes(html);
  prometheus->excludes(json)->excludes(html);
  html->excludes(json)->excludes(prometheus);
  cmd->footer(
      "Examples:\n"
      "  nightshift status\n"
      "  nightshift status --batch reviews-0412\n"
      "  nightshift status --json | jq '.running[] | {id, generated, max_tokens, eta_s}'\n"
      "  nightshift status --prometheus > nightshift.prom.tmp && mv nightshift.prom.tmp nightshift.prom\n"
      "  nightshift status --html > status.html\n"
      "Refreshing: nightshift watch. nightshiftd serves --html at / and --prometheus at /metrics when http: is set\n"
      "(docs/operations.md). Exit status: 0 shown, 3 no such batch, 2 bad command line (--prometheus with\n"
      "--batch), 1 database failure.\n");
  cmd->callback([a, &exit_code] {
    run_command("status", exit_code, [&] {
      auto queue = open_existing(a->db);
      if (!a->batch.empty()) require_batch(*queue, a->batch);
      if (a->prometheus) {
        if (!a->batch.empty()) throw CommandError{kUsage, "--prometheus describes the whole queue: leave out --batch"};
        std::cout << daemon::metrics_text(daemon::take_status(*queue, daemon::metrics_request()));
        return;
      }
      if (a->html) {
        daemon::StatusRequest request = daemon::status_page_request();
        request.batch = a->batch;
        std::cout << daemon::status_page_html(daemon::take_status(*queue, request));
        return;
      }
      const StatusSnapshot s = take_status(*queue, a->batch, a->recent, a->batches);
      if (a->json) {
        std::cout << daemon::json_text(status_to_json(s), 2) << "\n";
        return;
      }
      const bool tty = ::isatty(STDOUT_FILENO) == 1;
      std::cout << format_status(s, StatusStyle{tty, tty ? terminal_width() : 100});
    });
  });
}

std::atomic<bool> g_interrupted{false};
extern "C" void on_interrupt(int) { g_interrupted = true; }

void add_watch(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<StatusArgs>();
  CLI::App* cmd = app.add_subcommand("watch",
                                     "`status`, refreshed: progress bars on a terminal, one line per refresh "
                                     "otherwise; Ctrl-C stops");
  add_status_options(cmd, *a);
  cmd->add_option("--interval", a->interval, "seconds between refreshes")
      ->capture_default_str()
      ->check(CLI::Range(0.05, 3600.0));
  cmd->add_flag("--until-done", a->until_done,
                "exit (status 0) once nothing is queued or running (in the batch, with --batch)");
  cmd->add_flag("--plain", a->plain, "one line per refresh even on a terminal (for logs)");
  cmd->footer(
      "Examples:\n"
      "  nightshift watch\n"
      "  nightshift watch --batch reviews-0412 --until-done && nightshift export --batch reviews-0412 --jsonl out.jsonl\n"
      "  nightshift watch --interval 60 --plain >> progress.log\n"
      "Exit status: 0 on Ctrl-C or when done (--until-done), 3 no such batch, 1 database failure.\n");
  cmd->callback([a, &exit_code] {
    run_command("watch", exit_code, [&] {
      auto queue = open_existing(a->db);
      if (!a->batch.empty()) require_batch(*queue, a->batch);
      struct sigaction sa {};
      sa.sa_handler = on_interrupt;
      ::sigaction(SIGINT, &sa, nullptr);
      ::sigaction(SIGTERM, &sa, nullptr);
      const bool screen = !a->plain && ::isatty(STDOUT_FILENO) == 1;
      const auto tick = std::chrono::milliseconds(50);
      while (!g_interrupted) {
        try {
          const StatusSnapshot s = take_status(*queue, a->batch, screen ? a->recent : 0, a->batches);
          if (screen) {
            // Home and clear, then the frame, fitted to the terminal (the
            // footer ends without a newline: the last row must not scroll).
            std::cout << "\x1b[H\x1b[2J"
                      << format_status(s, StatusStyle{true, terminal_width(), terminal_size(true, 24)})
                      << "(refreshing every " << a->interval << " s; Ctrl-C to stop)";
          } else {
            std::cout << format_status_line(s) << "\n";
          }
          std::cout.flush();
          if (a->until_done && queue_idle(s)) return;
        } catch (const jobs::DatabaseError& e) {
          if (!e.transient()) throw;
          std::fprintf(stderr, "nightshift watch: %s (retrying)\n", e.what());
        }
        const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(a->interval);
        while (!g_interrupted && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(tick);
      }
    });
  });
}

}  // namespace

void add_workflow_commands(CLI::App& app, int& exit_code) {
  add_export(app, exit_code);
  add_status(app, exit_code);
  add_watch(app, exit_code);
}

}  // namespace ns::cli
