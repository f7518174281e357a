// Journal detection: systemd's JOURNAL_STREAM must name the very stream.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "daemon/lib/logging.h"
#include "tests/unit/jobs/temp_dir.h"

TEST_CASE("a stream is the journal only when JOURNAL_STREAM names its device and inode") {
  ns::test::TempDir dir;
  const std::string path = dir.file("log");
  const int fd = open(path.c_str(), O_CREAT | O_WRONLY, 0600);
  REQUIRE(fd >= 0);
  struct stat st {};
  REQUIRE(fstat(fd, &st) == 0);
  const std::string same = std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
  const std::string other = std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino + 1);

  CHECK(ns::daemon::is_journal_stream(fd, same.c_str()));
  CHECK_FALSE(ns::daemon::is_journal_stream(fd, other.c_str()));
  CHECK_FALSE(ns::daemon::is_journal_stream(fd, nullptr));
  CHECK_FALSE(ns::daemon::is_journal_stream(fd, ""));
  CHECK_FALSE(ns::daemon::is_journal_stream(fd, "garbage"));
  close(fd);
}
