// The systemd notification protocol (sd_notify(3), libsystemd) for
// Type=notify: READY=1 once the queue is open, STATUS= lines people see in
// `systemctl status`, WATCHDOG=1 keep-alives, RELOADING=1 / STOPPING=1.
//
// Contract: every call is a no-op when the daemon was not started by
// systemd ($NOTIFY_SOCKET unset), so the same binary runs anywhere.
// Thread-safe (each call sends one datagram).
#pragma once

#include <chrono>
#include <string>

namespace ns::daemon {

class ServiceNotifier {
 public:
  // Reads $NOTIFY_SOCKET and the watchdog settings ($WATCHDOG_USEC, $WATCHDOG_PID).
  ServiceNotifier();

  bool enabled() const { return enabled_; }
  // How often to send WATCHDOG=1 (half of WatchdogSec=); zero when no watchdog is set.
  std::chrono::microseconds watchdog_period() const { return watchdog_period_; }

  void ready(const std::string& status) const;
  void status(const std::string& status) const;
  void watchdog() const;
  void reloading() const;
  void stopping(const std::string& status) const;

 private:
  void send(const std::string& message) const;
  bool enabled_ = false;
  std::chrono::microseconds watchdog_period_{0};
};

}  // namespace ns::daemon
