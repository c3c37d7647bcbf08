#include "engine/jail/seccomp.hpp"

#include <errno.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <termios.h>

#include <memory>

namespace boxlite::engine::jail {
namespace {

// Everything Docker's default profile refuses (it allows a list; these are what is
// left out of it), plus the newer mount API. Refused with EPERM, as Docker does.
const char* const kDenied[] = {
    "acct", "add_key", "bpf", "clock_adjtime", "clock_settime", "create_module", "delete_module", "finit_module",
    "get_kernel_syms", "get_mempolicy", "init_module", "ioperm", "iopl", "kcmp", "kexec_file_load", "kexec_load",
    "keyctl", "lookup_dcookie", "mbind", "mount", "move_pages", "name_to_handle_at", "nfsservctl", "open_by_handle_at",
    "perf_event_open", "pivot_root", "process_vm_readv", "process_vm_writev", "ptrace", "query_module", "quotactl",
    "reboot", "request_key", "set_mempolicy", "setns", "settimeofday", "stime", "swapon", "swapoff", "sysfs", "_sysctl",
    "umount", "umount2", "unshare", "uselib", "userfaultfd", "ustat", "vm86", "vm86old", "fsopen", "fsconfig",
    "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "syslog", "vhangup", "pidfd_getfd", "quotactl_fd", "lsm_set_self_attr",
};

constexpr uint64_t kNamespaceFlags = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID |
                                     CLONE_NEWNET | CLONE_NEWCGROUP | 0x00000080ULL /* CLONE_NEWTIME */;

struct CtxFree {
  void operator()(scmp_filter_ctx c) const { seccomp_release(c); }
};

}  // namespace

int load_seccomp_filter() {
  std::unique_ptr<void, CtxFree> ctx(seccomp_init(SCMP_ACT_ALLOW));
  if (!ctx) return -ENOMEM;
  // Foreign ABIs (x32, i386) would bypass a native-only list: kill them.
  seccomp_attr_set(ctx.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
  for (const char* name : kDenied) {
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) continue;  // not on this architecture
    int rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(EPERM), nr, 0);
    if (rc < 0 && rc != -EEXIST) return rc;
  }
  // New namespaces from inside the box: never (Docker allows clone only without them).
  int rc = 0;
  for (uint64_t flag = 1; flag; flag <<= 1) {
    if (!(kNamespaceFlags & flag)) continue;
    rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag));
    if (rc < 0) return rc;
  }
  // clone3 passes flags in memory the filter cannot read: make callers fall back to clone.
  rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
  if (rc < 0) return rc;
  // TIOCSTI pushes input into another process's terminal.
  rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1, SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCSTI));
  if (rc < 0) return rc;
  // personality(): turning off ASLR for oneself is harmless to the host; Docker
  // narrows its arguments too, which a later change can mirror.
  return seccomp_load(ctx.get());
}

}  // namespace boxlite::engine::jail
