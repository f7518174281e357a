// The OpenAI Batch and File objects as the API shows them, and the batch's
// life as a function of its jobs: pure functions over jobs::ApiBatch (the
// stored row) and the queue's counts of the batch's jobs, so the rules are
// tested without a server (tests/unit/http/).
//
// A batch's status: validating (its input file becomes jobs) -> in_progress
// (jobs queued) -> finalizing (every job ended; output and error files being
// written) -> completed; failed when no request of the file was valid;
// cancelling (cancel asked: unfinished jobs cancelled) -> cancelled; expired
// when completion_window passed with jobs unfinished (those are cancelled).
// request_counts: total = the file's requests; completed = jobs done; failed
// = requests refused at validation + jobs failed, dead or cancelled.
//
// Contract: batch_json() and file_json() give every field of OpenAI's Batch
// and FileObject (null where a time or file does not apply yet); usage only
// once the batch has ended. Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "jobs/api_store.h"
#include "jobs/queue.h"

namespace ns::http {

// completed, failed, cancelled, expired.
bool is_final_status(const std::string& status);

struct RequestCounts {
  int64_t total = 0, completed = 0, failed = 0;
};
// Live from `jobs` (the queue's counts of the batch) while the batch runs;
// the stored final counts once it has ended.
RequestCounts request_counts(const jobs::ApiBatch& batch, const jobs::QueueCounts& jobs);

enum class BatchStep {
  none,         // nothing to do now
  cancel_jobs,  // cancel the batch's unfinished jobs (cancel asked, or the window passed)
  finish,       // every job ended: write the files and take `final_status`
};
struct BatchPlan {
  BatchStep step = BatchStep::none;
  std::string final_status;  // with finish: completed, cancelled or expired
};
// What a batch that is not final needs at `now_s`, given its jobs' counts.
// A validating batch is handled by its creator: none.
BatchPlan plan_batch(const jobs::ApiBatch& batch, const jobs::QueueCounts& jobs, int64_t now_s);

// Sets status and its time (completed_at, cancelled_at, ..., and
// finalizing_at if the batch went through finalizing without one).
void set_status(jobs::ApiBatch& batch, const std::string& status, int64_t now_s);

nlohmann::ordered_json batch_json(const jobs::ApiBatch& batch, const jobs::QueueCounts& jobs);
nlohmann::ordered_json file_json(const jobs::ApiFile& file);

// "24h" -> 86400: a whole number of hours, 1h..720h; throws
// ns::Error(invalid_input) naming the value otherwise.
int64_t completion_window_seconds(const std::string& window);

// "" when `metadata` is null or an object of at most 16 string values (keys up
// to 64 characters, values up to 512), as OpenAI limits it; else the problem.
std::string metadata_problem(const nlohmann::json& metadata);

// A request refused at validation, as stored in ApiBatch::errors.
struct RejectedLine {
  int64_t line = 0;                             // 0: not about one line (the input file is gone)
  std::string custom_id, code, message, param;  // param "" = null
};
std::string rejected_to_json(const std::vector<RejectedLine>& lines);
std::vector<RejectedLine> rejected_from_json(const std::string& text);
// Its line in the batch's error file, shaped as the export's error lines
// (daemon/cli/openai_batch.h) with an id from the batch and line number.
std::string rejected_output_line(const std::string& batch_id, const RejectedLine& line);

}  // namespace ns::http
