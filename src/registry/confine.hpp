// boxlite-pull confines itself before it talks to a registry: the registry's answers
// (HTTP, auth challenges, manifests) are parsed there and may be hostile. A helper
// taken over by them can write only under the image store and can load no module,
// mount nothing, reboot nothing and signal no process outside itself.
#pragma once

#include <string>

namespace boxlite::registry {

struct Confinement {
  int landlock_abi = 0;          // the kernel's Landlock ABI; 0 = none
  bool writes_confined = false;  // writes beneath `writable_dir` only (ABI 2 and later)
  bool signals_scoped = false;   // no signal or abstract socket out of it (ABI 6 and later)
};

// no_new_privs; every capability but the three a root-owned store needs (DAC_OVERRIDE,
// DAC_READ_SEARCH, FOWNER) dropped, bounding set included; then Landlock as far as
// the kernel has it: every write, exec and device node refused outside
// `writable_dir`. Reads stay open (CA files, resolv.conf, hosts). Last, a seccomp
// filter: no chmod, chown or xattr, no namespace, mount, ptrace or module.
// Throws Internal if a step the kernel supports fails.
Confinement confine_pull_helper(const std::string& writable_dir);

}  // namespace boxlite::registry
