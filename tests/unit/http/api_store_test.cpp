// The Files and Batches tables (jobs/api_store.h) on both backends: files
// stored and listed in pages, batches updated only from the statuses named,
// with their files in the same transaction.
#include <doctest/doctest.h>

#include <array>
#include <string>

#include "jobs/api_store.h"
#include "tests/unit/jobs/backends.h"

using ns::jobs::ApiBatch;
using ns::jobs::ApiFile;

namespace {

std::unique_ptr<ns::jobs::ApiStore> store_of(const std::string& location) {
  return ns::jobs::open_api_store(location, ns::test::kFastCommits);
}

}  // namespace

QUEUE_TEST("api store: files are kept, listed newest first in pages, and deleted") {
  QUEUE_BACKEND(db);
  auto queue = db.open();  // the queue's own migrations made the tables
  auto store = store_of(db.location());
  for (int i = 1; i <= 5; ++i) {
    store->add_file({"file-" + std::to_string(i), "in" + std::to_string(i) + ".jsonl",
                     i == 3 ? "batch_output" : "batch", 10 * i, 1000 + i, "line " + std::to_string(i) + "\n"});
  }
  const std::optional<ApiFile> f = store->file("file-2", true);
  REQUIRE(f);
  CHECK(f->filename == "in2.jsonl");
  CHECK(f->bytes == 20);
  CHECK(f->created_at == 1002);
  CHECK(f->content == "line 2\n");
  CHECK(store->file("file-2", false)->content.empty());
  CHECK_FALSE(store->file("file-9", false));

  const auto ids = [](const std::vector<ApiFile>& files) {
    std::string s;
    for (const ApiFile& x : files) s += x.id + " ";
    return s;
  };
  CHECK(ids(store->files("", "", 2, false)) == "file-5 file-4 ");
  CHECK(ids(store->files("", "file-4", 2, false)) == "file-3 file-2 ");
  CHECK(ids(store->files("", "file-2", 2, false)) == "file-1 ");
  CHECK(ids(store->files("", "", 10, true)) == "file-1 file-2 file-3 file-4 file-5 ");
  CHECK(ids(store->files("batch", "", 10, false)) == "file-5 file-4 file-2 file-1 ");
  CHECK(ids(store->files("batch_output", "", 10, false)) == "file-3 ");

  CHECK(store->delete_file("file-4"));
  CHECK_FALSE(store->delete_file("file-4"));
  CHECK(ids(store->files("", "", 10, false)) == "file-5 file-3 file-2 file-1 ");
  // Another connection (another daemon) sees the same.
  CHECK(ids(store_of(db.location())->files("", "", 10, false)) == "file-5 file-3 file-2 file-1 ");
}

QUEUE_TEST("api store: a batch changes only from the statuses named, with its files") {
  QUEUE_BACKEND(db);
  auto queue = db.open();
  auto store = store_of(db.location());
  ApiBatch b;
  b.id = "batch_1";
  b.endpoint = "/v1/chat/completions";
  b.input_file_id = "file-1";
  b.completion_window = "24h";
  b.status = "validating";
  b.metadata = R"({"k":"v"})";
  b.total = 3;
  b.created_at = 100;
  b.expires_at = 200;
  store->add_batch(b);
  std::optional<ApiBatch> got = store->batch("batch_1");
  REQUIRE(got);
  CHECK(got->status == "validating");
  CHECK(got->metadata == R"({"k":"v"})");
  CHECK(got->output_file_id.empty());
  CHECK(got->in_progress_at == 0);
  CHECK(got->expires_at == 200);

  b.status = "in_progress";
  b.in_progress_at = 101;
  b.model = "tiny";
  CHECK_FALSE(store->update_batch(b, std::array<std::string, 1>{"cancelling"}));
  CHECK(store->batch("batch_1")->status == "validating");
  CHECK(store->update_batch(b, std::array<std::string, 1>{"validating"}));
  CHECK(store->batch("batch_1")->model == "tiny");

  b.status = "completed";
  b.completed_at = 150;
  b.completed = 2;
  b.failed = 1;
  b.input_tokens = 30;
  b.output_file_id = "file-out";
  const std::array<ApiFile, 1> out{ApiFile{"file-out", "batch_1_output.jsonl", "batch_output", 4, 150, "out\n"}};
  CHECK(store->update_batch(b, std::array<std::string, 1>{"in_progress"}, out));
  // A second daemon finishing the same batch writes nothing (and no second file).
  const std::array<ApiFile, 1> dup{ApiFile{"file-dup", "batch_1_output.jsonl", "batch_output", 4, 151, "dup\n"}};
  CHECK_FALSE(store->update_batch(b, std::array<std::string, 1>{"in_progress"}, dup));
  CHECK_FALSE(store->file("file-dup", false));
  got = store->batch("batch_1");
  CHECK(got->status == "completed");
  CHECK(got->completed == 2);
  CHECK(got->input_tokens == 30);
  CHECK(got->output_file_id == "file-out");
  CHECK(store->file("file-out", true)->content == "out\n");

  for (int i = 2; i <= 4; ++i) {
    ApiBatch more = b;
    more.id = "batch_" + std::to_string(i);
    store->add_batch(more);
  }
  const std::vector<ApiBatch> page = store->batches("", 2);
  REQUIRE(page.size() == 2);
  CHECK(page[0].id == "batch_4");
  CHECK(page[1].id == "batch_3");
  const std::vector<ApiBatch> next = store->batches("batch_3", 5);
  REQUIRE(next.size() == 2);
  CHECK(next[1].id == "batch_1");
}
