// What memory_budget 0 resolves to, on fake /proc and /sys/fs/cgroup trees:
// cgroup v2 and v1 limits, ancestors' limits, "no limit" spellings, the
// machine's memory when it is lower, and the headroom.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "engine/stream/memory_limit.h"
#include "stream_test_util.h"

using namespace ns::stream;
namespace fs = std::filesystem;

namespace {

constexpr uint64_t GiB = 1ull << 30;
constexpr uint64_t MiB = 1ull << 20;

// A fake root: /proc/meminfo, /proc/self/cgroup and cgroup limit files.
struct FakeRoot {
  stream_test::ScratchDir dir;
  fs::path root{dir.file("root")};
  void put(const std::string& rel, const std::string& text) {
    const fs::path p = root / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  void meminfo(uint64_t total) {
    put("proc/meminfo", "MemTotal:       " + std::to_string(total / 1024) +
                            " kB\nMemFree:          123456 kB\nMemAvailable:   1000 kB\n");
  }
  // A limit file (memory.max, memory.limit_in_bytes) holding `bytes`.
  void limit(const std::string& rel, uint64_t bytes) { put(rel, std::to_string(bytes) + "\n"); }

  FakeRoot() = default;
  // A machine with `total` bytes of memory whose /proc/self/cgroup reads `cgroup`.
  FakeRoot(uint64_t total, const std::string& cgroup) {
    meminfo(total);
    put("proc/self/cgroup", cgroup);
  }
};

}  // namespace

TEST_CASE("memory_limit: a cgroup v2 limit below the machine's memory is the budget, minus 10%") {
  FakeRoot r(32 * GiB, "0::/system.slice/nightshiftd.service\n");
  r.limit("sys/fs/cgroup/system.slice/nightshiftd.service/memory.max", 9 * GiB);
  r.put("sys/fs/cgroup/system.slice/memory.max", "max\n");
  const DefaultBudget d = default_memory_budget(r.root);
  CHECK(d.from_cgroup);
  CHECK(d.limit == 9 * GiB);
  CHECK(d.bytes == 9 * GiB - 9 * GiB / 10);
  CHECK(d.source == "cgroup limit 9.00 GiB");
  CHECK(d.describe().find("cgroup limit 9.00 GiB minus") != std::string::npos);
}

TEST_CASE("memory_limit: an ancestor's lower limit counts (a slice or a container above the service)") {
  FakeRoot r(32 * GiB, "0::/user.slice/user-1000.slice/session-2.scope\n");
  r.put("sys/fs/cgroup/user.slice/user-1000.slice/session-2.scope/memory.max", "max\n");
  r.limit("sys/fs/cgroup/user.slice/user-1000.slice/memory.max", 6 * GiB);
  r.limit("sys/fs/cgroup/user.slice/memory.max", 12 * GiB);
  CHECK(default_memory_budget(r.root).limit == 6 * GiB);
}

TEST_CASE("memory_limit: v2 \"max\" everywhere means the machine's memory") {
  FakeRoot r(20 * GiB, "0::/a\n");
  r.put("sys/fs/cgroup/a/memory.max", "max\n");
  const DefaultBudget d = default_memory_budget(r.root);
  CHECK_FALSE(d.from_cgroup);
  CHECK(d.limit == 20 * GiB);
  CHECK(d.bytes == 18 * GiB);
  CHECK(d.source == "machine memory 20.00 GiB");
}

TEST_CASE("memory_limit: cgroup v1 memory.limit_in_bytes, and its \"unlimited\" value") {
  FakeRoot r(16 * GiB, "9:name=systemd:/\n5:devices:/\n4:memory:/docker/abc\n0::/\n");
  r.put("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
  r.limit("sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", 3 * GiB);
  DefaultBudget d = default_memory_budget(r.root);
  CHECK(d.from_cgroup);
  CHECK(d.limit == 3 * GiB);
  CHECK(d.bytes == 3 * GiB - 512 * MiB);  // 10% is under the 512 MiB floor

  r.put("sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", "9223372036854771712\n");
  d = default_memory_budget(r.root);
  CHECK_FALSE(d.from_cgroup);
  CHECK(d.limit == 16 * GiB);
}

TEST_CASE("memory_limit: a container sees the host's cgroup path; the limit at its mount's root applies") {
  FakeRoot r(64 * GiB, "4:cpu,memory:/kubepods/pod1/ctr\n");
  r.limit("sys/fs/cgroup/memory/memory.limit_in_bytes", 4 * GiB);
  CHECK(default_memory_budget(r.root).limit == 4 * GiB);
}

TEST_CASE("memory_limit: a cgroup limit above the machine's memory is the machine's memory") {
  FakeRoot r(8 * GiB, "0::/big\n");
  r.limit("sys/fs/cgroup/big/memory.max", 100 * GiB);
  const DefaultBudget d = default_memory_budget(r.root);
  CHECK_FALSE(d.from_cgroup);
  CHECK(d.limit == 8 * GiB);
  CHECK(d.bytes == 8 * GiB - 8 * GiB / 10);
}

TEST_CASE("memory_limit: a limit under 1 GiB keeps half; nothing readable gives 0 and says so") {
  FakeRoot r(16 * GiB, "0::/small\n");
  r.limit("sys/fs/cgroup/small/memory.max", 768 * MiB);
  CHECK(default_memory_budget(r.root).bytes == 384 * MiB);

  FakeRoot empty;
  fs::create_directories(empty.root);
  const DefaultBudget d = default_memory_budget(empty.root);
  CHECK(d.bytes == 0);
  CHECK(d.source.find("meminfo") != std::string::npos);
}

TEST_CASE("memory_limit: this machine resolves to something no larger than its memory") {
  const DefaultBudget d = default_memory_budget();
  CHECK(d.bytes > 0);
  CHECK(d.bytes < d.limit);
}

TEST_CASE("memory_limit: an explicit budget above the cgroup's limit is warned about, naming both and the fix") {
  FakeRoot r(32 * GiB, "0::/small\n");
  r.limit("sys/fs/cgroup/small/memory.max", 150 * MiB);
  const std::string w = budget_over_limit(1 * GiB, r.root);
  CHECK(w.find("memory_budget 1.00 GiB") != std::string::npos);
  CHECK(w.find("cgroup limit 150.00 MiB") != std::string::npos);
  CHECK(w.find("set memory_budget to at most 75.00 MiB") != std::string::npos);
  CHECK(w.find("MemoryMax=") != std::string::npos);
  CHECK(budget_over_limit(150 * MiB, r.root).empty());  // within the limit (its headroom is the budget's business)
  CHECK(budget_over_limit(0, r.root).empty());          // 0: resolved within the limit

  FakeRoot machine(8 * GiB, "0::/\n");  // no cgroup limit: the machine's memory
  const std::string m = budget_over_limit(9 * GiB, machine.root);
  CHECK(m.find("machine memory 8.00 GiB") != std::string::npos);
  CHECK(m.find("MemoryMax=") == std::string::npos);
}
