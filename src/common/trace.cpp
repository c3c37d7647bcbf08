#include "common/trace.hpp"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace boxlite {

namespace {
constexpr int kNotOpened = -2;
std::atomic<int> trace_fd_value{kNotOpened};

int trace_fd() {
  int fd = trace_fd_value.load(std::memory_order_acquire);
  if (fd != kNotOpened) return fd;
  const char* path = std::getenv("BOXLITE_TRACE");
  fd = path == nullptr || *path == '\0' ? -1 : ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  int expected = kNotOpened;
  if (!trace_fd_value.compare_exchange_strong(expected, fd)) {  // another thread opened it first
    if (fd >= 0) ::close(fd);
    return expected;
  }
  return fd;
}
}  // namespace

void trace_reopen() { trace_fd_value.store(kNotOpened); }
void trace_after_fork() { trace_reopen(); }

void trace(const char* event) {
  int fd = trace_fd();
  if (fd < 0) return;
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  char line[256];
  int n =
      std::snprintf(line, sizeof line, "%lld %d %s\n", static_cast<long long>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000,
                    static_cast<int>(::getpid()), event);
  if (n > 0) (void)!::write(fd, line, static_cast<size_t>(n) < sizeof line ? static_cast<size_t>(n) : sizeof line - 1);
}

}  // namespace boxlite
