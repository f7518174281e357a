// export --dir on a real queue and a real folder: continuations written next
// to their source names, the newest version of an edited document deciding,
// failures and unfinished documents reported, files not rewritten when
// unchanged, and names that would escape the folder refused.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "daemon/cli/document_export.h"
#include "daemon/cli/document_submit.h"
#include "tests/unit/cli/cli_queue.h"

using namespace ns::cli;
namespace fs = std::filesystem;

namespace {

void submit_folder(ns::jobs::Queue& q, const fs::path& docs, const std::string& batch = "docs") {
  ns::jobs::JobSpec base;
  base.model = "tiny";
  submit_documents(q, find_documents(docs, kDefaultDocumentGlobs), base, batch);
}

}  // namespace

TEST_CASE("continued names keep the folder and the extension") {
  CHECK(continued_name("one.md") == "one.continued.md");
  CHECK(continued_name("sub/deeper/c.txt") == "sub/deeper/c.continued.txt");
  CHECK(continued_name("README") == "README.continued");
  CHECK(continued_name("a.tar.gz") == "a.tar.continued.gz");
}

TEST_CASE("each finished document's continuation is written under OUT with its relative path") {
  ns::test::CliQueue db;
  const fs::path docs = db.dir.path() / "docs", out = db.dir.path() / "out";
  ns::test::write_files(docs, {{"one.md", "One."}, {"sub/two.txt", "Two."}, {"three.md", "Three."}});
  submit_folder(*db.queue, docs);
  db.finish_next(" The end.");       // one.md
  db.fail_next("io", "disk gone");   // sub/two.txt (jobs are claimed in relative-path order)
  // three.md stays queued

  DocumentExportReport r = export_documents(*db.queue, out, {});
  CHECK(r.written == std::vector<std::string>{"one.continued.md"});
  CHECK(ns::test::read_file(out / "one.continued.md") == " The end.");
  CHECK(r.pending == 1);
  REQUIRE(r.problems.size() == 1);
  CHECK(r.problems[0].name == "sub/two.txt");
  CHECK(r.problems[0].message == "failed: io: disk gone");
  CHECK_FALSE(fs::exists(out / "three.continued.md"));

  // Again: nothing changed, nothing rewritten; then the last one finishes.
  r = export_documents(*db.queue, out, {});
  CHECK(r.written.empty());
  CHECK(r.unchanged == 1);
  db.finish_next(" Four.");
  DocumentExportOptions with_doc;
  with_doc.with_document = true;
  r = export_documents(*db.queue, out, with_doc);
  CHECK(r.written == std::vector<std::string>{"one.continued.md", "three.continued.md"});
  CHECK(ns::test::read_file(out / "one.continued.md") == "One. The end.");
  CHECK(ns::test::read_file(out / "three.continued.md") == "Three. Four.");

  // Exporting into the documents' folder: the output is never taken for a document.
  export_documents(*db.queue, docs, {});
  CHECK(fs::exists(docs / "one.continued.md"));
  CHECK(find_documents(docs, kDefaultDocumentGlobs).size() == 3);
}

TEST_CASE("an edited document: its newest version decides") {
  ns::test::CliQueue db;
  const fs::path docs = db.dir.path() / "docs", out = db.dir.path() / "out";
  ns::test::write_file(docs / "one.md", "Version one.");
  submit_folder(*db.queue, docs);
  db.finish_next(" Old continuation.");
  ns::test::write_file(docs / "one.md", "Version two.");
  submit_folder(*db.queue, docs);

  DocumentExportReport r = export_documents(*db.queue, out, {});
  CHECK(r.written.empty());
  CHECK(r.pending == 1);  // the new version is not done: the old text is not written as if it were
  CHECK(r.superseded == 1);
  db.finish_next(" New continuation.");
  r = export_documents(*db.queue, out, {});
  CHECK(r.written == std::vector<std::string>{"one.continued.md"});
  CHECK(ns::test::read_file(out / "one.continued.md") == " New continuation.");
}

TEST_CASE("--batch picks one batch; JSONL and plain jobs are not documents; escaping names are refused") {
  ns::test::CliQueue db;
  const fs::path a = db.dir.path() / "a", b = db.dir.path() / "b", out = db.dir.path() / "out";
  ns::test::write_file(a / "x.md", "From a.");
  ns::test::write_file(b / "y.md", "From b.");
  submit_folder(*db.queue, a, "batch-a");
  submit_folder(*db.queue, b, "batch-b");
  ns::jobs::JobSpec plain;
  plain.model = "tiny";
  plain.prompt = "not a document";
  db.queue->submit(plain);
  ns::jobs::JobSpec evil = plain;
  evil.batch = "batch-a";
  evil.custom_id = "../../etc/evil.md@0123456789abcdef";
  evil.source_path = "/somewhere/evil.md";
  db.queue->submit(evil);
  while (db.finish_next(" done") != 0) {
  }
  DocumentExportOptions only_a;
  only_a.batch = "batch-a";
  const DocumentExportReport r = export_documents(*db.queue, out, only_a);
  CHECK(r.written == std::vector<std::string>{"x.continued.md"});
  REQUIRE(r.problems.size() == 1);
  CHECK(r.problems[0].message.find("outside") != std::string::npos);
  CHECK_FALSE(fs::exists(db.dir.path() / "etc"));
  CHECK(export_documents(*db.queue, out, {}).written == std::vector<std::string>{"y.continued.md"});
}
