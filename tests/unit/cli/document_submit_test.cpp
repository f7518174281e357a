// submit --dir on a real folder and a real queue: which files are documents,
// one job per document, nothing twice on a rerun, a new job for an edited
// document, and a bad document reported without stopping the others.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "daemon/cli/document_submit.h"
#include "daemon/cli/sha256.h"
#include "tests/unit/cli/cli_queue.h"

using namespace ns::cli;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> names(const std::vector<Document>& docs) {
  std::vector<std::string> out;
  for (const Document& d : docs) out.push_back(d.relative_path);
  return out;
}

ns::jobs::JobSpec base() {
  ns::jobs::JobSpec s;
  s.model = "tiny";
  s.sampling.max_tokens = 9;
  return s;
}

}  // namespace

TEST_CASE("documents: matching files at any depth, not hidden ones, not export output") {
  ns::test::TempDir t;
  const fs::path docs = t.path() / "notes";
  ns::test::write_files(docs, {{"b.md", "B"},
                               {"a.txt", "A"},
                               {"sub/deeper/c.md", "C"},
                               {"skip.pdf", "not a document"},
                               {".hidden.md", "hidden"},
                               {".git/config.md", "hidden folder"},
                               {"b.continued.md", "written by export --dir"},
                               {"sub/c.continued", "written by export --dir"},
                               {"to.be.continued.later.md", "a document whose name merely contains the word"}});
  CHECK(names(find_documents(docs, kDefaultDocumentGlobs)) ==
        std::vector<std::string>{"a.txt", "b.md", "sub/deeper/c.md", "to.be.continued.later.md"});
  CHECK(names(find_documents(docs, {"*.md"})) ==
        std::vector<std::string>{"b.md", "sub/deeper/c.md", "to.be.continued.later.md"});
  CHECK(names(find_documents(docs, {"sub/*/*.md"})) == std::vector<std::string>{"sub/deeper/c.md"});
  CHECK(names(find_documents(docs, {"*.rst"})).empty());
  CHECK_THROWS_WITH_AS(find_documents(t.path() / "missing", kDefaultDocumentGlobs),
                       doctest::Contains("is not a folder"), ns::Error);
}

TEST_CASE("custom ids name the document and its version") {
  const std::string id = document_custom_id("notes/one.md", "text");
  CHECK(id == "notes/one.md@" + sha256_hex("text").substr(0, 16));
  CHECK(document_name(id) == "notes/one.md");
  CHECK(document_name("user@example.com") == "");  // not a document's id
  CHECK(document_name("req-7") == "");
  CHECK(document_name("@0123456789abcdef") == "");
  CHECK(batch_name_from_dir("/srv/notes/") == "notes");
  CHECK(batch_name_from_dir("/srv/notes") == "notes");
}

TEST_CASE("one job per document; a rerun queues nothing; an edited document gets one new job") {
  ns::test::CliQueue db;
  const fs::path docs = db.dir.path() / "docs";
  ns::test::write_files(
      docs, {{"one.md", "Chapter one. The rain"}, {"two.txt", "Notes: the meeting"}, {"sub/three.md", "Third"}});

  const DocumentSubmitReport first =
      submit_documents(*db.queue, find_documents(docs, kDefaultDocumentGlobs), base(), "docs");
  CHECK(first.created() == 3);
  CHECK(first.already() == 0);
  const auto job = db.queue->get(first.documents[0].id);
  REQUIRE(job);
  CHECK(job->spec.prompt == "Chapter one. The rain");
  CHECK(job->spec.batch == "docs");
  CHECK(job->spec.custom_id == "one.md@" + sha256_hex("Chapter one. The rain").substr(0, 16));
  CHECK(job->spec.idempotency_key == "docs:one.md:" + sha256_hex("Chapter one. The rain").substr(0, 16));
  CHECK(job->spec.source_path == (docs / "one.md").string());
  CHECK(job->spec.source_line == 0);
  CHECK(job->spec.sampling.max_tokens == 9);
  CHECK(db.queue->get(first.documents[1].id)->spec.custom_id.starts_with("sub/three.md@"));

  const DocumentSubmitReport again =
      submit_documents(*db.queue, find_documents(docs, kDefaultDocumentGlobs), base(), "docs");
  CHECK(again.created() == 0);
  CHECK(again.already() == 3);
  for (size_t i = 0; i < 3; ++i) CHECK(again.documents[i].id == first.documents[i].id);

  ns::test::write_file(docs / "two.txt", "Notes: the meeting ran late");
  const DocumentSubmitReport edited =
      submit_documents(*db.queue, find_documents(docs, kDefaultDocumentGlobs), base(), "docs");
  CHECK(edited.created() == 1);
  CHECK(edited.documents[2].relative_path == "two.txt");
  CHECK(edited.documents[2].created);
  CHECK(db.queue->counts("docs").queued == 4);
}

