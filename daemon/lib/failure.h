// Which job failures are worth another attempt, and which are not the job's.
//
// Transient (the job goes back to the queue after a backoff, `dead` after
// max_attempts): I/O errors (a model on a disk not mounted yet, a read that
// failed), database errors, running out of memory. Permanent (`failed` at
// once; fix the cause and `nightshift retry ID`): invalid input (prompt,
// sampling values, a prompt longer than the context), a corrupt or
// unsupported model, internal errors, and I/O errors raised as
// PermanentError (a model file this user may not read). Neither: a
// DaemonConfigError (below) leaves the job queued.
#pragma once

#include <string>

#include "common/error.h"

namespace ns::daemon {

// An error of a usually transient kind that retrying cannot fix.
class PermanentError : public Error {
 public:
  using Error::Error;
};

// The daemon's own configuration cannot run the job: its model is not under
// models:, or memory_budget (or another engine setting) cannot load the
// model. Not the job's fault: the job is released (attempt not counted) and
// stays queued, the daemon backs off from that model and says so in its log
// and `nightshift status` until the config is fixed (SIGHUP) or the backoff
// tries again. Bad job input (prompt, sampling values) is not this.
class DaemonConfigError : public Error {
 public:
  using Error::Error;
};

bool is_transient_failure(const Error& e);

// An error out of running a model, of the same kind, named with the model and its file: "model NAME (PATH):
// what". A non-finite logit (bad_model) is most often the file's weights, not the job, and the reader must know
// which file. The worker names every error of a pass so; `nightshift run` its model faults (NAME: the file's stem).
Error model_run_error(const std::string& name, const std::string& path, const Error& e);

}  // namespace ns::daemon
