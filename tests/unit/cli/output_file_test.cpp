// OutputFolder / OutputFile (daemon/cli/output_file.h), what `export --jsonl`
// writes through: never through a link at the final name, mode 0600 whatever
// the umask, nothing left behind by a file that is not committed.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "common/error.h"
#include "daemon/cli/output_file.h"
#include "tests/unit/jobs/temp_dir.h"

using namespace ns::cli;
namespace fs = std::filesystem;

TEST_CASE("an output file replaces a link at its name, is 0600 under umask 000, and leaves no temporary") {
  ns::test::TempDir t;
  const fs::path out = t.path() / "out", victim = t.path() / "victim";
  ns::test::write_file(victim, "precious");
  fs::create_directories(out);
  fs::create_symlink(victim, out / "results.jsonl");

  const mode_t old_umask = ::umask(0);
  {
    const OutputFolder folder(out);
    OutputFile file(folder, "results.jsonl");
    file.stream() << "{\"id\": 1}\n";
    file.commit();
    OutputFile abandoned(folder, "other.jsonl");  // never committed: removed
    abandoned.write("half");
  }
  ::umask(old_umask);
  CHECK(ns::test::read_file(victim) == "precious");
  CHECK_FALSE(fs::is_symlink(out / "results.jsonl"));
  CHECK(ns::test::read_file(out / "results.jsonl") == "{\"id\": 1}\n");
  CHECK(fs::status(out / "results.jsonl").permissions() == (fs::perms::owner_read | fs::perms::owner_write));
  int entries = 0;
  for ([[maybe_unused]] const fs::directory_entry& e : fs::directory_iterator(out)) ++entries;
  CHECK(entries == 1);

  // A subfolder that is a link is refused, not followed.
  fs::create_directory_symlink(t.path(), out / "sub");
  const OutputFolder folder(out);
  CHECK_THROWS_AS(folder.subfolder("sub"), ns::Error);
  CHECK_THROWS_AS(folder.subfolder("../x"), ns::Error);
  CHECK(folder.subfolder("new/deeper").path() == out / "new" / "deeper");
  CHECK(fs::is_directory(out / "new" / "deeper"));
}
