// Shared by unit and integration tests: which boxlite::Error a call raised.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "common/error.hpp"

namespace boxlite::testing {

// The kind of the boxlite::Error that f raised (its message into *msg), or
// nullopt when it raised none.
inline std::optional<ErrorKind> kind_of(const std::function<void()>& f, std::string* msg = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (msg) *msg = e.what();
    return e.kind();
  }
  return std::nullopt;
}

}  // namespace boxlite::testing
