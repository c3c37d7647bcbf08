// Shared libraries the host code opens with dlopen on first use instead of linking.
// A linked library is mapped and relocated at the start of every `boxlite` command and
// every libboxlite program, used or not: libcurl (pull), libcrypto (the secrets CA) and
// libarchive with its ten compression/ACL/XML libraries cost a few milliseconds of each
// `boxlite run` that needs none of them. Each user keeps a table of the functions it
// calls (decltype of the real declarations, so the compiler still checks every call),
// bound once, on first use.
#pragma once

#include <string_view>

namespace boxlite {

// dlopen(soname), kept open for the life of the process. Throws a Config error that
// says what needed it when the library is not installed.
void* open_library(const char* soname, std::string_view needed_for);

// The address of `name` in `lib` (from open_library); a Config error if it lacks it.
void* library_symbol(void* lib, const char* soname, const char* name);

template <typename Fn>
void bind_symbol(void* lib, const char* soname, const char* name, Fn& fn) {
  fn = reinterpret_cast<Fn>(library_symbol(lib, soname, name));
}

}  // namespace boxlite