TEST_CASE("a document that cannot be queued is reported; the others are queued") {
  ns::test::CliQueue db;
  const fs::path docs = db.dir.path() / "docs";
  ns::test::write_files(docs, {{"empty.md", ""}, {"latin1.txt", "caf\xe9"}, {"good.md", "fine"}});
  const DocumentSubmitReport r =
      submit_documents(*db.queue, find_documents(docs, kDefaultDocumentGlobs), base(), "docs");
  CHECK(r.created() == 1);
  CHECK(r.rejected() == 2);
  CHECK(r.documents[0].relative_path == "empty.md");
  CHECK(r.documents[0].problem == "it is empty");
  CHECK(r.documents[2].relative_path == "latin1.txt");
  CHECK(r.documents[2].problem.find("UTF-8") != std::string::npos);
  CHECK(db.queue->counts().queued == 1);
}

// Issue #30 I: the file was checked when the folder was listed and opened by
// path later, so a file swapped for a link in between queued the link's target.
TEST_CASE("a document swapped for a link after the folder was listed is refused, not read") {
  ns::test::CliQueue db;
  const fs::path docs = db.dir.path() / "docs", secret = db.dir.path() / "secret.yaml";
  ns::test::write_files(docs, {{"a.md", "A"}, {"sub/b.md", "B"}, {"d.md", "D"}});
  ns::test::write_file(secret, "database: postgresql://ns:hunter2@db/ns");
  ns::test::write_file(db.dir.path() / "outside" / "b.md", "outside secret");
  const std::vector<Document> listed = find_documents(docs, kDefaultDocumentGlobs);
  REQUIRE(names(listed) == std::vector<std::string>{"a.md", "d.md", "sub/b.md"});
  // Swapped between the listing and the reading: a file for a link, a folder for a link.
  fs::remove(docs / "a.md");
  fs::create_symlink(secret, docs / "a.md");
  fs::remove_all(docs / "sub");
  fs::create_directory_symlink(db.dir.path() / "outside", docs / "sub");

  const DocumentSubmitReport r = submit_documents(*db.queue, listed, base(), "docs");
  CHECK(r.created() == 1);  // d.md
  REQUIRE(r.documents.size() == 3);
  CHECK(r.documents[0].problem.find("symbolic link") != std::string::npos);
  CHECK(r.documents[1].problem.empty());
  CHECK(r.documents[2].problem.find("symbolic link") != std::string::npos);
  for (const ns::jobs::Job& job : db.queue->list({})) {
    CHECK(job.spec.prompt.find("secret") == std::string::npos);
    CHECK(job.spec.prompt.find("hunter2") == std::string::npos);
  }

  // Asked for (--follow-symlinks), a link is read.
  const DocumentSubmitReport followed =
      submit_documents(*db.queue, find_documents(docs, kDefaultDocumentGlobs, true), base(), "docs");
  CHECK(followed.documents[0].problem.empty());
}

TEST_CASE("a document replaced by something else than a regular file is reported, not read") {
  ns::test::CliQueue db;
  const fs::path docs = db.dir.path() / "docs";
  ns::test::write_files(docs, {{"a.md", "A"}, {"b.md", "B"}});
  const std::vector<Document> listed = find_documents(docs, kDefaultDocumentGlobs);
  fs::remove(docs / "a.md");
  fs::create_directory(docs / "a.md");
  const DocumentSubmitReport r = submit_documents(*db.queue, listed, base(), "docs");
  CHECK(r.created() == 1);
  REQUIRE(r.documents.size() == 2);
  CHECK(r.documents[0].problem.find("not a regular file") != std::string::npos);
}
