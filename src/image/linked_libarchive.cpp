// boxlite/static_link.hpp: the libraries the static `boxlite` executable links
// instead of opening them with dlopen (common/dynlib.hpp): libarchive (unpacking
// layers, copies, export and import). Its function list is the one the call sites
// bind (image/libarchive.hpp), so a function added there is linked here without
// another edit.
//
// libcrypto is not linked: only the secrets CA uses it (core/network.cpp), and no
// CLI command makes a box with secrets. Linked, its tables were ~400 KiB of
// relocated data, which cost a static-pie start more than the dynamic loader saved.
// Should a command reach it, the lazy binding fails with an Internal error naming it.
#include "boxlite/static_link.hpp"
#include "common/dynlib.hpp"
#include "image/libarchive.hpp"

namespace boxlite {

namespace {

#define BOXLITE_LINKED(name) LinkedSymbol{#name, reinterpret_cast<void*>(&::name)},
const LinkedSymbol kLibarchive[] = {BOXLITE_LIBARCHIVE_FUNCTIONS(BOXLITE_LINKED)};
#undef BOXLITE_LINKED

const LinkedLibrary kLinked[] = {{"libarchive.so.13", kLibarchive}};

}  // namespace

void use_linked_libarchive() { use_linked_libraries(kLinked); }

}  // namespace boxlite
