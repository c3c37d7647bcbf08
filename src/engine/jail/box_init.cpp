// The box's side of the jail engine (box_init.hpp): the zygote's answer to the
// shim, and the box's init from its clone to the agent. Linked into boxlite-guest
// only; it reports failures on the init's report pipe and never throws.
#include "engine/jail/box_init.hpp"

#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "common/fd.hpp"
#include "common/io.hpp"
#include "common/netif.hpp"
#include "engine/jail/seccomp.hpp"

namespace boxlite::engine::jail {
namespace {

// ---- the box's init: from the clone until it calls the agent; it reports ------
// ---- failures on the report pipe and _exits ------------------------------------

struct ChildArgs {
  const InitParams* params;
  // The child starts with its cwd in the box root (the zygote's, carried into the
  // new mount namespace's copy of the mount) and uses relative paths: the box
  // directory above is 0700 host root, which the box's root cannot traverse, and
  // an fd opened before clone would point into the parent's namespace.
  std::string root = ".";
  int sync_read;                     // parent writes a byte when the id maps are set, and another when the cgroups are
  int report;                        // child writes "step: errno" here on failure; its EOF says the agent runs
  int channel;                       // box end of the agent channel
  std::vector<int> cgroup_join_fds;  // v1 `tasks` files to write "0" into (CgroupPlan)
  BoxPrograms programs;
};

[[noreturn]] void child_fail(const ChildArgs& a, const std::string& step, const char* hint = "") {
  std::string msg = errno_text(step) + hint;
  (void)!::write(a.report, msg.data(), msg.size());
  ::_exit(126);
}

void child_mount(const ChildArgs& a, const char* src, const std::string& target, const char* type, unsigned long flags,
                 const char* data = nullptr) {
  if (::mount(src, target.c_str(), type, flags, data) != 0)
    child_fail(a, std::string("mount ") + (type ? type : src) + " on " + target);
}

void make_node_by_bind(const ChildArgs& a, const std::string& dev_dir, const char* name) {
  std::string target = dev_dir + "/" + name;
  UniqueFd f(::open(target.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0666));
  if (!f) child_fail(a, "create " + target);
  child_mount(a, (std::string("/dev/") + name).c_str(), target, nullptr, MS_BIND);
}

// A mount point the init makes or finds: a directory, never followed as a symlink.
// The engine's mountpoint layer provides these above the image's, but a box's own
// upper layer (an imported one, say) could still hold a symlink there.
void require_mount_point(const ChildArgs& a, const std::string& path) {
  ::mkdir(path.c_str(), 0755);
  struct stat st = {};
  if (::lstat(path.c_str(), &st) != 0) child_fail(a, "stat " + path);
  if (!S_ISDIR(st.st_mode)) {
    errno = ENOTDIR;
    child_fail(a, "the box's " + path.substr(a.root.size()) + " is not a directory (its upper layer replaced it)");
  }
}

void setup_dev(const ChildArgs& a) {
  std::string dev = a.root + "/dev";
  require_mount_point(a, dev);
  child_mount(a, "tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=755,size=65536k");
  // Device nodes cannot be made in a user namespace: bind the host's harmless ones.
  for (const char* n : {"null", "zero", "full", "random", "urandom", "tty"}) make_node_by_bind(a, dev, n);
  std::string pts = dev + "/pts", shm = dev + "/shm";
  ::mkdir(pts.c_str(), 0755);
  ::mkdir(shm.c_str(), 01777);
  child_mount(a, "devpts", pts, "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620");
  child_mount(a, "shm", shm, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=65536k");
  if (::symlink("pts/ptmx", (dev + "/ptmx").c_str()) != 0) child_fail(a, "symlink /dev/ptmx");
  (void)!::symlink("/proc/self/fd", (dev + "/fd").c_str());
  (void)!::symlink("/proc/self/fd/0", (dev + "/stdin").c_str());
  (void)!::symlink("/proc/self/fd/1", (dev + "/stdout").c_str());
  (void)!::symlink("/proc/self/fd/2", (dev + "/stderr").c_str());
}

// What Docker masks (bind /dev/null over files, empty read-only tmpfs over dirs)
// and makes read-only.
const char* const kMaskedPaths[] = {
    "/proc/asound",
    "/proc/acpi",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
    "/sys/devices/virtual/powercap",
    "/proc/sysrq-trigger",
    "/proc/kallsyms",
    "/proc/interrupts",
    "/proc/kmsg",
};
const char* const kReadonlyPaths[] = {"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys"};

// Docker's masks for the entries of kMaskedPaths and kReadonlyPaths under `under`
// ("/proc/" or "/sys/"), with `at` standing for `under`; files are masked with the
// box's `dev_null`. 0, or the errno of the first mount that failed (its path in
// `failed`).
int mask_paths_under(std::string_view under, const std::string& at, const std::string& dev_null, std::string& failed) {
  auto mount_or_note = [&](const char* src, const std::string& target, const char* type, unsigned long flags,
                           const char* data) {
    if (::mount(src, target.c_str(), type, flags, data) == 0) return true;
    int err = errno;
    failed = target;
    errno = err;
    return false;
  };
  for (std::string_view p : kMaskedPaths) {
    if (!p.starts_with(under)) continue;
    std::string target = at + std::string(p.substr(under.size()));
    struct stat st;
    if (::lstat(target.c_str(), &st) != 0) continue;
    // uid/gid: the box's root owns the empty directory, whoever mounts it.
    bool ok = S_ISDIR(st.st_mode) ? mount_or_note("tmpfs", target, "tmpfs",
                                                  MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=0,uid=0,gid=0")
                                  : mount_or_note(dev_null.c_str(), target, nullptr, MS_BIND, nullptr);
    if (!ok) return errno;
  }
  for (std::string_view p : kReadonlyPaths) {
    if (!p.starts_with(under)) continue;
    std::string target = at + std::string(p.substr(under.size()));
    if (!path_exists(target)) continue;
    if (!mount_or_note(target.c_str(), target, nullptr, MS_BIND | MS_REC, nullptr) ||
        !mount_or_note(nullptr, target, nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                       nullptr)) {
      return errno;
    }
  }
  return 0;
}

// ---- the box's /proc and its first process -----------------------------------------
// The box's /proc is a proc of the box's PID namespace (the one below the agent's,
// where the main command is PID 1), so that `ps` does not list the agent and `pidof`
// agrees with `$$`. Such a proc can only be mounted from inside that namespace, or
// by naming it, and it has no name (no pid_for_children link) until a process lives
// in it; the first one must be the main command, PID 1. So the init makes the
// namespace early and forks that process at once, before it drops its capabilities:
// the first process makes the box's network namespace, mounts the box's /proc on the
// root's (masked, as Docker does) while the init makes the rest of the root, detaches
// the host's root after the init's pivot, hardens itself as the init does, and waits
// for what to run (FirstProcessMain). The main command's start waits for
// no mount, and the agent never has a /proc of its own.

constexpr unsigned long kProcFlags = MS_NOSUID | MS_NODEV | MS_NOEXEC;

// From inside the box's PID namespace, before the init pivots into the root (our
// cwd): its proc on the root's /proc, masked with the host's /dev/null (the node
// the box's /dev binds). The host's /proc, still visible in this mount namespace,
// is what lets a user namespace mount a proc at all. 0 or an errno.
int mount_box_proc(const ChildArgs& a) {
  std::string proc = a.root + "/proc";
  if (::mount("proc", proc.c_str(), "proc", kProcFlags, nullptr) != 0) return errno;
  std::string failed;
  return mask_paths_under("/proc/", proc + "/", "/dev/null", failed);
}

// The box's network namespace, made by the box's first process while the init
// makes the box's /dev: its creation (sysctl tables, the loopback device: 0.45 ms of
// CPU or more) would otherwise be the larger part of the init's clone. Made once the
// id maps are written (the first process is forked after them, in the box's user
// namespace), so that the namespace makes its sysctls the box root's. The shim gets it first, on
// the channel (a byte and the namespace: it makes the box's TAP device there
// meanwhile), then the init, on the first process's socket (an errno and, on
// success, the namespace). The init says nothing on the channel before it has it, so
// the shim hears of it before the agent speaks. 0, or why the init was not told.
int make_network_namespace(const ChildArgs& a, int sock) {
  int err = 0;
  int net = -1;
  if (::unshare(CLONE_NEWNET) != 0) {
    err = errno;
  } else if ((net = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC)) < 0) {
    err = errno;  // still the host's /proc here: the init pivots only once it has the namespace
  }
  if (net >= 0 && send_with_fds(a.channel, "n", 1, &net, 1) != 1) err = errno;
  bool told = send_with_fds(sock, &err, sizeof err, &net, net < 0 || err != 0 ? 0 : 1) == sizeof err;
  int why = told ? 0 : errno;
  if (net >= 0) ::close(net);
  return told ? err : why;
}

// The init's side: into the namespace the first process made. It stays the init's
// (the agent's children are made in it); the first process is in it already.
void join_network_namespace(const ChildArgs& a, int first_fd) {
  int err = 0;
  int net = -1;
  size_t got = 0;
  ssize_t n;
  while ((n = recv_with_fds(first_fd, &err, sizeof err, &net, 1, &got)) < 0 && errno == EINTR) {
  }
  if (n != sizeof err || (err == 0 && got != 1)) {
    if (got == 1) ::close(net);
    errno = n < 0 ? errno : EPROTO;
    child_fail(a, "hear from the box's first process about the network namespace");
  }
  if (err != 0) {
    errno = err;
    child_fail(a, "make the box's network namespace", namespace_refusal_hint(err, /*network=*/true));
  }
  if (::setns(net, CLONE_NEWNET) != 0) child_fail(a, "join the box's network namespace");
  ::close(net);
}

// Docker's default capability set.
constexpr int kKeptCaps[] = {
    CAP_CHOWN,  CAP_DAC_OVERRIDE, CAP_FSETID,  CAP_FOWNER,           CAP_MKNOD,      CAP_NET_RAW, CAP_SETGID,
    CAP_SETUID, CAP_SETFCAP,      CAP_SETPCAP, CAP_NET_BIND_SERVICE, CAP_SYS_CHROOT, CAP_KILL,    CAP_AUDIT_WRITE};

// 0, or the errno of the step that failed (named in `step`).
int drop_capabilities(const char*& step) {
  uint64_t keep = 0;
  for (int c : kKeptCaps) keep |= 1ULL << c;
  // Up to the kernel's last capability, which may be newer than our headers': the
  // first EINVAL (not /proc/sys/kernel/cap_last_cap, a read through the box's /proc).
  for (int c = 0; c < 64; ++c) {
    if (keep & (1ULL << c)) continue;
    if (::prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0) {
      if (errno == EINVAL) break;
      step = "drop a capability from the bounding set";
      return errno;
    }
  }
  ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  for (int i = 0; i < 2; ++i) {
    auto bits = static_cast<uint32_t>(keep >> (32 * i));
    data[i].effective = data[i].permitted = data[i].inheritable = bits;
  }
  if (::syscall(SYS_capset, &hdr, data) != 0) {
    step = "capset";
    return errno;
  }
  return 0;
}

// Every disposition at its default, as in a container: the init's may not be
// (the shim's posix_spawn leaves glibc's own signals 32 and 33 ignored). Raw
// rt_sigaction: glibc's refuses those two.
void reset_all_dispositions() {
  struct {
    void (*handler)(int);
    unsigned long flags;
    void (*restorer)();
    uint64_t mask;
  } dfl = {};
  dfl.handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) ::syscall(SYS_rt_sigaction, sig, &dfl, nullptr, sizeof dfl.mask);
  }
}

// 0, or the errno of the limit that could not be set (named in `step`).
int set_rlimits(const InitParams& s, const char*& step) {
  struct Limit {
    int resource;
    rlim_t value;
  };
  const Limit limits[] = {{RLIMIT_NOFILE, 1048576}, {RLIMIT_CORE, 0}, {RLIMIT_MSGQUEUE, 819200}};
  for (const auto& l : limits) {
    if (l.resource == RLIMIT_NOFILE && s.rlimit_nofile) continue;  // set below
    rlimit r{l.value, l.value};
    if (::setrlimit(l.resource, &r) != 0 && l.resource != RLIMIT_NOFILE) {
      step = "setrlimit";
      return errno;
    }
  }
  // SecurityOptions: these must hold, or the box does not start.
  const Limit requested[] = {{RLIMIT_NOFILE, s.rlimit_nofile},
                             {RLIMIT_FSIZE, s.rlimit_fsize},
                             {RLIMIT_NPROC, s.rlimit_nproc},
                             {RLIMIT_AS, s.rlimit_as},
                             {RLIMIT_CPU, s.rlimit_cpu}};
  for (const auto& l : requested) {
    if (l.value == 0) continue;
    rlimit r{l.value, l.value};
    if (::setrlimit(l.resource, &r) != 0) {
      step = "setrlimit (security limit)";
      return errno;
    }
  }
  return 0;
}

// What the init and the first process both do last before they run anything of
// the box's: its rlimits, Docker's capabilities, no_new_privs, the seccomp filter.
// 0, or the errno of the step that failed (named in `step`).
int harden(const InitParams& params, const char*& step) {
  if (int err = set_rlimits(params, step); err != 0) return err;
  if (int err = drop_capabilities(step); err != 0) return err;
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    step = "set no_new_privs";
    return errno;
  }
  if (int rc = params.seccomp ? load_seccomp_filter() : 0; rc != 0) {
    step = "load seccomp filter";
    return -rc;
  }
  return 0;
}

