#include "engine/stream/memory_limit.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <sstream>

#include "common/human_size.h"

namespace ns::stream {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kNoLimit = 1ull << 62;  // v1 reports "unlimited" as 2^63 rounded down to a page
constexpr uint64_t kMinHeadroom = 512ull << 20;

std::optional<std::string> first_line(const fs::path& file) {
  std::ifstream in(file);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  return line;
}

// A limit file's value; nullopt for no file, "max", a huge value or junk.
std::optional<uint64_t> limit_in(const fs::path& file) {
  const auto line = first_line(file);
  if (!line || line->empty() || *line == "max") return std::nullopt;
  try {
    size_t used = 0;
    const uint64_t v = std::stoull(*line, &used);
    if (v == 0 || v >= kNoLimit) return std::nullopt;
    return v;
  } catch (...) {
    return std::nullopt;
  }
}

// The smallest limit on `own` (a path like /system.slice/x.service) or any
// ancestor under the hierarchy mounted at `mount`.
std::optional<uint64_t> lowest_limit(const fs::path& mount, std::string own, const char* file) {
  std::optional<uint64_t> lowest;
  while (true) {
    while (!own.empty() && own.back() == '/') own.pop_back();
    const auto v = limit_in(mount / fs::path(own).relative_path() / file);
    if (v && (!lowest || *v < *lowest)) lowest = v;
    if (own.empty()) break;
    own.erase(own.rfind('/') == std::string::npos ? 0 : own.rfind('/'));
  }
  return lowest;
}

std::optional<uint64_t> cgroup_limit(const fs::path& root) {
  std::ifstream in(root / "proc/self/cgroup");
  std::string line;
  std::optional<uint64_t> lowest;
  const auto take = [&](std::optional<uint64_t> v) {
    if (v && (!lowest || *v < *lowest)) lowest = v;
  };
  while (std::getline(in, line)) {
    // hierarchy-id:controllers:path
    const size_t a = line.find(':');
    const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    const std::string path = line.substr(b + 1);
    if (line.compare(0, a, "0") == 0 && controllers.empty()) {
      take(lowest_limit(root / "sys/fs/cgroup", path, "memory.max"));
      take(lowest_limit(root / "sys/fs/cgroup/unified", path, "memory.max"));  // hybrid layout
    } else {
      std::stringstream list(controllers);
      std::string c;
      while (std::getline(list, c, ','))
        if (c == "memory") take(lowest_limit(root / "sys/fs/cgroup/memory", path, "memory.limit_in_bytes"));
    }
  }
  return lowest;
}

uint64_t mem_total(const fs::path& root) {
  std::ifstream in(root / "proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == "MemTotal:") return kib * 1024;
  }
  return 0;
}

}  // namespace

std::string DefaultBudget::describe() const {
  if (limit == 0) return source;
  return format_size(bytes) + ": " + source + " minus " + format_size(limit - bytes) + " headroom";
}

DefaultBudget default_memory_budget(const fs::path& root) {
  DefaultBudget d;
  const uint64_t total = mem_total(root);
  const auto cg = cgroup_limit(root);
  if (cg && (total == 0 || *cg < total)) {
    d.limit = *cg;
    d.from_cgroup = true;
    d.source = "cgroup limit " + format_size(*cg);
  } else if (total > 0) {
    d.limit = total;
    d.source = "machine memory " + format_size(total);
  } else {
    d.source = "no memory limit readable (" + (root / "proc/meminfo").string() + ")";
    return d;
  }
  const uint64_t headroom = std::max(d.limit / 10, kMinHeadroom);
  d.bytes = d.limit > 2 * headroom ? d.limit - headroom : d.limit / 2;
  return d;
}

std::string budget_over_limit(uint64_t budget, const fs::path& root) {
  if (budget == 0) return "";
  const DefaultBudget d = default_memory_budget(root);
  if (d.limit == 0 || budget <= d.limit) return "";
  return "memory_budget " + format_size(budget) + " is more than this process's " + d.source +
         ": the kernel kills it (out of memory) before the plan is full; set memory_budget to at most " +
         format_size(d.bytes) + " (or 0: the limit minus headroom)" +
         (d.from_cgroup ? ", or raise the cgroup's limit (systemd MemoryMax=, the container's memory limit)" : "");
}

std::optional<AddressSpace> address_space_limit() {
  struct rlimit rl {};
  if (::getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return std::nullopt;
  AddressSpace as;
  as.limit = rl.rlim_cur;
  std::ifstream statm("/proc/self/statm");
  uint64_t pages = 0;
  if (statm >> pages) as.mapped = pages * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  return as;
}

}  // namespace ns::stream
