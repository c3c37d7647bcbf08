// Checks made in a death test's child, after it has changed itself for good
// (confined, say): each failed check is printed with errno, and the child's exit
// status says whether any failed.
#pragma once

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace boxlite::testing {

inline int& probe_failures() {
  static int failures = 0;
  return failures;
}

inline void expect(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "FAILED: %s (errno %s)\n", what.c_str(), std::strerror(errno));
    ++probe_failures();
  }
}

[[noreturn]] inline void exit_with_probe_result() { std::exit(probe_failures() == 0 ? 0 : 1); }

}  // namespace boxlite::testing