// Once the init has pivoted into the box's root (it says so), the host's root, now
// stacked on the box's (reachable through "/.."), goes: our cwd is the box root's
// mount, as the init's was. The unmount waits for an RCU grace period, which would
// otherwise hold up the init each start; the agent waits for it before it touches
// a path of the box's (await_first_process_isolated), and nothing of the box's runs
// before. 0 or an errno.
int detach_host_root(int sock) {
  char tag = 0;
  ssize_t n;
  while ((n = ::recv(sock, &tag, 1, 0)) < 0 && errno == EINTR) {
  }
  if (n != 1 || tag != 'p') return n < 0 ? errno : EPROTO;
  return ::umount2(".", MNT_DETACH) == 0 ? 0 : errno;
}

[[noreturn]] void run_first_process(const ChildArgs& a, int sock) {
  // Gone with the agent; out of the box root's reach until it execs (a copy of the
  // init's memory, which belongs to the host's user namespace).
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  reset_all_dispositions();
  // First of all, as the init needs it before anything else of ours.
  if (make_network_namespace(a, sock) != 0) ::_exit(127);
  // The socket at 3 and the host's /dev/null on 0-2, whatever the zygote had
  // there, so that what it is sent lands above them; nothing else of the init's.
  int moved = ::fcntl(sock, F_DUPFD_CLOEXEC, 10);
  int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (moved < 0 || null < 0) ::_exit(127);
  for (int fd = 0; fd < 3; ++fd) {
    if (fd != null && ::dup2(null, fd) < 0) ::_exit(127);
  }
  if (::dup2(moved, 3) < 0 || ::fcntl(3, F_SETFD, FD_CLOEXEC) != 0 || !close_descriptors_from(4)) ::_exit(127);
  // The init pivots into the root once it hears how the mount went.
  int err = mount_box_proc(a);
  if (::send(3, &err, sizeof err, MSG_NOSIGNAL) != sizeof err || err != 0) ::_exit(127);
  // The host's root is still stacked on the box's until we detach it. The agent
  // hears how that went (a stage and an errno) before it configures the box, and
  // nothing of the box's runs before.
  int isolated[2] = {0, 0};
  if ((err = detach_host_root(3)) != 0) isolated[0] = kFirstProcessDetachFailed;
  isolated[1] = err;
  if (::send(3, isolated, sizeof isolated, MSG_NOSIGNAL) != sizeof isolated || err != 0) ::_exit(127);
  // Hardening failures are reported with the plan (it brings the report pipe).
  const char* step = nullptr;
  err = harden(*a.params, step);
  a.programs.first_process(3, err != 0 ? kFirstProcessHardeningFailed : 0, err);
  ::_exit(127);
}

