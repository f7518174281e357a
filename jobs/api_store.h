// The tables behind nightshiftd's OpenAI-compatible Files and Batches API
// (daemon/http/): uploaded and generated files, and the batch objects that
// map onto the queue's named batches. One interface, a SQLite and a
// PostgreSQL backend (jobs/sqlite_api_store.cpp, jobs/pg_api_store.cpp), on
// the queue's own database (schema/<backend>/*_openai_api.sql), so nothing is
// lost on a restart and every daemon serving a queue sees the same objects.
//
// Contract: every method is one transaction and throws DatabaseError as the
// queue does (jobs/queue.h). A store is used from one thread; several threads
// and processes may each use their own store on one database. Times are unix
// seconds (as the API reports them), 0 = none. Lists page newest first by
// insertion order; `after` is the id of the last row of the previous page.
// Batch status changes are compare-and-set on the stored status, so daemons
// sharing a queue never both finish one batch.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "jobs/pg_queue.h"
#include "jobs/sqlite_queue.h"

namespace ns::jobs {

struct ApiFile {
  std::string id;  // "file-<hex>"
  std::string filename;
  std::string purpose;  // "batch" (uploads) or "batch_output" (a batch's output and error files)
  int64_t bytes = 0;
  int64_t created_at = 0;
  std::string content;  // filled only when asked for (file(id, true))
};

struct ApiBatch {
  std::string id;        // "batch_<hex>"; also the name of the queue's batch holding its jobs
  std::string endpoint;  // "/v1/chat/completions" or "/v1/completions"
  std::string input_file_id;
  std::string completion_window;  // "24h"
  std::string status;  // validating, in_progress, finalizing, completed, failed, cancelling, cancelled, expired
  std::string output_file_id, error_file_id;  // "" = none yet
  // Lines refused at validation: a JSON array of {"code", "line", "message", "param", "custom_id"}; "" = none.
  std::string errors;
  std::string model;                  // the configured model its first request runs on ("" before validation)
  std::string metadata;               // a JSON object, or "" (null)
  int64_t total = 0;                  // requests in the input file
  int64_t rejected = 0;               // of which refused at validation (in `errors`)
  int64_t completed = 0, failed = 0;  // the final counts, stored when the batch ends
  int64_t input_tokens = 0, output_tokens = 0, cached_tokens = 0;  // usage, stored when the batch ends
  int64_t created_at = 0, in_progress_at = 0, expires_at = 0, finalizing_at = 0, completed_at = 0, failed_at = 0,
          expired_at = 0, cancelling_at = 0, cancelled_at = 0;
};

class ApiStore {
 public:
  virtual ~ApiStore() = default;

  virtual void add_file(const ApiFile& file) = 0;
  virtual std::optional<ApiFile> file(const std::string& id, bool with_content) = 0;
  // Without content. purpose "" = any; ascending: oldest first.
  virtual std::vector<ApiFile> files(const std::string& purpose, const std::string& after, int32_t limit,
                                     bool ascending) = 0;
  virtual bool delete_file(const std::string& id) = 0;

  virtual void add_batch(const ApiBatch& batch) = 0;
  virtual std::optional<ApiBatch> batch(const std::string& id) = 0;
  virtual std::vector<ApiBatch> batches(const std::string& after, int32_t limit) = 0;
  // Writes every field of `batch` (by id) when its stored status is one of
  // `from`, and adds `files` in the same transaction; false (nothing
  // written) when the status was another.
  virtual bool update_batch(const ApiBatch& batch, std::span<const std::string> from,
                            std::span<const ApiFile> files = {}) = 0;
};

// The store on `database` (a SQLite file or a postgresql:// URL, as
// open_queue()), migrated to this binary's schema like the queue.
std::unique_ptr<ApiStore> open_api_store(const std::string& database, const SqliteOptions& sqlite = {},
                                         const PgOptions& pg = {});

}  // namespace ns::jobs
