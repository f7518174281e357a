#include "daemon/lib/logging.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "daemon/lib/config.h"
#include "common/error.h"

namespace ns::daemon {
namespace {

// "%*" in a pattern: the sd-daemon(3) priority prefix journald parses.
class SyslogPriorityFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    const char* prefix = "<6>";
    switch (msg.level) {
      case spdlog::level::trace:
      case spdlog::level::debug: prefix = "<7>"; break;
      case spdlog::level::info: prefix = "<6>"; break;
      case spdlog::level::warn: prefix = "<4>"; break;
      case spdlog::level::err: prefix = "<3>"; break;
      case spdlog::level::critical: prefix = "<2>"; break;
      default: break;
    }
    dest.append(prefix, prefix + 3);
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<SyslogPriorityFlag>(); }
};

}  // namespace

spdlog::level::level_enum parse_log_level(const std::string& name) {
  static const spdlog::level::level_enum kLevels[] = {
      spdlog::level::trace, spdlog::level::debug,    spdlog::level::info, spdlog::level::warn,
      spdlog::level::err,   spdlog::level::critical, spdlog::level::off};
  const auto& names = log_level_names();
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return kLevels[i];
  }
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
  throw Error(ErrorKind::invalid_input, "unknown log level '" + name + "'; use one of: " + list);
}

bool is_journal_stream(int fd, const char* journal_stream) {
  if (journal_stream == nullptr || *journal_stream == '\0' || isatty(fd)) return false;
  // A child whose stderr was redirected elsewhere inherits the variable but
  // not the stream, hence the device/inode comparison (see systemd.exec(5)).
  unsigned long long dev = 0, ino = 0;
  struct stat st {};
  if (std::sscanf(journal_stream, "%llu:%llu", &dev, &ino) != 2 || fstat(fd, &st) != 0) return false;
  return st.st_dev == dev && st.st_ino == ino;
}

bool stderr_is_journal() { return is_journal_stream(STDERR_FILENO, std::getenv("JOURNAL_STREAM")); }

void setup_logging(const std::string& level) {
  const spdlog::level::level_enum lvl = parse_log_level(level);
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  std::shared_ptr<spdlog::logger> logger;
  if (stderr_is_journal()) {
    formatter->add_flag<SyslogPriorityFlag>('*').set_pattern("%*%l: %v");
    logger = std::make_shared<spdlog::logger>("nightshiftd", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  } else {
    formatter->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%^%l%$] %v");
    logger = std::make_shared<spdlog::logger>("nightshiftd", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  }
  logger->set_formatter(std::move(formatter));
  logger->set_level(lvl);
  logger->flush_on(spdlog::level::trace);  // a daemon's log must survive a crash
  spdlog::set_default_logger(std::move(logger));
}

}  // namespace ns::daemon
