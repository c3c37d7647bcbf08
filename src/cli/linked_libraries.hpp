#pragma once

namespace boxlite::cli {

// In the static CLI (BOXLITE_STATIC_CLI): registers the libraries it links, before
// anything can need them. See linked_libraries.cpp.
void use_linked_libraries();

}  // namespace boxlite::cli
