// The jail's seccomp filter: at least as strict as Docker's default profile.
#pragma once

namespace boxlite::engine::jail {

// Loads the filter into the calling thread (no_new_privs must already be set).
// Returns 0 or -errno; it runs in the freshly cloned child, so it does not throw.
int load_seccomp_filter();

}  // namespace boxlite::engine::jail