// Forks the box's first process (we are the box's PID namespace's parent: it is
// PID 1 there); returns the init's end of its socket, close-on-exec.
int start_first_process(const ChildArgs& a, pid_t& pid) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) child_fail(a, "socketpair for the first process");
  pid = ::fork();
  if (pid < 0) child_fail(a, "fork the box's first process");
  if (pid == 0) {
    ::close(sv[0]);
    run_first_process(a, sv[1]);
  }
  ::close(sv[1]);
  // At a number (>= 10) that the init's own dup2s onto 0-4 leave alone.
  int fd = ::fcntl(sv[0], F_DUPFD_CLOEXEC, 10);
  if (fd < 0) child_fail(a, "move the first process's socket");
  ::close(sv[0]);
  return fd;
}

// What the first process says once the box's /proc is mounted, or why it is not.
void wait_for_box_proc(const ChildArgs& a, int first_fd) {
  int err = 0;
  ssize_t n;
  while ((n = ::recv(first_fd, &err, sizeof err, MSG_WAITALL)) < 0 && errno == EINTR) {
  }
  if (n != sizeof err) {
    errno = n < 0 ? errno : EPIPE;  // it died
    child_fail(a, "hear from the box's first process about its /proc");
  }
  if (err != 0) {
    errno = err;
    child_fail(a, "mount the box's /proc");
  }
}

