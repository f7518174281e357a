// What `memory_budget: 0` means: the memory this process may use, minus
// headroom.
//
// Contract:
// - default_memory_budget(root) takes the lower of
//   * the cgroup memory limit of this process: cgroup v2
//     <root>/sys/fs/cgroup/<own path>/memory.max, or v1
//     <root>/sys/fs/cgroup/memory/<own path>/memory.limit_in_bytes, the own
//     path read from <root>/proc/self/cgroup. Every ancestor up to the
//     hierarchy's root counts too (a container's or a slice's limit sits
//     above the process's own group), and a path that does not exist under
//     the mount (a container sees the host's path) is walked up the same way.
//     "max", or a value of 2^62 bytes or more (v1's "unlimited" is
//     9223372036854771712), is no limit;
//   * MemTotal from <root>/proc/meminfo ("machine memory").
// - Headroom: 10 % of that limit or 512 MiB, whichever is larger (page
//   tables, the allocator's slack, the kernel's own use charged to the
//   cgroup, a shell next to the daemon); a limit under 1 GiB gets half.
// - root is "/" in production; tests pass a directory of fake files.
// - Nothing readable (no meminfo): bytes = 0 and source says so; callers
//   then fail the plan with the usual "set memory_budget" advice.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace ns::stream {

struct DefaultBudget {
  uint64_t bytes = 0;  // the budget after headroom
  uint64_t limit = 0;  // the limit it came from
  bool from_cgroup = false;
  std::string source;  // "cgroup limit 9.00 GiB" or "machine memory 23.54 GiB"
  // "8.10 GiB: cgroup limit 9.00 GiB minus 922 MiB headroom" (for the plan and the log).
  std::string describe() const;
};

DefaultBudget default_memory_budget(const std::filesystem::path& root = "/");

// An explicit memory_budget above the limit default_memory_budget(root) reads
// (the cgroup's, else the machine's memory): the kernel kills the process
// before the plan is full (#30 G). The warning names both figures and the
// fix; "" when the budget is within the limit, 0, or no limit is readable.
std::string budget_over_limit(uint64_t budget, const std::filesystem::path& root = "/");

// The address space this process may still map: its RLIMIT_AS (`ulimit -v`,
// LimitAS=) less what it maps now (/proc/self/statm), 0 when it maps more
// already; nullopt when there is no such limit. Anonymous mappings count
// against it even with MAP_NORESERVE, so a KV cache the memory budget
// accepts may still not be mappable under it.
struct AddressSpace {
  uint64_t limit = 0;   // RLIMIT_AS
  uint64_t mapped = 0;  // mapped now
  uint64_t left() const { return limit > mapped ? limit - mapped : 0; }
};
std::optional<AddressSpace> address_space_limit();

}  // namespace ns::stream
