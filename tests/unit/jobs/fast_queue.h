// Queue options for tests about queue logic rather than durability: commits
// without an fsync each, so the suite stays fast. (sqlite_schema_test.cpp
// checks the durable default; the integration tests run the real binaries.)
#pragma once

#include "jobs/queue.h"
#include "jobs/sqlite_queue.h"

namespace ns::test {

inline const jobs::SqliteOptions kFastCommits{.busy_timeout_ms = 5000, .synchronous = jobs::Synchronous::normal};

}  // namespace ns::test
