#include "common/trace.hpp"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace boxlite {

namespace {
int trace_fd() {
  static const int fd = [] {
    const char* path = std::getenv("BOXLITE_TRACE");
    if (path == nullptr || *path == '\0') return -1;
    return ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  }();
  return fd;
}
}  // namespace

void trace(const char* event) {
  int fd = trace_fd();
  if (fd < 0) return;
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  char line[256];
  int n = std::snprintf(line, sizeof line, "%lld %d %s\n",
                        static_cast<long long>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000, static_cast<int>(::getpid()), event);
  if (n > 0) (void)!::write(fd, line, static_cast<size_t>(n) < sizeof line ? static_cast<size_t>(n) : sizeof line - 1);
}

}  // namespace boxlite
