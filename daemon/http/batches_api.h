// The Batches API: POST /v1/batches, GET /v1/batches/{id}, GET /v1/batches
// (after, limit), POST /v1/batches/{id}/cancel. A batch is the queue's named
// batch whose name is the batch's id: its requests become ordinary jobs
// (`nightshift status`, `list --batch`, `export --batch` see them), and its
// object (jobs::ApiBatch) follows them (daemon/http/batch_object.h).
//
// Contract:
// - create: the input file's requests are queued as `nightshift submit
//   --jsonl --config` queues them (cli::submit_jsonl with the daemon's model
//   check), a request's body.model mapped through http.models (or a name
//   under models:). A request that cannot run (unknown model, url not the
//   batch's endpoint, no chat template, prompt longer than the context) is
//   refused alone: it is in the batch's `errors` and its error file, and
//   counts as failed; a batch with no runnable request is `failed`.
// - get/list bring a batch up to date with its jobs: when every job has
//   ended, its output file (the done jobs' lines, as `nightshift export`
//   writes them) and its error file (failed, dead and cancelled jobs, and the
//   refused requests) are written to the database and the batch completes;
//   a passed completion window cancels the unfinished jobs (expired).
// - cancel: cancelling, every unfinished job cancelled (a running one at its
//   next token), then cancelled with the files of what had finished.
// Safe with several daemons on one queue: every status change is
// compare-and-set (jobs::ApiStore::update_batch), job submission idempotent.
#pragma once

#include <httplib.h>

#include "daemon/http/session.h"

namespace ns::http {

Reply create_batch(Session& s, const httplib::Request& req);
Reply get_batch(Session& s, const httplib::Request& req);  // matches[1]: the id
Reply list_batches(Session& s, const httplib::Request& req);
Reply cancel_batch(Session& s, const httplib::Request& req);  // matches[1]: the id

// The batch brought up to date with its jobs (see the contract), as stored after.
jobs::ApiBatch refresh_batch(Session& s, jobs::ApiBatch batch);

}  // namespace ns::http
