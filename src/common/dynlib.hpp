// Shared libraries the host code opens with dlopen on first use instead of linking.
// A linked library is mapped and relocated at the start of every `boxlite` command and
// every libboxlite program, used or not: libcurl (pull), libcrypto (the secrets CA) and
// libarchive with its ten compression/ACL/XML libraries cost a few milliseconds of each
// `boxlite run` that needs none of them. Each user keeps a table of the functions it
// calls (decltype of the real declarations, so the compiler still checks every call),
// bound once, on first use.
//
// The `boxlite` CLI is a static executable (it starts ~1.5 ms sooner): there it links
// libarchive and libcrypto, and registers them with use_linked_libraries before
// anything else runs, so the same call sites find them without dlopen, which a static
// program cannot use safely (it would load a second libc). Every other library is
// refused there with a clear error.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

namespace boxlite {

struct LinkedSymbol {
  const char* name;
  void* address;
};
struct LinkedLibrary {
  const char* soname;
  std::span<const LinkedSymbol> symbols;
};

// Makes open_library find these (and nothing else) from now on. Call once, first
// thing in main, with a table that lives as long as the program.
void use_linked_libraries(std::span<const LinkedLibrary> libraries);

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
