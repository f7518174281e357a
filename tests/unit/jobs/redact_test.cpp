// redact_secrets (common/redact.h) on a table of database URLs and conninfo
// strings: the whole password goes, whatever it holds ('?', '/', '@', ':'),
// and nothing else changes. Issue #30 C: a regex stopped at '?' or '/' and
// printed the rest of the password.
#include <doctest/doctest.h>

#include <string>

#include "common/redact.h"

TEST_CASE("passwords are redacted whole, whatever characters they hold") {
  struct Row {
    const char* in;
    const char* out;
  };
  const Row rows[] = {
      {"postgresql://night:s3cret@db.example/queue", "postgresql://night:***@db.example/queue"},
      {"postgresql://ns3:Qx?hunter2pw@db.example:5432/nightshift", "postgresql://ns3:***@db.example:5432/nightshift"},
      {"postgresql://u:S3cr?tPw/zz@host:5432/db", "postgresql://u:***@host:5432/db"},
      {"postgres://u:p@ss@host/db", "postgres://u:***@host/db"},
      {"postgres://u:a:b@host/db", "postgres://u:***@host/db"},
      {"postgresql://u:pw#frag@host/db?sslmode=require", "postgresql://u:***@host/db?sslmode=require"},
      {"POSTGRESQL://u:pw@host/db", "POSTGRESQL://u:***@host/db"},
      {"postgresql://u:pw@host", "postgresql://u:***@host"},
      {"postgresql://u:pw@/db?host=/run/postgresql", "postgresql://u:***@/db?host=/run/postgresql"},
      {"postgresql://u:@host/db", "postgresql://u:***@host/db"},
      {"postgresql://night@db/q", "postgresql://night@db/q"},
      {"postgresql://db/q", "postgresql://db/q"},
      {"postgresql://db/q?user=me@corp&sslmode=require", "postgresql://db/q?user=me@corp&sslmode=require"},
      {"postgres://db/q?user=n&password=s3cret&sslmode=require", "postgres://db/q?user=n&password=***&sslmode=require"},
      {"postgres://db/q?password=s3?cr/et", "postgres://db/q?password=***"},
      {"postgres://u:one@db/q?PASSWORD=two#x", "postgres://u:***@db/q?PASSWORD=***#x"},
      {"host=db user=ns password=s3cret dbname=q", "host=db user=ns password=*** dbname=q"},
      {"host=db password = 'a b\\' c' dbname=q", "host=db password = *** dbname=q"},
      {"password=x?y/z@w", "password=***"},
      {"/var/lib/nightshift/queue.db", "/var/lib/nightshift/queue.db"},
      {"q.db", "q.db"},
      {"", ""},
      // A message quoting a URL.
      {"cannot connect to postgresql://ns3:Qx?hunter2pw@db/ns: refused",
       "cannot connect to postgresql://ns3:***@db/ns: refused"},
      {"retrying postgres://u:p?w@db/q with password=other", "retrying postgres://u:***@db/q with password=***"},
  };
  for (const Row& row : rows) {
    CAPTURE(row.in);
    CHECK(ns::redact_secrets(row.in) == row.out);
  }
}
