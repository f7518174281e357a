// export --dir on a real queue and a real folder: continuations written next
// to their source names, the newest version of an edited document deciding,
// failures and unfinished documents reported, files not rewritten when
// unchanged, and names that would escape the folder refused.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

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
  db.finish_next(" The end.");      // one.md
  db.fail_next("io", "disk gone");  // sub/two.txt (jobs are claimed in relative-path order)
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

// Issue #30 B/N: the temporary name was "<name>.tmp-<pid>", opened with
// O_CREAT|O_TRUNC through whatever link was planted there, and exports took
// their mode from the umask.
TEST_CASE("export --dir writes through no planted link and makes its files 0600 whatever the umask") {
  ns::test::CliQueue db;
  const fs::path docs = db.dir.path() / "docs", out = db.dir.path() / "out", elsewhere = db.dir.path() / "elsewhere";
  const fs::path victim = db.dir.path() / "victim";
  ns::test::write_files(docs, {{"one.md", "One."}, {"two.md", "Two."}, {"sub/three.md", "Three."}});
  ns::test::write_file(victim, "precious");
  fs::create_directories(out);
  fs::create_directories(elsewhere);
  // The old temporary name (this process is the exporter), the final name, and a subfolder, all links.
  fs::create_symlink(victim, out / ("one.continued.md.tmp-" + std::to_string(::getpid())));
  fs::create_symlink(victim, out / "two.continued.md");
  fs::create_directory_symlink(elsewhere, out / "sub");
  submit_folder(*db.queue, docs);
  while (db.finish_next(" written") != 0) {
  }

  const mode_t old_umask = ::umask(0);
  const DocumentExportReport r = export_documents(*db.queue, out, {});
  ::umask(old_umask);
  CHECK(ns::test::read_file(victim) == "precious");
  CHECK(fs::is_empty(elsewhere));
  CHECK(r.written == std::vector<std::string>{"one.continued.md", "two.continued.md"});
  REQUIRE(r.problems.size() == 1);  // sub/three.md: its folder is a link
  CHECK(r.problems[0].name == "sub/three.md");
  CHECK(r.problems[0].message.find("link") != std::string::npos);
  // The final name's link was replaced by the file, not written through.
  CHECK_FALSE(fs::is_symlink(out / "two.continued.md"));
  CHECK(ns::test::read_file(out / "two.continued.md") == " written");
  for (const char* name : {"one.continued.md", "two.continued.md"}) {
    CAPTURE(name);
    CHECK(fs::status(out / name).permissions() == (fs::perms::owner_read | fs::perms::owner_write));
  }
  // No temporary file left behind (the planted link stays, untouched).
  for (const fs::directory_entry& e : fs::directory_iterator(out)) {
    if (e.is_symlink()) continue;
    CHECK(e.path().filename().string().find(".tmp-") == std::string::npos);
  }
  CHECK(fs::is_symlink(out / ("one.continued.md.tmp-" + std::to_string(::getpid()))));
}

// #31: a job cancelled mid-output was reported as cancelled and its partial continuation said nothing of.
TEST_CASE("a document cancelled mid-output: reported with its partial continuation's size, no file written") {
  ns::test::CliQueue db;
  const fs::path docs = db.dir.path() / "docs", out = db.dir.path() / "out";
  ns::test::write_files(docs, {{"one.md", "One."}});
  submit_folder(*db.queue, docs);
  auto job = db.queue->claim("test-worker", 60'000);
  REQUIRE(job);
  db.queue->cancel(job->id);
  REQUIRE(db.queue->finish_cancelled(
      job->lease(), {.text = " The e", .finish_reason = "cancelled", .prompt_tokens = 2, .completion_tokens = 3}));
  const DocumentExportReport r = export_documents(*db.queue, out, {});
  CHECK(r.written.empty());
  REQUIRE(r.problems.size() == 1);
  CHECK(r.problems[0].message.find("cancelled") == 0);
  CHECK(r.problems[0].message.find("its partial continuation (3 tokens) is not written: nightshift show " +
                                   std::to_string(job->id) + " --full") != std::string::npos);
  CHECK_FALSE(fs::exists(out / "one.continued.md"));
}