[[noreturn]] void run_box_init(const ChildArgs& a) {
  // The box's files are made as in a container (and as the VM's are), not with
  // whatever umask the user who started the box has.
  ::umask(022);
  char go;
  if (::read(a.sync_read, &go, 1) != 1) ::_exit(125);  // the parent gave up
  if (::setresgid(0, 0, 0) != 0 || ::setresuid(0, 0, 0) != 0) child_fail(a, "become root of the user namespace");
  child_mount(a, nullptr, "/", nullptr, MS_REC | MS_PRIVATE);
  // The overlay came from the host's namespace, so here it is locked and
  // pivot_root refuses it. Bind it (from our cwd) onto a tmpfs of our own: that
  // new mount is ours, and /tmp of this namespace is nobody else's.
  child_mount(a, "tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0700,size=64k");
  if (::mkdir("/tmp/root", 0755) != 0) child_fail(a, "mkdir /tmp/root");
  child_mount(a, ".", "/tmp/root", nullptr, MS_BIND | MS_REC);
  if (::chdir("/tmp/root") != 0) child_fail(a, "chdir /tmp/root");
  if (::sethostname(a.params->hostname, std::strlen(a.params->hostname)) != 0) child_fail(a, "sethostname");
  std::string proc = a.root + "/proc", sys = a.root + "/sys";  // /tmp: mount_tmp, before the volumes
  for (const auto& d : {proc, sys}) require_mount_point(a, d);
  // Into the box's cgroups (v1: we move ourselves; v2: the parent moved us) before
  // anything forks and before the cgroup namespace is made.
  for (int fd : a.cgroup_join_fds) {
    if (::write(fd, "0", 1) != 1) child_fail(a, "join the box's cgroup");
    ::close(fd);
  }
  if (::read(a.sync_read, &go, 1) != 1) ::_exit(125);
  if (::unshare(CLONE_NEWCGROUP) != 0) child_fail(a, "unshare cgroup namespace");
  // The box's processes live one PID namespace down, where the main command is
  // PID 1: the first process, made now, mounts the box's /proc meanwhile. The agent
  // keeps no capability to make either.
  if (::unshare(CLONE_NEWPID) != 0) child_fail(a, "unshare PID namespace for the box's processes");
  pid_t first_pid = -1;
  int first_fd = start_first_process(a, first_pid);
  setup_dev(a);
  // What needs the box's network namespace comes last: sysfs shows its mounter's.
  join_network_namespace(a, first_fd);
  if (int err = bring_interface_up("lo"); err != 0) {
    errno = err;
    child_fail(a, "bring lo up");
  }
  child_mount(a, "sysfs", sys, "sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC);
  std::string failed;
  if (mask_paths_under("/sys/", sys + "/", a.root + "/dev/null", failed) != 0) child_fail(a, "mask " + failed);
  wait_for_box_proc(a, first_fd);
  if (::syscall(SYS_pivot_root, ".", ".") != 0) child_fail(a, "pivot_root into the box root");
  // The host's root is stacked on the box's now (reachable through "/.."): the first
  // process detaches it, before anything of the box's runs (detach_host_root).
  if (::send(first_fd, "p", 1, MSG_NOSIGNAL) != 1) child_fail(a, "ask the box's first process to detach the host root");
  if (::chdir("/") != 0) child_fail(a, "chdir /");
  // The agent keeps the channel (3) and the first process's socket (4). No exec
  // closes what the zygote was given: everything else of the host's is closed now,
  // while the descriptor limit is still the shim's (where close_range is missing,
  // the fallback cannot list /proc/self/fd: this /proc is the box's, where we have no
  // pid), but the report pipe (5), which goes last of all: its EOF tells the shim the
  // agent runs, and until then it carries any failure.
  ChildArgs late = a;
  late.report = ::fcntl(a.report, F_DUPFD_CLOEXEC, 10);  // out of the way of the dup2s below
  if (late.report < 0) child_fail(a, "move the report pipe");
  if (::dup2(a.channel, 3) < 0) child_fail(late, "dup2 channel");
  int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null < 0) child_fail(late, "open /dev/null");
  ::dup2(null, 0);
  ::dup2(null, 1);
  ::dup2(null, 2);
  if (::dup2(first_fd, 4) < 0) child_fail(late, "move the first process's socket");
  if (::dup2(late.report, 5) < 0) child_fail(late, "move the report pipe");
  late.report = 5;
  if (!close_descriptors_from(6)) child_fail(late, "close the host's descriptors");
  if (const char* step = nullptr; int err = harden(*a.params, step)) {
    errno = err;
    child_fail(late, step);
  }
  // The box dies with its shim, however the shim dies (set last: credential
  // changes would clear it).
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) child_fail(late, "set the parent-death signal");
  // (getppid() is 0 here: the parent is outside our PID namespace. The shim is
  // still blocked reading the report pipe, so it cannot have died unnoticed.)
  ::close(5);
  ::_exit(a.programs.agent(3, 4, first_pid));
}

