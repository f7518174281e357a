#include "daemon/http/session.h"

#include <chrono>
#include <random>

namespace ns::http {

Reply json_reply(const nlohmann::ordered_json& body, int status) {
  return {status, body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json"};
}

Reply error_reply(int status, const std::string& message, const std::string& param, const std::string& code) {
  const char* type = status == 401 ? "authentication_error" : status >= 500 ? "server_error" : "invalid_request_error";
  nlohmann::ordered_json e;
  e["message"] = message;
  e["type"] = type;
  e["param"] = param.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(param);
  e["code"] = code.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(code);
  return json_reply({{"error", e}}, status);
}

std::string new_object_id(std::string_view prefix) {
  std::random_device rd;  // the kernel's random numbers: ids from several daemons never collide
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id(prefix);
  for (int i = 0; i < 3; ++i) {
    uint32_t r = rd();
    for (int k = 0; k < 8; ++k, r >>= 4) id += kHex[r & 15];
  }
  return id;
}

int64_t now_unix_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace ns::http
