// For a static executable that links libarchive.a (the `boxlite` CLI): the runtime
// binds libarchive, which it otherwise opens with dlopen on first use, to the
// linked copy. Call before anything of the runtime; link boxlite_linked_libarchive.
#pragma once

namespace boxlite {

void use_linked_libarchive();

}  // namespace boxlite
