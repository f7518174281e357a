#include "daemon/lib/service_notify.h"

#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace ns::daemon {
namespace {

// STATUS= is one line of text.
std::string one_line(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return s;
}

}  // namespace

ServiceNotifier::ServiceNotifier() {
  const char* socket = std::getenv("NOTIFY_SOCKET");
  enabled_ = socket != nullptr && *socket != '\0';
  uint64_t usec = 0;
  // > 0 only when WatchdogSec= is set and $WATCHDOG_PID (if any) names this process.
  if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
    watchdog_period_ = std::chrono::microseconds(usec / 2);
  }
}

void ServiceNotifier::send(const std::string& message) const {
  if (!enabled_) return;
  const int rc = sd_notify(0, message.c_str());
  if (rc < 0) spdlog::debug("sd_notify({}) failed: {}", message.substr(0, message.find('\n')), std::strerror(-rc));
}

void ServiceNotifier::ready(const std::string& status) const { send("READY=1\nSTATUS=" + one_line(status)); }
void ServiceNotifier::status(const std::string& status) const { send("STATUS=" + one_line(status)); }
void ServiceNotifier::watchdog() const { send("WATCHDOG=1"); }
void ServiceNotifier::reloading() const { send("RELOADING=1\nSTATUS=reloading the config"); }
void ServiceNotifier::stopping(const std::string& status) const { send("STOPPING=1\nSTATUS=" + one_line(status)); }

}  // namespace ns::daemon
