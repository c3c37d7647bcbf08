// The C API's error boundary: every exception becomes a BoxliteErrorCode and a
// heap message; nothing is thrown across the interface.
#pragma once

#include <climits>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "boxlite.h"
#include "boxlite/error.hpp"

namespace boxlite::capi {

// A malloc'ed copy (free() or boxlite_free_string); NULL when out of memory.
char* dup_string(std::string_view s);

// The exception being handled as an Error (call inside a catch block).
Error current_error() noexcept;

// Fills *out (when given) and returns the code.
BoxliteErrorCode fill_error(CBoxliteError* out, ErrorKind kind, std::string_view message) noexcept;
inline BoxliteErrorCode fill_error(CBoxliteError* out, const Error& e) noexcept {
  return fill_error(out, e.kind(), e.what());
}

// The C API's code for a kind (common/error.hpp's table).
inline BoxliteErrorCode to_c(ErrorKind k) { return static_cast<BoxliteErrorCode>(error_kind_info(k).c_code); }

// Runs f; any exception becomes an error code and *out.
template <class F>
BoxliteErrorCode guard(CBoxliteError* out, F&& f) noexcept {
  try {
    f();
    return Ok;
  } catch (...) {
    return fill_error(out, current_error());
  }
}

[[noreturn]] inline void invalid(const std::string& message) { throw Error(ErrorKind::InvalidArgument, message); }

// InvalidArgument "<what> is NULL", `what` the parameter as the header names it
// ("runtime", "cmd->args"). The caller knows which call it made; messages never
// name our functions (docs/c-api.md, "Error messages").
inline void require(const void* p, const char* what) {
  if (!p) invalid(std::string(what) + " is NULL");
}
// InvalidArgument for a NULL or empty string.
inline void require_str(const char* s, const char* what) {
  require(s, what);
  if (!*s) invalid(std::string(what) + " is empty");
}
template <class Cb>
void require_cb(Cb cb, const char* what = "cb") {
  require(reinterpret_cast<void*>(cb), what);
}

// An error handed to a callback: lives for the callback's duration.
class CallbackError {
 public:
  explicit CallbackError(const Error& e) {
    err_.code = to_c(e.kind());
    err_.message = dup_string(e.what());
  }
  ~CallbackError() { std::free(err_.message); }
  CallbackError(const CallbackError&) = delete;
  CallbackError& operator=(const CallbackError&) = delete;
  CBoxliteError* get() { return &err_; }

 private:
  CBoxliteError err_{};
};

// The outcome of an operation, carried from a worker to the drain thread.
struct Outcome {
  std::optional<Error> error;  // nullopt: it succeeded
  bool ok() const { return !error; }
  // Runs cb(err) with NULL on success.
  template <class Cb>
  void deliver(Cb&& cb) const {
    if (ok()) {
      cb(static_cast<CBoxliteError*>(nullptr));
    } else {
      CallbackError e(*error);
      cb(e.get());
    }
  }
};

// A core counter as the C struct's int: saturates at INT_MAX (the documented
// field type is int; a wrapped negative count would be worse than a capped one).
inline int clamp_int(uint64_t v) { return v > static_cast<uint64_t>(INT_MAX) ? INT_MAX : static_cast<int>(v); }
inline int64_t clamp_i64(uint64_t v) {
  return v > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(v);
}

// Runs f on a worker and records how it ended.
template <class F>
Outcome capture(F&& f) noexcept {
  try {
    f();
    return {};
  } catch (...) {
    return {current_error()};
  }
}

}  // namespace boxlite::capi
