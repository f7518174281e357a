// The PostgreSQL backend of the job queue (jobs/pg_queue.cpp): how to open
// it. Everything else about the queue is backend-neutral (jobs/queue.h).
#pragma once

#include <memory>
#include <string>

#include "jobs/queue.h"

namespace ns::jobs {

// Connects to the database named by a libpq URL (postgresql://user@host/db,
// postgres://..., with ?host=/socket/dir for a unix socket), applying
// schema/postgres migrations. Throws DatabaseError (transient when the server
// cannot be reached yet). The queue reconnects by itself after a lost
// connection; times come from the database server's clock.
std::unique_ptr<Queue> open_pg_queue(const std::string& url);

}  // namespace ns::jobs
