// Shared by unit and integration tests: which boxlite::Error a call raised.
#pragma once

#include <functional>
#include <string>

#include "common/error.hpp"

namespace boxlite::testing {

// The code of the boxlite::Error that f raised (its message into *msg), or Ok.
inline ErrorCode code_of(const std::function<void()>& f, std::string* msg = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (msg) *msg = e.what();
    return e.code();
  }
  return ErrorCode::Ok;
}

}  // namespace boxlite::testing
