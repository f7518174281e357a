#include "engine/gguf/map_guard.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>

namespace ns::gguf {
namespace {

constexpr size_t kPathBytes = 512;

// Fixed storage the handler can read without locks: a slot is published by
// storing `begin` last (release) and retired by clearing it first.
struct Slot {
  std::atomic<uintptr_t> begin{0};
  std::atomic<uintptr_t> end{0};
  std::atomic<bool> faulted{false};
  char path[kPathBytes] = {};
};
Slot g_slots[kMapGuardSlots];
std::mutex g_mu;  // guard/unguard against each other (never taken by the handler)
struct sigaction g_previous {};

void say(const char* s) {
  const size_t n = std::strlen(s);
  (void)!::write(STDERR_FILENO, s, n);
}

extern "C" void on_sigbus(int sig, siginfo_t* info, void* context) {
  const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
  for (Slot& s : g_slots) {
    const uintptr_t begin = s.begin.load(std::memory_order_acquire);
    if (begin == 0 || addr < begin || addr >= s.end.load(std::memory_order_relaxed)) continue;
    void* again = ::mmap(reinterpret_cast<void*>(begin), s.end.load(std::memory_order_relaxed) - begin, PROT_READ,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (again == MAP_FAILED) break;  // cannot recover: die as without the guard
    if (!s.faulted.exchange(true)) {
      say("nightshift: SIGBUS reading the model file ");
      say(s.path);
      say(": it was truncated or rewritten while in use; its mapping now reads zeros and the work is discarded\n");
    }
    return;  // the faulting read runs again, on zero pages
  }
  // Not ours: the previous disposition (the default kills with the signal).
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction) return g_previous.sa_sigaction(sig, info, context);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    return g_previous.sa_handler(sig);
  }
  ::signal(SIGBUS, SIG_DFL);  // returning re-executes the access, which now kills as it would have
}

void install_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    ::sigaction(SIGBUS, &sa, &g_previous);
  });
}

}  // namespace

bool guard_mapping(const void* base, size_t len, const std::string& path) {
  if (!base || len == 0) return false;
  install_once();
  std::lock_guard lock(g_mu);
  for (Slot& s : g_slots) {
    if (s.begin.load(std::memory_order_relaxed) != 0) continue;
    std::strncpy(s.path, path.c_str(), kPathBytes - 1);
    s.faulted.store(false, std::memory_order_relaxed);
    s.end.store(reinterpret_cast<uintptr_t>(base) + len, std::memory_order_relaxed);
    s.begin.store(reinterpret_cast<uintptr_t>(base), std::memory_order_release);
    return true;
  }
  return false;
}

void unguard_mapping(const void* base) {
  std::lock_guard lock(g_mu);
  for (Slot& s : g_slots) {
    if (s.begin.load(std::memory_order_relaxed) == reinterpret_cast<uintptr_t>(base)) {
      s.begin.store(0, std::memory_order_release);
      s.end.store(0, std::memory_order_relaxed);
    }
  }
}

std::vector<std::string> faulted_files() {
  std::lock_guard lock(g_mu);
  std::vector<std::string> out;
  for (const Slot& s : g_slots) {
    if (s.begin.load(std::memory_order_relaxed) != 0 && s.faulted.load()) out.emplace_back(s.path);
  }
  return out;
}

}  // namespace ns::gguf
