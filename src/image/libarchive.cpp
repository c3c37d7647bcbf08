#include "image/libarchive.hpp"

#include <array>

#include "common/dynlib.hpp"

namespace boxlite::la::detail {

void* symbol(std::size_t i) {
  static const std::array<void*, kSymbolCount> table = [] {
    constexpr const char* kSoname = "libarchive.so.13";
    void* lib = open_library(kSoname, "unpacking image layers and copying files");
    static constexpr const char* kNames[] = {
#define BOXLITE_LA_NAME(name) #name,
        BOXLITE_LIBARCHIVE_FUNCTIONS(BOXLITE_LA_NAME)
#undef BOXLITE_LA_NAME
    };
    std::array<void*, kSymbolCount> t{};
    for (std::size_t k = 0; k < kSymbolCount; ++k) t[k] = library_symbol(lib, kSoname, kNames[k]);
    return t;
  }();
  return table[i];
}

}  // namespace boxlite::la::detail
