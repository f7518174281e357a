// Logging setup for nightshiftd: spdlog on stderr, one line per event.
//
// Under systemd (stderr is not a TTY and is the stream named by
// $JOURNAL_STREAM) lines carry no timestamp (journald adds its own) and start
// with a syslog priority prefix "<N>" so `journalctl -p warning` works.
// Elsewhere lines carry a local timestamp, coloured levels on a TTY.
#pragma once

#include <spdlog/common.h>

#include <string>

namespace ns::daemon {

// Throws ns::Error(invalid_input) listing the valid names.
spdlog::level::level_enum parse_log_level(const std::string& name);

// True when `fd` is not a TTY and is the stream $JOURNAL_STREAM ("dev:inode",
// set by systemd) names; `journal_stream` is that variable's value or null.
bool is_journal_stream(int fd, const char* journal_stream);
// is_journal_stream(stderr, getenv("JOURNAL_STREAM")).
bool stderr_is_journal();

// Installs the default logger; safe to call more than once.
void setup_logging(const std::string& level);

}  // namespace ns::daemon
