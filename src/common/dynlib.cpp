#include "common/dynlib.hpp"

#include <dlfcn.h>

#include <string>

#include "common/error.hpp"

namespace boxlite {

void* open_library(const char* soname, std::string_view needed_for) {
  void* lib = ::dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    throw Error(ErrorCode::Config,
                "cannot load " + std::string(soname) + " (needed for " + std::string(needed_for) + "): " + ::dlerror());
  }
  return lib;
}

void* library_symbol(void* lib, const char* soname, const char* name) {
  void* sym = ::dlsym(lib, name);
  if (!sym) {
    throw Error(ErrorCode::Config, std::string(soname) + " lacks " + name + " (older than boxlite was built for?)");
  }
  return sym;
}

}  // namespace boxlite
