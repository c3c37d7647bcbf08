#include "registry/confine.hpp"

#include <fcntl.h>
#include <linux/capability.h>
#include <linux/landlock.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <memory>
#include <string_view>

#include "common/error.hpp"
#include "common/fd.hpp"

namespace boxlite::registry {

namespace {

// Debian 12's uapi header stops at ABI 1; these are the kernel's later additions
// (Documentation/userspace-api/landlock.rst), in the layout the kernel reads.
struct RulesetAttr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;  // ABI 4
  uint64_t scoped;              // ABI 6
};
constexpr uint64_t kAccessFsTruncate = 1ULL << 14;        // ABI 3
constexpr uint64_t kAccessFsIoctlDev = 1ULL << 15;        // ABI 5
constexpr uint64_t kScopeAbstractUnixSocket = 1ULL << 0;  // ABI 6
constexpr uint64_t kScopeSignal = 1ULL << 1;              // ABI 6

constexpr int kKeptCaps[] = {CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER};

void drop_capabilities() {
  uint64_t keep = 0;
  for (int c : kKeptCaps) keep |= 1ULL << c;
  // Up to the kernel's last capability: the first EINVAL. Without CAP_SETPCAP (an
  // unprivileged caller) there is nothing in the bounding set worth dropping.
  for (int c = 0; c < 64; ++c) {
    if (keep & (1ULL << c)) continue;
    if (::prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0) {
      if (errno == EINVAL || errno == EPERM) break;
      throw_errno(ErrorCode::Internal, "boxlite-pull: drop capability " + std::to_string(c) + " from the bounding set");
    }
  }
  ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (::syscall(SYS_capget, &hdr, data) != 0) throw_errno(ErrorCode::Internal, "boxlite-pull: capget");
  for (int i = 0; i < 2; ++i) {
    auto bits = static_cast<uint32_t>(keep >> (32 * i));
    data[i].effective &= bits;
    data[i].permitted &= bits;
    data[i].inheritable = 0;
  }
  if (::syscall(SYS_capset, &hdr, data) != 0) throw_errno(ErrorCode::Internal, "boxlite-pull: capset");
}

int landlock_abi() {
  long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return abi < 0 ? 0 : static_cast<int>(abi);  // ENOSYS, or EOPNOTSUPP: not enabled at boot
}

// What the ruleset refuses outside `writable_dir`: every write and exec. ABI 1 always
// refused a rename across directories, which the store's ingest/ -> blobs/ needs: so
// from ABI 2 only.
RulesetAttr ruleset_for(int abi) {
  RulesetAttr attr{};
  attr.handled_access_fs = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR |
                           LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR |
                           LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO |
                           LANDLOCK_ACCESS_FS_MAKE_BLOCK | LANDLOCK_ACCESS_FS_MAKE_SYM | LANDLOCK_ACCESS_FS_REFER;
  if (abi >= 3) attr.handled_access_fs |= kAccessFsTruncate;
  if (abi >= 5) attr.handled_access_fs |= kAccessFsIoctlDev;
  if (abi >= 6) attr.scoped = kScopeAbstractUnixSocket | kScopeSignal;
  return attr;
}

void restrict_writes(const std::string& writable_dir, int abi) {
  RulesetAttr attr = ruleset_for(abi);
  long fd = ::syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
  if (fd < 0)
    throw_errno(ErrorCode::Internal, "boxlite-pull: landlock_create_ruleset (ABI " + std::to_string(abi) + ")");
  UniqueFd ruleset(static_cast<int>(fd));
  UniqueFd dir(::open(writable_dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!dir) throw_errno(ErrorCode::Internal, "boxlite-pull: open " + writable_dir);
  landlock_path_beneath_attr beneath{};
  // Beneath it, everything handled but exec and device nodes: a store holds
  // neither programs to run nor devices.
  beneath.allowed_access = attr.handled_access_fs & ~(LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_MAKE_CHAR |
                                                      LANDLOCK_ACCESS_FS_MAKE_BLOCK | kAccessFsIoctlDev);
  beneath.parent_fd = dir.get();
  if (::syscall(SYS_landlock_add_rule, ruleset.get(), LANDLOCK_RULE_PATH_BENEATH, &beneath, 0) != 0) {
    throw_errno(ErrorCode::Internal, "boxlite-pull: landlock_add_rule for " + writable_dir);
  }
  if (::syscall(SYS_landlock_restrict_self, ruleset.get(), 0) != 0) {
    throw_errno(ErrorCode::Internal, "boxlite-pull: landlock_restrict_self");
  }
}

// What capabilities and Landlock leave a uid-0 process: changing the mode, owner or
// extended attributes of files it owns (which, as root, is most of the host), new
// namespaces (an unprivileged user namespace brings every capability inside it),
// and kernel interfaces a pull never uses. libseccomp at run time: the helper is
// not on a box's start path, so the jail's build-time BPF buys nothing here.
constexpr const char* kDeniedSyscalls[] = {"chmod",
                                           "fchmod",
                                           "fchmodat",
                                           "fchmodat2",
                                           "chown",
                                           "fchown",
                                           "lchown",
                                           "fchownat",
                                           "setxattr",
                                           "lsetxattr",
                                           "fsetxattr",
                                           "removexattr",
                                           "lremovexattr",
                                           "fremovexattr",
                                           "utime",
                                           "utimes",
                                           "utimensat",
                                           "futimesat",
                                           "unshare",
                                           "setns",
                                           "mount",
                                           "umount2",
                                           "pivot_root",
                                           "chroot",
                                           "mount_setattr",
                                           "move_mount",
                                           "open_tree",
                                           "fsopen",
                                           "fsconfig",
                                           "fsmount",
                                           "fspick",
                                           "ptrace",
                                           "process_vm_readv",
                                           "process_vm_writev",
                                           "kexec_load",
                                           "kexec_file_load",
                                           "init_module",
                                           "finit_module",
                                           "delete_module",
                                           "reboot",
                                           "swapon",
                                           "swapoff",
                                           "bpf",
                                           "perf_event_open",
                                           "keyctl",
                                           "add_key",
                                           "request_key",
                                           "userfaultfd",
                                           "io_uring_setup",
                                           "name_to_handle_at",
                                           "open_by_handle_at",
                                           "acct",
                                           "quotactl",
                                           "personality"};
constexpr uint64_t kNamespaceFlags[] = {CLONE_NEWUSER, CLONE_NEWNS,  CLONE_NEWPID,   CLONE_NEWNET,
                                        CLONE_NEWUTS,  CLONE_NEWIPC, CLONE_NEWCGROUP};

void load_syscall_filter() {
  std::unique_ptr<void, void (*)(scmp_filter_ctx)> ctx(seccomp_init(SCMP_ACT_ALLOW), seccomp_release);
  if (!ctx) throw Error(ErrorCode::Internal, "boxlite-pull: seccomp_init failed");
  auto deny = [&](int nr, uint32_t action, unsigned args, const scmp_arg_cmp* cmp) {
    int rc = seccomp_rule_add_array(ctx.get(), action, nr, args, cmp);
    if (rc < 0) throw_errno(ErrorCode::Internal, "boxlite-pull: seccomp rule for syscall " + std::to_string(nr), -rc);
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
  if (rc < 0) throw_errno(ErrorCode::Internal, "boxlite-pull: seccomp_load", -rc);
}

}  // namespace

Confinement confine_pull_helper(const std::string& writable_dir) {
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) throw_errno(ErrorCode::Internal, "boxlite-pull: no_new_privs");
  drop_capabilities();
  Confinement c;
  c.landlock_abi = landlock_abi();
  if (c.landlock_abi >= 2) {
    restrict_writes(writable_dir, c.landlock_abi);
    c.writes_confined = true;
    c.signals_scoped = c.landlock_abi >= 6;
  }
  load_syscall_filter();
  return c;
}

}  // namespace boxlite::registry
