#include "engine/state/process_stats.h"

#include <fstream>
#include <string>

namespace ns {

uint64_t process_read_bytes() {
  std::ifstream in("/proc/self/io");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("read_bytes:", 0) == 0) return std::stoull(line.substr(11));
  return 0;
}

uint64_t peak_rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  return 0;
}

}  // namespace ns
