// The SQLite backend of ns::jobs::ApiStore (contract in jobs/api_store.h,
// tables in schema/sqlite/012_openai_api.sql). Writes are BEGIN IMMEDIATE
// transactions; a status change re-reads the status under the write lock.
#include <string>

#include "jobs/api_store.h"
#include "jobs/sqlite_db.h"
#include "jobs/sqlite_migrations.h"

namespace ns::jobs {
namespace sqlite {
namespace {

constexpr const char* kFileColumns = "id, filename, purpose, bytes, created_at";
// The batch columns in ApiBatch's order (read_batch, bind_batch).
constexpr const char* kBatchColumns =
    "id, endpoint, input_file_id, completion_window, status, output_file_id, error_file_id, errors, model, metadata, "
    "total, rejected, completed, failed, input_tokens, output_tokens, cached_tokens, created_at, in_progress_at, expires_at, finalizing_at, completed_at, "
    "failed_at, expired_at, cancelling_at, cancelled_at";

ApiFile read_file(const Stmt& st) {
  ApiFile f;
  f.id = st.text(0);
  f.filename = st.text(1);
  f.purpose = st.text(2);
  f.bytes = st.int64(3);
  f.created_at = st.int64(4);
  return f;
}

ApiBatch read_batch(const Stmt& st) {
  ApiBatch b;
  int c = 0;
  for (std::string* s : {&b.id, &b.endpoint, &b.input_file_id, &b.completion_window, &b.status, &b.output_file_id,
                         &b.error_file_id, &b.errors, &b.model, &b.metadata}) {
    *s = st.text(c++);
  }
  for (int64_t* v : {&b.total, &b.rejected, &b.completed, &b.failed, &b.input_tokens, &b.output_tokens,
                     &b.cached_tokens, &b.created_at, &b.in_progress_at, &b.expires_at, &b.finalizing_at,
                     &b.completed_at, &b.failed_at, &b.expired_at, &b.cancelling_at, &b.cancelled_at}) {
    *v = st.int64(c++);
  }
  return b;
}

// Parameters 1..26 in kBatchColumns' order; optional texts and times as NULL.
void bind_batch(Stmt& st, const ApiBatch& b) {
  int i = 1;
  for (const std::string* s : {&b.id, &b.endpoint, &b.input_file_id, &b.completion_window, &b.status}) st.bind(i++, *s);
  for (const std::string* s : {&b.output_file_id, &b.error_file_id, &b.errors, &b.model, &b.metadata})
    st.bind_text_or_null(i++, *s);
  for (int64_t v :
       {b.total, b.rejected, b.completed, b.failed, b.input_tokens, b.output_tokens, b.cached_tokens, b.created_at})
    st.bind(i++, v);
  for (int64_t v : {b.in_progress_at, b.expires_at, b.finalizing_at, b.completed_at, b.failed_at, b.expired_at,
                    b.cancelling_at, b.cancelled_at}) {
    if (v == 0) {
      st.bind_null(i++);
    } else {
      st.bind(i++, v);
    }
  }
}

void insert_file(Db& db, const ApiFile& f) {
  Stmt st(db,
          "INSERT INTO api_files (id, filename, purpose, bytes, created_at, content) VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
  st.bind(1, f.id).bind(2, f.filename).bind(3, f.purpose).bind(4, f.bytes).bind(5, f.created_at).bind(6, f.content);
  st.run();
}

class SqliteApiStore final : public ApiStore {
 public:
  SqliteApiStore(const std::string& path, const SqliteOptions& options) : db_(path, options) { migrate(db_); }

  void add_file(const ApiFile& file) override {
    WriteTransaction tx(db_);
    insert_file(db_, file);
    tx.commit();
  }

  std::optional<ApiFile> file(const std::string& id, bool with_content) override {
    Stmt st(db_, std::string("SELECT ") + kFileColumns + (with_content ? ", content" : "") +
                     " FROM api_files WHERE id = ?1");
    st.bind(1, id);
    if (!st.step()) return std::nullopt;
    ApiFile f = read_file(st);
    if (with_content) f.content = st.text(5);
    return f;
  }

  std::vector<ApiFile> files(const std::string& purpose, const std::string& after, int32_t limit,
                             bool ascending) override {
    const std::string cmp = ascending ? ">" : "<";
    Stmt st(db_, std::string("SELECT ") + kFileColumns + " FROM api_files WHERE (?1 IS NULL OR purpose = ?1)" +
                     " AND (?2 IS NULL OR seq " + cmp + " (SELECT seq FROM api_files WHERE id = ?2))" +
                     " ORDER BY seq " + (ascending ? "ASC" : "DESC") + " LIMIT ?3");
    st.bind_text_or_null(1, purpose).bind_text_or_null(2, after).bind(3, int64_t{limit});
    std::vector<ApiFile> out;
    while (st.step()) out.push_back(read_file(st));
    return out;
  }

  bool delete_file(const std::string& id) override {
    WriteTransaction tx(db_);
    Stmt st(db_, "DELETE FROM api_files WHERE id = ?1");
    st.bind(1, id);
    st.run();
    const bool deleted = db_.changes() > 0;
    tx.commit();
    return deleted;
  }

  void add_batch(const ApiBatch& batch) override {
    WriteTransaction tx(db_);
    Stmt st(db_, std::string("INSERT INTO api_batches (") + kBatchColumns +
                     ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, "
                     "?20, ?21, ?22, ?23, ?24, ?25, ?26)");
    bind_batch(st, batch);
    st.run();
    tx.commit();
  }

  std::optional<ApiBatch> batch(const std::string& id) override {
    Stmt st(db_, std::string("SELECT ") + kBatchColumns + " FROM api_batches WHERE id = ?1");
    st.bind(1, id);
    if (!st.step()) return std::nullopt;
    return read_batch(st);
  }

  std::vector<ApiBatch> batches(const std::string& after, int32_t limit) override {
    Stmt st(db_, std::string("SELECT ") + kBatchColumns +
                     " FROM api_batches WHERE (?1 IS NULL OR seq < (SELECT seq FROM api_batches WHERE id = ?1))"
                     " ORDER BY seq DESC LIMIT ?2");
    st.bind_text_or_null(1, after).bind(2, int64_t{limit});
    std::vector<ApiBatch> out;
    while (st.step()) out.push_back(read_batch(st));
    return out;
  }

  bool update_batch(const ApiBatch& batch, std::span<const std::string> from, std::span<const ApiFile> files) override {
    WriteTransaction tx(db_);
    Stmt now(db_, "SELECT status FROM api_batches WHERE id = ?1");
    now.bind(1, batch.id);
    if (!now.step()) return false;
    const std::string status = now.text(0);
    now.reset();
    bool allowed = false;
    for (const std::string& s : from) allowed = allowed || s == status;
    if (!allowed) return false;
    Stmt st(db_, std::string("UPDATE api_batches SET (") + kBatchColumns +
                     ") = (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, "
                     "?20, ?21, ?22, ?23, ?24, ?25, ?26) WHERE id = ?1");
    bind_batch(st, batch);
    st.run();
    for (const ApiFile& f : files) insert_file(db_, f);
    tx.commit();
    return true;
  }

 private:
  Db db_;
};

}  // namespace

std::unique_ptr<ApiStore> open_sqlite_api_store(const std::string& path, const SqliteOptions& options) {
  return std::make_unique<SqliteApiStore>(path, options);
}

}  // namespace sqlite
}  // namespace ns::jobs
