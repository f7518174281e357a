// `nightshift run-batch -i requests.jsonl -o results.jsonl`: vLLM's one
// command for an OpenAI Batch file, without a daemon. The lines go into an
// embedded SQLite queue beside the output (<out stem>.run-batch.db), the
// daemon's own worker (daemon/lib/worker.h) runs them in this process with a
// heartbeat thread, and the results are written as `export --jsonl` writes
// them (daemon/cli/batch_export.h).
//
// Contract:
// - Every valid line is submitted as `submit --jsonl` does (batch = the
//   input's name, the same idempotency keys): a second run on the same
//   database queues nothing twice, so an interrupted run resumes where it
//   stopped (finished lines are not computed again; a line cut mid-generation
//   resumes from its checkpoint) and writes the same output.
// - `stop` (SIGINT/SIGTERM) stops the running lines at their next token; they
//   are checkpointed and released, nothing is written to the output files,
//   the database is kept, and the report says `interrupted`.
// - Once every line has ended: `output` holds one success line per done line,
//   in input order; `<out stem>.errors.<out ext>` holds one OpenAI error line
//   per line that was rejected (bad JSON or fields, a model the config lacks)
//   or failed, in input order (removed when there is none). Both are written
//   whole under a temporary name and renamed (daemon/cli/output_file.h). The
//   database is deleted unless keep_db.
// - Lines of the database's batch that the input no longer has are cancelled,
//   not run; lines whose model this run cannot load stay queued and the run
//   fails with the reason (the database is kept).
// - The database is the run's own: one holding unfinished jobs of another
//   batch (another input's, a daemon's queue given as --db) is refused, as is
//   a PostgreSQL URL.
// - Two runs on one database at once: the second is refused (an flock on the
//   database file).
// - Errors: ns::Error(invalid_input) for a bad model or config, naming the
//   fix; ns::Error(io) for files.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "engine/api/engine_options.h"

namespace ns::cli {

struct RunBatchOptions {
  std::string input;   // -i: the OpenAI Batch input file
  std::string output;  // -o: the output file
  std::string model;   // --model: a name from --config's models:, or a GGUF path; "" = each line's body.model
  std::string config;  // --config: the daemon config whose models and engine settings to use; "" = defaults
  std::string db;      // --db: the queue; "" = <output stem>.run-batch.db beside the output
  // Engine options given as flags (--threads, --max-batch, --memory-budget:
  // rows of the option table, engine_flags.h); each named in engine_given
  // overrides the config's value.
  EngineOptions engine;
  std::vector<std::string> engine_given;
  bool keep_db = false;  // keep the database after a complete run
  bool progress = true;  // the progress line on stderr
};

struct RunBatchReport {
  std::string batch, db, errors_path;
  int64_t lines = 0;         // non-blank input lines
  int64_t valid = 0;         // of them, the lines queued (not rejected)
  int64_t resumed_done = 0;  // lines already finished in the database when this run began
  int64_t written = 0;       // success lines in the output
  int64_t errors = 0;        // lines in the errors file (rejected + failed)
  bool interrupted = false;  // `stop` was set before every line ended
  int64_t finished = 0;      // lines ended (done or failed) when the run returned
};

// <dir>/<stem>.errors<ext> ("results.jsonl" -> "results.errors.jsonl"; no extension: ".errors.jsonl").
std::string errors_path_for(const std::string& output);
// <dir>/<stem>.run-batch.db.
std::string database_path_for(const std::string& output);

// Progress goes to `err` (a live line when it is a terminal, else a line at every tenth of the lines).
RunBatchReport run_batch(const RunBatchOptions& options, const std::atomic<bool>& stop, FILE* err);

}  // namespace ns::cli
