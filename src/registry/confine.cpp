#include "registry/confine.hpp"

#include <linux/capability.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <memory>
#include <string_view>

#include "common/confine.hpp"
#include "common/error.hpp"

namespace boxlite::registry {

namespace {

// What capabilities and Landlock leave a uid-0 process: changing the mode, owner or
// extended attributes of files it owns (which, as root, is most of the host), new
// namespaces (an unprivileged user namespace brings every capability inside it),
// and kernel interfaces a pull never uses. libseccomp at run time: the helper is
// not on a box's start path, so the jail's build-time BPF buys nothing here.
// clang-format off
constexpr const char* kDeniedSyscalls[] = {
    "chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat", "setxattr",
    "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr", "utime", "utimes",
    "utimensat", "futimesat", "unshare", "setns", "mount", "umount2", "pivot_root", "chroot",
    "mount_setattr", "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick", "ptrace",
    "process_vm_readv", "process_vm_writev", "kexec_load", "kexec_file_load", "init_module",
    "finit_module", "delete_module", "reboot", "swapon", "swapoff", "bpf", "perf_event_open", "keyctl",
    "add_key", "request_key", "userfaultfd", "io_uring_setup", "name_to_handle_at", "open_by_handle_at",
    "acct", "quotactl",
};
// clang-format on
constexpr uint64_t kNamespaceFlags[] = {CLONE_NEWUSER, CLONE_NEWNS,  CLONE_NEWPID,   CLONE_NEWNET,
                                        CLONE_NEWUTS,  CLONE_NEWIPC, CLONE_NEWCGROUP};

void load_syscall_filter() {
  std::unique_ptr<void, void (*)(scmp_filter_ctx)> ctx(seccomp_init(SCMP_ACT_ALLOW), seccomp_release);
  if (!ctx) throw Error(ErrorKind::Internal, "boxlite-pull: seccomp_init failed");
  auto deny = [&](int nr, uint32_t action, unsigned args, const scmp_arg_cmp* cmp) {
    int rc = seccomp_rule_add_array(ctx.get(), action, nr, args, cmp);
    if (rc < 0) throw_errno(ErrorKind::Internal, "boxlite-pull: seccomp rule for syscall " + std::to_string(nr), -rc);
  };
  for (const char* name : kDeniedSyscalls) {
#ifdef __SANITIZE_ADDRESS__
    // LeakSanitizer stops the process's threads with ptrace at exit. Landlock still
    // keeps a sanitizer build's helper from tracing anything outside itself.
    if (std::string_view(name) == "ptrace") continue;
#endif
    int nr = seccomp_syscall_resolve_name(name);
    if (nr != __NR_SCMP_ERROR) deny(nr, SCMP_ACT_ERRNO(EPERM), 0, nullptr);  // unknown to this libseccomp: skipped
  }
  for (uint64_t flag : kNamespaceFlags) {
    scmp_arg_cmp cmp = SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag);
    deny(SCMP_SYS(clone), SCMP_ACT_ERRNO(EPERM), 1, &cmp);
  }
  // clone3's flags are in memory, out of a filter's reach: ENOSYS makes glibc's
  // threads fall back to clone, whose flags are checked above.
  deny(SCMP_SYS(clone3), SCMP_ACT_ERRNO(ENOSYS), 0, nullptr);
  int rc = seccomp_load(ctx.get());
  if (rc < 0) throw_errno(ErrorKind::Internal, "boxlite-pull: seccomp_load", -rc);
}

}  // namespace

Confinement confine_pull_helper(const std::string& writable_dir) {
  const std::string who = "boxlite-pull";
  confine::no_new_privs(who);
  confine::keep_only_capabilities({CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER}, who);
  Confinement c;
  c.landlock_abi = confine::landlock_abi();
  c.writes_confined = confine::restrict_writes_beneath(writable_dir, c.landlock_abi, who);
  c.signals_scoped = c.writes_confined && c.landlock_abi >= 6;
  load_syscall_filter();
  return c;
}

}  // namespace boxlite::registry
