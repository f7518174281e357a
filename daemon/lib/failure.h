// Which job failures are worth another attempt.
//
// Transient (the job goes back to the queue after a backoff, `dead` after
// max_attempts): I/O errors (a model on a disk not mounted yet, a read that
// failed), database errors, running out of memory. Permanent (`failed` at
// once; fix the cause and `nightshift retry ID`): invalid input (prompt,
// sampling values, a model name not in the config, a prompt longer than the
// context), a corrupt or unsupported model, internal errors, and I/O errors
// raised as PermanentError (a model file this user may not read).
#pragma once

#include "engine/util/error.h"

namespace ns::daemon {

// An error of a usually transient kind that retrying cannot fix.
class PermanentError : public Error {
 public:
  using Error::Error;
};

bool is_transient_failure(const Error& e);

}  // namespace ns::daemon
