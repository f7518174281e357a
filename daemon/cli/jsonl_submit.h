// `nightshift submit --jsonl FILE`: OpenAI Batch input lines -> one queued job
// each, grouped in a named batch (docs/batch-jsonl.md).
//
// Contract:
// - Every valid line becomes one job with batch, custom_id, source_path and
//   source_line set; chat lines store their messages (JSON), completion
//   lines their prompt. Invalid lines (bad JSON or fields, a model that
//   cannot be named, a custom_id the batch already uses for other content)
//   are reported by line number and never stop the valid ones.
// - Idempotent: a job's key is batch + custom_id + a fingerprint of what it
//   asks for (model, input, sampling), so submitting the same file again
//   queues nothing twice; a line whose content changed under a custom_id the
//   batch already holds is rejected rather than run twice under one name.
//   A line equals the batch's job when its key does or when the job's spec
//   as it is now has the line's fingerprint (after `retry --model` moved it).
//   A line that differs from a failed, dead, cancelled or held job only by
//   its model is rejected with the command that moves the batch's jobs
//   (`nightshift retry --batch B --model M`).
// - Jobs are written in transactions of a few hundred (short write locks for
//   a daemon working on the same database).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/cli/openai_batch.h"
#include "jobs/queue.h"

namespace ns::cli {

struct JsonlSubmitOptions {
  std::string batch;        // non-empty
  std::string source_path;  // stored with every job ("" for stdin)
  std::string model;        // --model: runs every line, whatever body.model says; "" = body.model
  SamplingParams defaults;  // for body fields left out
  int32_t priority = 0;
  int32_t max_attempts = jobs::kDefaultMaxAttempts;
  // A line whose job this returns a problem for is rejected with it (submit
  // --config's model check, daemon/cli/model_check.h); empty = none. Asked
  // only for lines to be queued, not for those the batch holds already.
  std::function<std::string(const jobs::JobSpec&)> check;
  // The model a line's job runs on, from the name it gives (the HTTP API's
  // alias table, daemon/http/); throws ns::Error(invalid_input) for a name it
  // cannot map. Empty = the name as given.
  std::function<std::string(const std::string&)> map_model;
};

struct JsonlSubmitted {
  int64_t line = 0;
  std::string custom_id;
  int64_t id = 0;
  bool created = true;  // false: an earlier submit queued it already
  // Not created: the state the earlier job is in now ("held" for a queued job
  // a daemon cannot serve, jobs::is_held); created: "queued".
  std::string state = "queued";
};

struct JsonlSubmitReport {
  int64_t lines = 0;                      // non-blank lines read
  std::vector<JsonlSubmitted> submitted;  // accepted lines, in file order
  std::vector<BatchLineError> rejected;   // in file order
  int64_t created() const;
};

// The job a valid request becomes (without consulting the queue). Throws
// ns::Error(invalid_input) when no model is named or the spec is not queueable.
jobs::JobSpec jsonl_job_spec(const BatchRequest& request, const JsonlSubmitOptions& options);

// Hex fingerprint of what a job asks for: model, prompt or messages, and
// every sampling field. Equal specs have equal fingerprints.
std::string spec_fingerprint(const jobs::JobSpec& spec);

JsonlSubmitReport submit_jsonl(jobs::Queue& queue, std::string_view text, const JsonlSubmitOptions& options);

// The batch name a file gives when --batch is not: its name without the
// directory and the last extension ("data/reviews-0412.jsonl" -> "reviews-0412").
std::string batch_name_from_path(const std::string& path);

}  // namespace ns::cli
