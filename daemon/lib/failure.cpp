#include "daemon/lib/failure.h"

namespace ns::daemon {

bool is_transient_failure(const Error& e) {
  if (dynamic_cast<const PermanentError*>(&e) != nullptr) return false;
  switch (e.kind()) {
    case ErrorKind::io:
    case ErrorKind::database: return true;
    case ErrorKind::invalid_input:
    case ErrorKind::bad_model:
    case ErrorKind::internal: return false;
  }
  return false;
}

Error model_run_error(const std::string& name, const std::string& path, const Error& e) {
  return Error(e.kind(), "model " + name + " (" + path + "): " + e.what());
}

}  // namespace ns::daemon
