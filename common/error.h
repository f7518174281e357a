// Errors that carry context. Thrown by library code, caught at one boundary
// (a CLI command, a job in the daemon) where they become a message or a failed row.
#pragma once

#include <stdexcept>
#include <string>

namespace ns {

// What kind of failure: lets the daemon tell a bad job (fail it, carry on)
// from a transient fault (retry later).
enum class ErrorKind {
  invalid_input,  // the user's input is wrong: fix it and resubmit
  bad_model,      // the GGUF file is corrupt, truncated or unsupported
  io,             // the disk or filesystem failed
  database,       // SQLite failed
  internal,
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& what) : std::runtime_error(what), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

// A file shorter than its own header says, or a split model missing shards:
// what a copy or download in progress (or cut off) looks like, which a later
// look may find complete. The daemon keeps such a model's jobs queued and
// tries the file again, as for a path typo.
class IncompleteFileError : public Error {
 public:
  explicit IncompleteFileError(const std::string& what) : Error(ErrorKind::bad_model, what) {}
};

inline const char* error_kind_name(ErrorKind k) {
  switch (k) {
    case ErrorKind::invalid_input: return "invalid_input";
    case ErrorKind::bad_model: return "bad_model";
    case ErrorKind::io: return "io";
    case ErrorKind::database: return "database";
    case ErrorKind::internal: return "internal";
  }
  return "internal";
}

}  // namespace ns
