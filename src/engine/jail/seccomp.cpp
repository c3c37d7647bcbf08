#include "engine/jail/seccomp.hpp"

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace boxlite::engine::jail {
namespace {
// Made at build time by boxlite-seccomp-gen from the rules in seccomp_gen.cpp.
#include "seccomp_filter.inc"
}  // namespace

int load_seccomp_filter() {
  sock_fprog prog{};
  prog.len = static_cast<unsigned short>(sizeof kSeccompFilter / sizeof(sock_filter));
  // The array is 8-aligned and holds whole sock_filter records (checked at
  // build).
  prog.filter = reinterpret_cast<sock_filter*>(const_cast<unsigned char*>(kSeccompFilter));
  if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) return -errno;
  return 0;
}

static_assert(sizeof kSeccompFilter % sizeof(sock_filter) == 0, "the generated filter is not whole BPF instructions");

}  // namespace boxlite::engine::jail
