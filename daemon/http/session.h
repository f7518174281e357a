// What the HTTP API's handlers share (daemon/http/): the service's state
// built once at start-up, the per-request Session holding this thread's
// database connections, the reply and the error an API call ends with.
#pragma once

#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "daemon/cli/model_check.h"
#include "daemon/http/auth.h"
#include "daemon/lib/config.h"
#include "jobs/api_store.h"
#include "jobs/queue.h"

namespace ns::http {

struct ServiceState {
  explicit ServiceState(const daemon::Config& c) : config(c), model_check(c, cli::ModelCheck::QueueMissingFiles{}) {}
  const daemon::Config config;
  KeyCheck keys;
  // submit --config's checks (model, chat template, prompt length); it caches what it read, so one caller at a time.
  std::mutex model_mu;
  cli::ModelCheck model_check;
};

struct Session {
  ServiceState& state;
  jobs::Queue& queue;
  jobs::ApiStore& store;
};

struct Reply {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
};
Reply json_reply(const nlohmann::ordered_json& body, int status = 200);

// An API call that ends in an error: the HTTP status and OpenAI's error
// object {"error": {"message", "type", "param", "code"}}.
class ApiError : public std::runtime_error {
 public:
  ApiError(int status, const std::string& message, std::string param = "", std::string code = "")
      : std::runtime_error(message), status_(status), param_(std::move(param)), code_(std::move(code)) {}
  int status() const { return status_; }
  const std::string& param() const { return param_; }
  const std::string& code() const { return code_; }

 private:
  int status_;
  std::string param_, code_;
};
Reply error_reply(int status, const std::string& message, const std::string& param = "", const std::string& code = "");

// prefix + 24 random hex digits ("file-...", "batch_...").
std::string new_object_id(std::string_view prefix);
int64_t now_unix_s();

}  // namespace ns::http
