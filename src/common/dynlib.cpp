#include "common/dynlib.hpp"

#include <dlfcn.h>

#include <string>

#include "common/error.hpp"

namespace boxlite {

namespace {

// Set once before any thread starts (use_linked_libraries), read-only after.
std::span<const LinkedLibrary> g_linked;
bool g_linked_only = false;

}  // namespace

void use_linked_libraries(std::span<const LinkedLibrary> libraries) {
  g_linked = libraries;
  g_linked_only = true;
}

void* open_library(const char* soname, std::string_view needed_for) {
  if (g_linked_only) {
    for (const auto& lib : g_linked) {
      if (std::string_view(lib.soname) == soname) return const_cast<LinkedLibrary*>(&lib);
    }
    throw Error(ErrorKind::Internal, std::string(soname) + " (needed for " + std::string(needed_for) +
                                         ") is not linked into this static executable: add it to its linked libraries");
  }
  void* lib = ::dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    throw Error(ErrorKind::Config,
                "cannot load " + std::string(soname) + " (needed for " + std::string(needed_for) + "): " + ::dlerror());
  }
  return lib;
}

void* library_symbol(void* lib, const char* soname, const char* name) {
  if (g_linked_only) {
    for (const auto& s : static_cast<const LinkedLibrary*>(lib)->symbols) {
      if (std::string_view(s.name) == name) return s.address;
    }
    throw Error(ErrorKind::Internal,
                std::string(soname) + "'s " + name + " is not in this executable's table of linked functions");
  }
  void* sym = ::dlsym(lib, name);
  if (!sym) {
    throw Error(ErrorKind::Config, std::string(soname) + " lacks " + name + " (older than boxlite was built for?)");
  }
  return sym;
}

}  // namespace boxlite
