#include "common/confine.hpp"

#include <fcntl.h>
#include <linux/capability.h>
#include <linux/landlock.h>
#include <linux/mount.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "common/error.hpp"
#include "common/fd.hpp"

namespace boxlite::confine {

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

}  // namespace

void no_new_privs(const std::string& who) {
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) throw_errno(ErrorKind::Internal, who + ": no_new_privs");
}

void keep_only_capabilities(std::initializer_list<int> keep_list, const std::string& who) {
  uint64_t keep = 0;
  for (int c : keep_list) keep |= 1ULL << c;
  // Up to the kernel's last capability: the first EINVAL. Without CAP_SETPCAP (an
  // unprivileged caller) there is nothing in the bounding set worth dropping.
  for (int c = 0; c < 64; ++c) {
    if (keep & (1ULL << c)) continue;
    if (::prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0) {
      if (errno == EINVAL || errno == EPERM) break;
      throw_errno(ErrorKind::Internal, who + ": drop capability " + std::to_string(c) + " from the bounding set");
    }
  }
  ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (::syscall(SYS_capget, &hdr, data) != 0) throw_errno(ErrorKind::Internal, who + ": capget");
  for (int i = 0; i < 2; ++i) {
    auto bits = static_cast<uint32_t>(keep >> (32 * i));
    data[i].effective &= bits;
    data[i].permitted &= bits;
    data[i].inheritable = 0;
  }
  if (::syscall(SYS_capset, &hdr, data) != 0) throw_errno(ErrorKind::Internal, who + ": capset");
}

int landlock_abi() {
  long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return abi < 0 ? 0 : static_cast<int>(abi);  // ENOSYS, or EOPNOTSUPP: not enabled at boot
}

bool restrict_writes_beneath(const std::string& dir, int abi, const std::string& who) {
  if (abi < 2) return false;
  RulesetAttr attr = ruleset_for(abi);
  long fd = ::syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
  if (fd < 0) throw_errno(ErrorKind::Internal, who + ": landlock_create_ruleset (ABI " + std::to_string(abi) + ")");
  UniqueFd ruleset(static_cast<int>(fd));
  if (!dir.empty()) {
    UniqueFd d(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!d) throw_errno(ErrorKind::Internal, who + ": open " + dir);
    landlock_path_beneath_attr beneath{};
    // Beneath it, everything handled but exec and device nodes: neither a store nor
    // a copy's destination holds programs to run or devices.
    beneath.allowed_access = attr.handled_access_fs & ~(LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_MAKE_CHAR |
                                                        LANDLOCK_ACCESS_FS_MAKE_BLOCK | kAccessFsIoctlDev);
    beneath.parent_fd = d.get();
    if (::syscall(SYS_landlock_add_rule, ruleset.get(), LANDLOCK_RULE_PATH_BENEATH, &beneath, 0) != 0) {
      throw_errno(ErrorKind::Internal, who + ": landlock_add_rule for " + dir);
    }
  }
  if (::syscall(SYS_landlock_restrict_self, ruleset.get(), 0) != 0) {
    throw_errno(ErrorKind::Internal, who + ": landlock_restrict_self");
  }
  return true;
}

bool readonly_mounts_except(const std::string& dir, const std::string& who) {
  if (::geteuid() != 0) return false;
  if (::unshare(CLONE_NEWNS) != 0) {
    if (errno == EPERM || errno == ENOSYS) return false;
    throw_errno(ErrorKind::Internal, who + ": unshare a mount namespace");
  }
  // Nothing done here may reach the host's mounts.
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    throw_errno(ErrorKind::Internal, who + ": make the mounts private");
  }
  if (!dir.empty() && ::mount(dir.c_str(), dir.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
    throw_errno(ErrorKind::Internal, who + ": bind " + dir);
  }
  mount_attr ro{};
  ro.attr_set = MOUNT_ATTR_RDONLY;
  if (::syscall(SYS_mount_setattr, AT_FDCWD, "/", AT_RECURSIVE, &ro, sizeof ro) != 0) {
    if (errno == ENOSYS || errno == EPERM) return false;
    throw_errno(ErrorKind::Internal, who + ": make every mount read-only");
  }
  if (!dir.empty()) {
    mount_attr rw{};
    rw.attr_clr = MOUNT_ATTR_RDONLY;
    if (::syscall(SYS_mount_setattr, AT_FDCWD, dir.c_str(), AT_RECURSIVE, &rw, sizeof rw) != 0) {
      throw_errno(ErrorKind::Internal, who + ": make " + dir + " writable again");
    }
  }
  return true;
}

}  // namespace boxlite::confine
