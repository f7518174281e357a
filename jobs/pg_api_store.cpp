// The PostgreSQL backend of ns::jobs::ApiStore (contract in jobs/api_store.h,
// tables in schema/postgres/010_openai_api.sql). A status change locks the
// batch's row (SELECT ... FOR UPDATE) before deciding.
#include <string>

#include "jobs/api_store.h"
#include "jobs/pg_conn.h"
#include "jobs/pg_migrations.h"

namespace ns::jobs {
namespace pg {
namespace {

constexpr const char* kFileColumns = "id, filename, purpose, bytes, created_at";
// The batch columns in ApiBatch's order (read_batch, add_batch_params).
constexpr const char* kBatchColumns =
    "id, endpoint, input_file_id, completion_window, status, output_file_id, error_file_id, errors, model, metadata, "
    "total, rejected, completed, failed, input_tokens, output_tokens, cached_tokens, created_at, in_progress_at, expires_at, finalizing_at, completed_at, "
    "failed_at, expired_at, cancelling_at, cancelled_at";
constexpr const char* kBatchParams =
    "($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26)";

ApiFile read_file(const Result& r, int row) {
  ApiFile f;
  f.id = r.text(row, 0);
  f.filename = r.text(row, 1);
  f.purpose = r.text(row, 2);
  f.bytes = r.int64(row, 3);
  f.created_at = r.int64(row, 4);
  return f;
}

ApiBatch read_batch(const Result& r, int row) {
  ApiBatch b;
  int c = 0;
  for (std::string* s : {&b.id, &b.endpoint, &b.input_file_id, &b.completion_window, &b.status, &b.output_file_id,
                         &b.error_file_id, &b.errors, &b.model, &b.metadata}) {
    *s = r.text(row, c++);
  }
  for (int64_t* v : {&b.total, &b.rejected, &b.completed, &b.failed, &b.input_tokens, &b.output_tokens,
                     &b.cached_tokens, &b.created_at, &b.in_progress_at, &b.expires_at, &b.finalizing_at,
                     &b.completed_at, &b.failed_at, &b.expired_at, &b.cancelling_at, &b.cancelled_at}) {
    *v = r.int64(row, c++);
  }
  return b;
}

Params batch_params(const ApiBatch& b) {
  Params p;
  for (const std::string* s : {&b.id, &b.endpoint, &b.input_file_id, &b.completion_window, &b.status}) p.add(*s);
  for (const std::string* s : {&b.output_file_id, &b.error_file_id, &b.errors, &b.model, &b.metadata})
    p.add_text_or_null(*s);
  for (int64_t v :
       {b.total, b.rejected, b.completed, b.failed, b.input_tokens, b.output_tokens, b.cached_tokens, b.created_at})
    p.add(v);
  for (int64_t v : {b.in_progress_at, b.expires_at, b.finalizing_at, b.completed_at, b.failed_at, b.expired_at,
                    b.cancelling_at, b.cancelled_at}) {
    p.add_or_null(v);
  }
  return p;
}

void insert_file(Conn& db, const ApiFile& f) {
  db.exec("INSERT INTO api_files (id, filename, purpose, bytes, created_at, content) VALUES ($1, $2, $3, $4, $5, $6)",
          Params().add(f.id).add(f.filename).add(f.purpose).add(f.bytes).add(f.created_at).add(f.content));
}

class PgApiStore final : public ApiStore {
 public:
  PgApiStore(const std::string& url, const PgOptions& pg) : db_(url, pg) { migrate(db_); }

  void add_file(const ApiFile& file) override { insert_file(db_, file); }

  std::optional<ApiFile> file(const std::string& id, bool with_content) override {
    Result r = db_.exec(
        std::string("SELECT ") + kFileColumns + (with_content ? ", content" : "") + " FROM api_files WHERE id = $1",
        Params().add(id));
    if (r.rows() == 0) return std::nullopt;
    ApiFile f = read_file(r, 0);
    if (with_content) f.content = r.text(0, 5);
    return f;
  }

  std::vector<ApiFile> files(const std::string& purpose, const std::string& after, int32_t limit,
                             bool ascending) override {
    const std::string cmp = ascending ? ">" : "<";
    Result r =
        db_.exec(std::string("SELECT ") + kFileColumns + " FROM api_files WHERE ($1::text IS NULL OR purpose = $1)" +
                     " AND ($2::text IS NULL OR seq " + cmp + " (SELECT seq FROM api_files WHERE id = $2))" +
                     " ORDER BY seq " + (ascending ? "ASC" : "DESC") + " LIMIT $3::bigint",
                 Params().add_text_or_null(purpose).add_text_or_null(after).add(int64_t{limit}));
    std::vector<ApiFile> out;
    for (int i = 0; i < r.rows(); ++i) out.push_back(read_file(r, i));
    return out;
  }

  bool delete_file(const std::string& id) override {
    return db_.exec("DELETE FROM api_files WHERE id = $1", Params().add(id)).affected() > 0;
  }

  void add_batch(const ApiBatch& batch) override {
    db_.exec(std::string("INSERT INTO api_batches (") + kBatchColumns + ") VALUES " + kBatchParams,
             batch_params(batch));
  }

  std::optional<ApiBatch> batch(const std::string& id) override {
    Result r = db_.exec(std::string("SELECT ") + kBatchColumns + " FROM api_batches WHERE id = $1", Params().add(id));
    if (r.rows() == 0) return std::nullopt;
    return read_batch(r, 0);
  }

  std::vector<ApiBatch> batches(const std::string& after, int32_t limit) override {
    Result r =
        db_.exec(std::string("SELECT ") + kBatchColumns +
                     " FROM api_batches WHERE ($1::text IS NULL OR seq < (SELECT seq FROM api_batches WHERE id = $1))"
                     " ORDER BY seq DESC LIMIT $2::bigint",
                 Params().add_text_or_null(after).add(int64_t{limit}));
    std::vector<ApiBatch> out;
    for (int i = 0; i < r.rows(); ++i) out.push_back(read_batch(r, i));
    return out;
  }

  bool update_batch(const ApiBatch& batch, std::span<const std::string> from, std::span<const ApiFile> files) override {
    Transaction tx(db_);
    Result now = db_.exec("SELECT status FROM api_batches WHERE id = $1 FOR UPDATE", Params().add(batch.id));
    if (now.rows() == 0) return false;
    bool allowed = false;
    for (const std::string& s : from) allowed = allowed || s == now.text(0, 0);
    if (!allowed) return false;
    db_.exec(std::string("UPDATE api_batches SET (") + kBatchColumns + ") = " + kBatchParams + " WHERE id = $1",
             batch_params(batch));
    for (const ApiFile& f : files) insert_file(db_, f);
    tx.commit();
    return true;
  }

 private:
  Conn db_;
};

}  // namespace

std::unique_ptr<ApiStore> open_pg_api_store(const std::string& url, const PgOptions& pg) {
  return std::make_unique<PgApiStore>(url, pg);
}

}  // namespace pg
}  // namespace ns::jobs