// Receives one request; returns the init's pid (the shim's child: CLONE_PARENT)
// or -errno. Runs the init itself in the clone's child.
pid_t clone_init_for(int sock, BoxPrograms programs) {
  InitParams params{};
  int fds[kMaxPassedFds];
  size_t nfds = 0;
  ssize_t n = recv_with_fds(sock, &params, sizeof params, fds, kMaxPassedFds, &nfds);
  if (n == 0) ::_exit(0);  // the shim needs no box init (a VM box, or none)
  if (n != static_cast<ssize_t>(sizeof params) || params.version != kInitProtocolVersion || nfds < 5 ||
      params.hostname[sizeof params.hostname - 1] != '\0') {
    return n < 0 ? -errno : -EPROTO;
  }
  // Into the shim's mount namespace, where the box's overlay is, and the box root.
  if (::setns(fds[0], CLONE_NEWNS) != 0 || ::fchdir(fds[1]) != 0) return -errno;
  ChildArgs args{&params, ".", fds[2], fds[3], fds[4], {fds + 5, fds + nfds}, programs};
  // Like fork (no stack of its own): the init goes on, on a copy of this stack. And
  // as glibc's fork does, the kernel writes the child's thread id where glibc keeps
  // it (the address glibc gave set_tid_address), which raise() and its kin use.
  unsigned long flags =
      CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_PARENT | SIGCHLD;
  int* tid_address = nullptr;
  if (::prctl(PR_GET_TID_ADDRESS, &tid_address) == 0 && tid_address) flags |= CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID;
  long pid = ::syscall(SYS_clone, flags, nullptr, nullptr, tid_address, 0L);
  if (pid == 0) run_box_init(args);
  return pid < 0 ? -errno : static_cast<pid_t>(pid);
}

}  // namespace

void serve_zygote(int sock, BoxPrograms programs) {
  // Gone with the shim, should it die before it needs us (it also gets EOF).
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  pid_t pid = clone_init_for(sock, programs);
  (void)!::send(sock, &pid, sizeof pid, MSG_NOSIGNAL);
  ::_exit(0);
}

}  // namespace boxlite::engine::jail
