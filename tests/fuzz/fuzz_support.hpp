// What every fuzz target of tests/fuzz shares: a check that aborts (so that
// libFuzzer records the input as a crash) with what was wrong, and the rule every
// parser here keeps: bad input is a boxlite::Error of a kind the parser documents,
// with a message that says something.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <string_view>

#include "common/error.hpp"
#include "common/io.hpp"

namespace boxlite::fuzz {

[[noreturn]] inline void fail(std::string_view what) {
  std::fprintf(stderr, "fuzz check failed: %.*s\n", static_cast<int>(what.size()), what.data());
  std::abort();
}

inline void check(bool ok, std::string_view what) {
  if (!ok) fail(what);
}

// `e` is one of the kinds the parser may report, and says what went wrong.
inline void check_error(const Error& e, std::initializer_list<ErrorKind> kinds) {
  bool known = false;
  for (ErrorKind k : kinds) known = known || e.kind() == k;
  if (!known) {
    std::fprintf(stderr, "unexpected error kind %s: %s\n", std::string(error_kind_name(e.kind())).c_str(), e.what());
    std::abort();
  }
  check(std::string_view(e.what()).size() > 0, "an error without a message");
  // BOXLITE_FUZZ_VERBOSE=1: say why each input was refused (to check what a seed reaches).
  static const bool verbose = std::getenv("BOXLITE_FUZZ_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "refused (%s): %s\n", std::string(error_kind_name(e.kind())).c_str(), e.what());
}

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// A scratch directory for targets that write files: in /dev/shm when there is
// one (thousands of runs a second do not belong on a disk), else $TMPDIR or /tmp.
// Removed when the fuzzer exits (one that crashed leaves it, with the evidence).
inline std::string make_scratch_dir(const std::string& name) {
  struct stat st {};
  const char* env = std::getenv("TMPDIR");
  std::string base = ::stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : env ? env : "/tmp";
  std::string tmpl = base + "/boxlite-fuzz-" + name + "-XXXXXX";
  if (!::mkdtemp(tmpl.data())) fail("mkdtemp " + tmpl);
  static std::string* made = new std::string(tmpl);  // one per target process
  std::atexit([] {
    try {
      remove_tree(*made);
    } catch (const Error&) {
    }
  });
  return tmpl;
}

}  // namespace boxlite::fuzz
