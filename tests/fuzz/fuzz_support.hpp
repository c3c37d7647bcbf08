// What every fuzz target of tests/fuzz shares: a check that aborts (so that
// libFuzzer records the input as a crash) with what was wrong, and the rule every
// parser here keeps: bad input is a boxlite::Error of a kind the parser documents,
// with a message that says something.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <string_view>

#include "common/error.hpp"

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
}

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace boxlite::fuzz
