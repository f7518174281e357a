// A stand-in for systemd's notification socket, for the integration tests:
// binds an AF_UNIX datagram socket and appends every message it receives to
// a file, one line each (newlines inside a message become " | "), until
// SIGTERM or the time limit.
//
//   ns_notify_listener SOCKET_PATH OUT_FILE [SECONDS=60]
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>

namespace {
volatile std::sig_atomic_t g_quit = 0;
extern "C" void on_term(int) { g_quit = 1; }
}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s SOCKET_PATH OUT_FILE [SECONDS]\n", argv[0]);
    return 2;
  }
  const int limit_s = argc > 3 ? std::atoi(argv[3]) : 60;
  std::signal(SIGTERM, on_term);
  std::signal(SIGINT, on_term);
  const int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (fd < 0 || std::strlen(argv[1]) >= sizeof addr.sun_path) {
    std::perror("socket");
    return 1;
  }
  std::strcpy(addr.sun_path, argv[1]);
  unlink(argv[1]);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    std::perror("bind");
    return 1;
  }
  timeval tv{0, 100'000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::FILE* out = std::fopen(argv[2], "a");
  if (out == nullptr) {
    std::perror("fopen");
    return 1;
  }
  const std::time_t until = std::time(nullptr) + limit_s;
  char buf[4096];
  while (!g_quit && std::time(nullptr) < until) {
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) continue;
    std::string line(buf, static_cast<size_t>(n));
    for (size_t p = line.find('\n'); p != std::string::npos; p = line.find('\n', p)) line.replace(p, 1, " | ");
    std::fprintf(out, "%s\n", line.c_str());
    std::fflush(out);
  }
  std::fclose(out);
  unlink(argv[1]);
  return 0;
}
