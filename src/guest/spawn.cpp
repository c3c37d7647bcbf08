#include "guest/spawn.hpp"

#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "common/error.hpp"
#include "common/io.hpp"
#include "guest/copy.hpp"
#include "guest/lookup.hpp"
#include "guest/users.hpp"

namespace boxlite::guest {
namespace {

constexpr int kBuiltinPipeBytes = 1 << 20;

// A command that cannot start: an Execution error with why, as a kind the host
// maps (never by its text). The message keeps the reference's "spawn_failed: ".
[[noreturn]] void spawn_failed(SpawnFailure why, const std::string& what) {
  throw Error(ErrorKind::Execution, "spawn_failed: " + what, why);
}
// Our own failure before the command ran (a pipe, a pty, a fork).
[[noreturn]] void setup_failed(std::string_view what, int err = errno) {
  spawn_failed(SpawnFailure::Setup, errno_text(what, err));
}

struct Pipe {
  UniqueFd read, write;
  static Pipe make() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) setup_failed("pipe");
    return Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
  }
};

struct Pty {
  UniqueFd master, slave;
};

Pty open_pty(unsigned rows, unsigned cols) {
  UniqueFd master(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!master) setup_failed("open /dev/ptmx");
  if (::grantpt(master.get()) != 0 || ::unlockpt(master.get()) != 0) setup_failed("unlockpt");
  char name[128];
  if (::ptsname_r(master.get(), name, sizeof name) != 0) setup_failed("ptsname");
  UniqueFd slave(::open(name, O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!slave) setup_failed(std::string("open ") + name);
  winsize ws{};
  ws.ws_row = static_cast<unsigned short>(rows ? rows : 24);
  ws.ws_col = static_cast<unsigned short>(cols ? cols : 80);
  ::ioctl(master.get(), TIOCSWINSZ, &ws);
  return Pty{std::move(master), std::move(slave)};
}

// Everything the child needs, prepared before fork so the child only makes syscalls.
struct ChildPlan {
  std::string path;
  std::vector<char*> argv, envp;
  Identity id;
  std::string cwd;
  int in = -1, out = -1, err = -1, ctty = -1, report = -1;
  ProcSwap proc_swap;
  // The child's PID in the box's namespace (the agent's differs): it writes it here
  // when it shares the agent's memory (CLONE_VM), before the agent resumes.
  mutable pid_t pid_in_box = 0;
  const std::string* builtin = nullptr;  // run this instead of execve
  const std::vector<std::string>* builtin_args = nullptr;
  const std::vector<int>* changed_signals = nullptr;  // changed_dispositions()
  unsigned cpus = 0;                                  // the child's CPU count, when limited (pin_to_cpus)
  // The rlimits the child sets (SpawnRequest::limits, the ones asked for).
  struct Limit {
    int resource;
    rlim_t value;
  };
  Limit limits[5] = {};
  size_t nlimits = 0;
};

// The limits a child sets: those of `l` that are not 0.
void plan_limits(ChildPlan& plan, const ResourceLimits& l) {
  const ChildPlan::Limit all[] = {{RLIMIT_NOFILE, l.nofile},
                                  {RLIMIT_FSIZE, l.fsize},
                                  {RLIMIT_NPROC, l.nproc},
                                  {RLIMIT_AS, l.as},
                                  {RLIMIT_CPU, l.cpu}};
  plan.nlimits = 0;
  for (const auto& limit : all) {
    if (limit.value != 0) plan.limits[plan.nlimits++] = limit;
  }
}

// The kernel's struct sigaction: glibc's sigaction() refuses to touch signals 32
// and 33 (its own), which posix_spawn leaves ignored in the processes it starts
// (so in the shim, and through the exec's in the agent): a box's process must
// start with every disposition at its default, as in a container.
struct KernelSigaction {
  void (*handler)(int);
  unsigned long flags;
  void (*restorer)();
  uint64_t mask;
};

// The signals whose disposition is not the default in the agent (a handler, or
// ignored): a child resets these, not all 64 (a syscall each, on every exec). Read
// once, at the first spawn: the agent sets its dispositions before it serves anything.
const std::vector<int>& changed_dispositions() {
  static const std::vector<int> changed = [] {
    std::vector<int> out;
    for (int s = 1; s < NSIG; ++s) {
      KernelSigaction sa = {};
      if (::syscall(SYS_rt_sigaction, s, nullptr, &sa, sizeof sa.mask) == 0 && sa.handler != SIG_DFL) out.push_back(s);
    }
    return out;
  }();
  return changed;
}

void reset_disposition(int sig) {
  KernelSigaction dfl = {};
  dfl.handler = SIG_DFL;
  ::syscall(SYS_rt_sigaction, sig, &dfl, nullptr, sizeof dfl.mask);
}

[[noreturn]] void child_fail(int report, int stage) {
  int msg[2] = {stage, errno};
  (void)!::write(report, msg, sizeof msg);
  ::_exit(127);
}

// `count` of this process's CPUs from the one it runs on, so that setting the
// affinity moves nothing: a process on a CPU outside its new mask waits for the
// kernel's stopper thread to migrate it (~0.3 ms here, and the box's first process,
// forked early, is on either CPU when its plan comes). Nothing when `count` covers
// them all. Raw syscalls, no allocation: the child may share the agent's memory.
void pin_to_cpus(unsigned count) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  unsigned here = 0;
  if (count == 0 || ::syscall(SYS_sched_getaffinity, 0, sizeof allowed, &allowed) < 0 ||
      static_cast<unsigned>(CPU_COUNT(&allowed)) <= count || ::syscall(SYS_getcpu, &here, nullptr, nullptr) != 0) {
    return;
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  unsigned picked = 0;
  // From `here` upwards, then wrapping round to the lowest allowed CPU.
  for (unsigned pass = 0; pass < 2 && picked < count; ++pass) {
    for (unsigned cpu = pass == 0 ? here : 0; cpu < (pass == 0 ? CPU_SETSIZE : here) && picked < count; ++cpu) {
      if (CPU_ISSET(cpu, &allowed)) {
        CPU_SET(cpu, &set);
        ++picked;
      }
    }
  }
  (void)::syscall(SYS_sched_setaffinity, 0, sizeof set, &set);
}

[[noreturn]] void run_child(const ChildPlan& p) {
  // Dispositions first, then the mask: a signal let in early must not run one
  // of the agent's handlers in here (the child may share the agent's memory).
  for (int s : *p.changed_signals) reset_disposition(s);
  sigset_t all;
  sigemptyset(&all);
  ::sigprocmask(SIG_SETMASK, &all, nullptr);
  p.pid_in_box = static_cast<pid_t>(::syscall(SYS_getpid));
  if (int err = put_box_proc_in_place(p.proc_swap); err != 0) {
    errno = err;
    child_fail(p.report, 10);
  }
  // Its own process group, so a kill reaches everything it started. A session
  // only where a terminal needs one: setsid() makes a scheduler autogroup,
  // which costs a host with autogroups ~4 ms per exec (an RCU grace period).
  if (p.ctty >= 0) {
    if (::setsid() < 0) child_fail(p.report, 1);
    if (::ioctl(p.ctty, TIOCSCTTY, 0) != 0) child_fail(p.report, 2);
  } else if (::setpgid(0, 0) != 0) {
    child_fail(p.report, 9);
  }
  if (::dup2(p.in, 0) < 0 || ::dup2(p.out, 1) < 0 || ::dup2(p.err, 2) < 0) child_fail(p.report, 3);
  // Before the ids change: a user over its RLIMIT_NPROC then cannot exec.
  for (size_t i = 0; i < p.nlimits; ++i) {
    rlimit r{p.limits[i].value, p.limits[i].value};
    if (::setrlimit(p.limits[i].resource, &r) != 0) child_fail(p.report, 16);
  }
  // Raw syscalls, as glibc's posix_spawn makes them: its wrappers would act for
  // every thread of the process whose memory this child shares.
  if (::syscall(SYS_setgroups, p.id.groups.size(), p.id.groups.data()) != 0) child_fail(p.report, 4);
  if (::syscall(SYS_setresgid, p.id.gid, p.id.gid, p.id.gid) != 0) child_fail(p.report, 5);
  if (::syscall(SYS_setresuid, p.id.uid, p.id.uid, p.id.uid) != 0) child_fail(p.report, 6);
  if (::chdir(p.cwd.c_str()) != 0) child_fail(p.report, 7);
  // What nproc then reports; the box may widen it again (the cgroup's quota holds).
  pin_to_cpus(p.cpus);
  if (p.builtin) {
    // No execve closes the agent's descriptors (the channel, other execs' pipes)
    // for us: close them, or another exec could never see EOF on its stdin while
    // this one runs. The report pipe goes too, which tells the agent we started.
    if (!close_descriptors_from(3)) child_fail(p.report, 11);
    ::_exit(run_builtin(*p.builtin, *p.builtin_args));
  }
  ::execve(p.path.c_str(), p.argv.data(), p.envp.data());
  child_fail(p.report, 8);
}

int child_entry(void* plan) { run_child(*static_cast<const ChildPlan*>(plan)); }

// A command is started like posix_spawn does: the child shares the agent's
// memory and the agent sleeps until it has exec'd, so no page tables are copied
// and the child runs at once. It only makes syscalls until then. A builtin runs
// its whole program in the child, so it gets a real fork.
pid_t start_child(const ChildPlan& plan) {
  if (plan.builtin) {
    pid_t pid = ::fork();
    if (pid == 0) run_child(plan);
    return pid;
  }
  constexpr size_t kStackBytes = 64 * 1024;
  auto stack = std::make_unique<char[]>(kStackBytes);
  return ::clone(child_entry, stack.get() + kStackBytes, CLONE_VM | CLONE_VFORK | SIGCHLD,
                 const_cast<ChildPlan*>(&plan));
}

// ---- the plan a jail's waiting first process is sent -------------------------
// A header, with the plan's descriptors (stdin, stdout, stderr and the report pipe;
// a holder init gets the report pipe alone), then its body: the supplementary
// groups, then the NUL-terminated path, working directory, argv and environment.
enum class PlanKind : uint32_t { kExec = 1, kHolder = 2 };

struct PlanHeader {
  PlanKind kind;
  uint32_t uid, gid;
  uint32_t ngroups, argc, envc;
  uint32_t ctty;  // 1: stdout is the terminal to make the controlling one
  uint32_t cpus;  // 0: not limited
  uint64_t body_bytes;
};

constexpr size_t kExecPlanFds = 4;
// More than a protocol frame can bring (argv and environment come in one).
constexpr uint64_t kMaxPlanBody = uint64_t{1} << 30;

bool read_all(int fd, void* data, size_t len) noexcept {
  auto* p = static_cast<char*>(data);
  while (len > 0) {
    ssize_t n = ::read(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

void send_plan(const WaitingFirstProcess& first, const PlanHeader& hdr, const int* fds, size_t nfds,
               const std::string& body) {
  ssize_t n;
  do {
    n = send_with_fds(first.socket, &hdr, sizeof hdr, fds, nfds);
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(sizeof hdr)) setup_failed("hand the box's first process its plan");
  send_all(first.socket, body.data(), body.size());
}

void append_string(std::string& body, const std::string& s) {
  body.append(s);
  body.push_back('\0');
}

// What start_child does for the box's first process: it is told, and runs it.
pid_t hand_to_first_process(const WaitingFirstProcess& first, const ChildPlan& plan,
                            const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  PlanHeader hdr{};
  hdr.kind = PlanKind::kExec;
  hdr.uid = plan.id.uid;
  hdr.gid = plan.id.gid;
  hdr.ngroups = static_cast<uint32_t>(plan.id.groups.size());
  hdr.argc = static_cast<uint32_t>(argv.size());
  hdr.envc = static_cast<uint32_t>(env.size());
  hdr.ctty = plan.ctty >= 0 ? 1 : 0;
  hdr.cpus = plan.cpus;
  std::string body(reinterpret_cast<const char*>(plan.id.groups.data()), plan.id.groups.size() * sizeof(gid_t));
  append_string(body, plan.path);
  append_string(body, plan.cwd);
  for (const auto& a : argv) append_string(body, a);
  for (const auto& e : env) append_string(body, e);
  hdr.body_bytes = body.size();
  const int fds[kExecPlanFds] = {plan.in, plan.out, plan.err, plan.report};
  send_plan(first, hdr, fds, kExecPlanFds, body);
  return first.pid;
}

// The next NUL-terminated string of `body` from `at`, or nullptr past its end.
char* next_string(std::string& body, size_t& at) {
  size_t end = body.find('\0', at);
  if (end == std::string::npos) return nullptr;
  char* s = body.data() + at;
  at = end + 1;
  return s;
}

// What a plan that cannot be read is reported as: EPROTO at stage 15.
[[noreturn]] void bad_plan(int report) {
  errno = EPROTO;
  child_fail(report, 15);
}

[[noreturn]] void run_exec_plan(const PlanHeader& hdr, const int* fds, std::string& body) {
  static const std::vector<int> kNoneChanged;  // the first process reset them all
  ChildPlan plan;
  plan.in = fds[0];
  plan.out = fds[1];
  plan.err = fds[2];
  plan.report = fds[3];
  plan.ctty = hdr.ctty ? plan.out : -1;
  plan.id.uid = hdr.uid;
  plan.id.gid = hdr.gid;
  size_t groups_bytes = size_t{hdr.ngroups} * sizeof(gid_t);
  if (groups_bytes > body.size()) bad_plan(plan.report);
  plan.id.groups.resize(hdr.ngroups);
  std::memcpy(plan.id.groups.data(), body.data(), groups_bytes);
  size_t at = groups_bytes;
  char* path = next_string(body, at);
  char* cwd = next_string(body, at);
  if (!path || !cwd) bad_plan(plan.report);
  plan.path = path;
  plan.cwd = cwd;
  for (uint64_t i = 0; i < uint64_t{hdr.argc} + hdr.envc; ++i) {
    char* s = next_string(body, at);
    if (!s) bad_plan(plan.report);
    (i < hdr.argc ? plan.argv : plan.envp).push_back(s);
  }
  plan.argv.push_back(nullptr);
  plan.envp.push_back(nullptr);
  plan.cpus = hdr.cpus;
  plan.changed_signals = &kNoneChanged;
  run_child(plan);
}

const char* stage_name(int stage) {
  switch (stage) {
    case 1: return "setsid for";
    case 2: return "set controlling terminal for";
    case 3: return "set up stdio for";
    case 4: return "setgroups";
    case 5: return "setgid";
    case 6: return "setuid";
    case 7: return "chdir";
    case 9: return "setpgid for";
    case 10: return "mount the box's /proc for";
    case 11: return "close the agent's descriptors for";
    case 12: return "harden the box's first process for";  // engine::jail::kFirstProcessHardeningFailed
    case 14: return "detach the host's root for";          // engine::jail::kFirstProcessDetachFailed
    case 15: return "read the plan of";
    case 16: return "set the box's resource limits (SecurityOptions) for";
    default: return "exec";
  }
}

// "0,10,100": the first few of `ids`, as much as an error message needs (an image's
// /etc/group may list a user in thousands).
std::string id_list(const std::vector<gid_t>& ids) {
  constexpr size_t kShown = 8;
  std::string out;
  for (size_t i = 0; i < ids.size() && i < kShown; ++i) out += (i ? "," : "") + std::to_string(ids[i]);
  if (ids.size() > kShown) out += " and " + std::to_string(ids.size() - kShown) + " more";
  return out;
}

// What the failed stage of a child acted on: its ids, its directory, or else the program.
std::string failed_step(int stage, const ChildPlan& plan) {
  switch (stage) {
    case 4: return "setgroups " + id_list(plan.id.groups);
    case 5: return "setgid " + std::to_string(plan.id.gid);
    case 6: return "setuid " + std::to_string(plan.id.uid);
    case 7: return "chdir " + plan.cwd;
    default: return std::string(stage_name(stage)) + " " + plan.path;
  }
}

// How a child's failed stage is reported: the exec's own failure by its errno
// (no such file, as a script's missing interpreter, is NotFound), the ids and
// the directory as what they are, the rest as our setup.
SpawnFailure failure_of_stage(int stage, int err) {
  switch (stage) {
    case 4:
    case 5:
    case 6: return SpawnFailure::UnknownUser;
    case 7: return SpawnFailure::BadWorkingDir;
    case 8: return err == ENOENT || err == ENOTDIR ? SpawnFailure::NotFound : SpawnFailure::NotExecutable;
    default: return SpawnFailure::Setup;
  }
}

// A jail maps only box ids 0-65535 (engine::jail::kUidCount, in a host header the
// guest does not include); a VM's agent maps every id. An id beyond would fail the
// child's setgroups, setgid or setuid with a bare "Invalid argument".
void require_mapped_ids(const Identity& id) {
  auto refuse = [](const char* what, unsigned long value) {
    spawn_failed(SpawnFailure::UnknownUser,
                 std::string(what) + " " + std::to_string(value) +
                     ": the jail engine maps only user and group ids 0-65535 (use --engine vm for larger ids)");
  };
  if (!ids_mapped(id.uid, static_cast<gid_t>(-1))) refuse("user", id.uid);
  if (!ids_mapped(static_cast<uid_t>(-1), id.gid)) refuse("group", id.gid);
  for (gid_t g : id.groups) {
    if (g != id.gid && !ids_mapped(static_cast<uid_t>(-1), g)) refuse("group", g);
  }
}

// The command's working directory, absolute: a relative one is taken from the box's
// root (where the agent runs), so that paths joined to it need no chdir to mean it.
std::string working_directory(const std::string& cwd) { return path_in_dir("/", cwd.empty() ? "/" : cwd); }

}  // namespace

int put_box_proc_in_place(const ProcSwap& swap) noexcept {
  switch (swap.mode) {
    case ProcSwap::Mode::kNone: return 0;
    case ProcSwap::Mode::kMountHere:
      if (::umount2("/proc", MNT_DETACH) != 0 && errno != EINVAL) return errno;
      return ::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) == 0 ? 0 : errno;
  }
  return EINVAL;
}

const std::string* env_lookup(const std::vector<std::string>& env, const std::string& key) {
  for (auto it = env.rbegin(); it != env.rend(); ++it) {
    if (it->size() > key.size() && it->compare(0, key.size(), key) == 0 && (*it)[key.size()] == '=') return &*it;
  }
  return nullptr;
}

std::vector<std::string> env_merge(const std::vector<std::string>& base, const std::vector<std::string>& over) {
  std::vector<std::string> out = base;
  for (const auto& kv : over) {
    auto eq = kv.find('=');
    std::string key = kv.substr(0, eq);
    bool replaced = false;
    for (auto& existing : out) {
      if (existing.compare(0, key.size(), key) == 0 && existing.size() > key.size() && existing[key.size()] == '=') {
        existing = kv;
        replaced = true;
      }
    }
    if (!replaced) out.push_back(kv);
  }
  return out;
}

[[noreturn]] void serve_first_process(int plan_fd, int early_stage, int early_errno) {
  PlanHeader hdr{};
  int fds[kMaxPassedFds];
  size_t nfds = 0;
  ssize_t n;
  do {
    n = recv_with_fds(plan_fd, &hdr, sizeof hdr, fds, kMaxPassedFds, &nfds);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) ::_exit(0);  // the agent is gone, or never needed us
  bool whole = read_all(plan_fd, reinterpret_cast<char*>(&hdr) + n, sizeof hdr - static_cast<size_t>(n));
  if (whole && hdr.kind == PlanKind::kHolder && nfds == 1) {
    if (early_stage != 0) {
      errno = early_errno;
      child_fail(fds[0], early_stage);
    }
    // Nothing of the agent's (the plan socket, the report pipe) stays open in the box's PID 1.
    if (!close_descriptors_from(0)) ::_exit(127);
    run_holder_init();
  }
  if (nfds != kExecPlanFds) ::_exit(127);  // no report pipe to say so on: the agent sees EPIPE or EOF
  int report = fds[3];
  if (!whole || hdr.kind != PlanKind::kExec || hdr.body_bytes > kMaxPlanBody) bad_plan(report);
  // Read whole before anything is reported: the agent is still sending it.
  std::string body;
  try {
    body.resize(hdr.body_bytes);
  } catch (const std::bad_alloc&) {
    errno = ENOMEM;
    child_fail(report, 15);
  }
  if (!read_all(plan_fd, body.data(), body.size())) bad_plan(report);
  if (early_stage != 0) {
    errno = early_errno;
    child_fail(report, early_stage);
  }
  run_exec_plan(hdr, fds, body);
}

void await_first_process_isolated(const WaitingFirstProcess& first) {
  int isolated[2] = {0, 0};
  ssize_t n;
  while ((n = ::recv(first.socket, isolated, sizeof isolated, MSG_WAITALL)) < 0 && errno == EINTR) {
  }
  if (n != static_cast<ssize_t>(sizeof isolated)) {
    throw_errno(ErrorKind::Engine, "hear from the box's first process", n < 0 ? errno : EPIPE);
  }
  if (isolated[0] != 0) {
    std::string step = stage_name(isolated[0]);
    if (step.ends_with(" for")) step.resize(step.size() - 4);
    throw_errno(ErrorKind::Engine, "the box's first process could not " + step, isolated[1]);
  }
}

[[noreturn]] void run_holder_init() {
  ::prctl(PR_SET_NAME, "boxlite-init");
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &chld, nullptr);
  for (;;) {
    siginfo_t si;
    ::sigwaitinfo(&chld, &si);
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
  }
}

void start_holder_in(const WaitingFirstProcess& first) {
  Pipe report = Pipe::make();
  PlanHeader hdr{};
  hdr.kind = PlanKind::kHolder;
  int fd = report.write.get();
  send_plan(first, hdr, &fd, 1, {});
  report.write.reset();
  int msg[2];  // a stage and an errno, as a child's report
  ssize_t n;
  while ((n = ::read(report.read.get(), msg, sizeof msg)) < 0 && errno == EINTR) {
  }
  if (n == static_cast<ssize_t>(sizeof msg)) {
    ::waitpid(first.pid, nullptr, 0);
    throw_errno(ErrorKind::Engine, std::string(stage_name(msg[0])) + " the box's holder init", msg[1]);
  }
}

Spawned spawn_process(const SpawnRequest& req) {
  if (!req.builtin.empty()) {
    if (!is_builtin(req.builtin)) spawn_failed(SpawnFailure::NotFound, "unknown builtin '" + req.builtin + "'");
    // The first process execs what it is handed; a builtin runs the agent's code.
    if (req.first_process) spawn_failed(SpawnFailure::Setup, "a builtin cannot be the box's first process");
  } else if (req.argv.empty() || req.argv[0].empty()) {
    spawn_failed(SpawnFailure::NotFound, "empty command");
  }
  ChildPlan plan;
  try {
    plan.id = resolve_identity(req.user);
  } catch (const Error& e) {
    spawn_failed(SpawnFailure::UnknownUser, e.what());
  }
  require_mapped_ids(plan.id);
  plan.cwd = working_directory(req.cwd);
  // Before the command is looked up there: a missing directory is the error, not the command.
  struct stat st;
  if (::stat(plan.cwd.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    spawn_failed(SpawnFailure::BadWorkingDir,
                 "working directory '" + plan.cwd + "' does not exist or is not a directory");
  }
  std::vector<std::string> env = req.env;
  if (!env_lookup(env, "PATH")) env.emplace_back("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
  if (!env_lookup(env, "HOME")) env.push_back("HOME=" + plan.id.home);
  if (req.tty && !env_lookup(env, "TERM")) env.emplace_back("TERM=xterm");
  const std::string* path_kv = env_lookup(env, "PATH");
  if (!req.builtin.empty()) {
    plan.builtin = &req.builtin;
    plan.builtin_args = &req.builtin_args;
    plan.path = "builtin " + req.builtin;  // for error messages
  } else if (req.argv[0].find('/') != std::string::npos) {
    // A path is taken from the command's working directory, as execve in it does: the
    // child execs it as given, after its chdir there.
    plan.path = req.argv[0];
    struct stat target;
    if (::stat(path_in_dir(plan.cwd, plan.path).c_str(), &target) != 0) {
      spawn_failed(SpawnFailure::NotFound,
                   "executable file not found: " + req.argv[0] + " (" + std::strerror(errno) + ")");
    }
    if (S_ISDIR(target.st_mode))
      spawn_failed(SpawnFailure::NotExecutable, "cannot execute " + req.argv[0] + ": is a directory");
    if (!S_ISREG(target.st_mode) || (target.st_mode & 0111) == 0) {
      spawn_failed(SpawnFailure::NotExecutable, "cannot execute " + req.argv[0] + ": permission denied");
    }
  } else {
    plan.path = find_in_path(req.argv[0], path_kv->substr(5), plan.cwd);
    if (plan.path.empty())
      spawn_failed(SpawnFailure::NotFound, "executable file '" + req.argv[0] + "' not found in $PATH");
  }
  plan.cpus = req.cpus;
  plan_limits(plan, req.limits);
  plan.proc_swap = req.proc_swap;

  std::vector<std::string> argv_store = req.argv;
  for (auto& a : argv_store) plan.argv.push_back(a.data());
  plan.argv.push_back(nullptr);
  for (auto& e : env) plan.envp.push_back(e.data());
  plan.envp.push_back(nullptr);

  Spawned out;
  UniqueFd devnull(::open("/dev/null", O_RDWR | O_CLOEXEC));
  Pty pty;
  Pipe in_pipe, out_pipe, err_pipe;
  if (req.tty) {
    pty = open_pty(req.rows, req.cols);
    plan.in = plan.out = plan.err = plan.ctty = pty.slave.get();
    if (!req.stdin_open) plan.in = devnull.get();
  } else {
    out_pipe = Pipe::make();
    err_pipe = Pipe::make();
    plan.out = out_pipe.write.get();
    plan.err = err_pipe.write.get();
    if (req.stdin_open) {
      in_pipe = Pipe::make();
      plan.in = in_pipe.read.get();
    } else {
      plan.in = devnull.get();
    }
    if (!req.builtin.empty()) {
      // Copies stream bulk data: a deeper pipe lets the agent hand its stdin buffer
      // over (and return credit) at once. Best effort: the default still works.
      for (int fd : {in_pipe.write.get(), out_pipe.write.get()}) {
        if (fd >= 0) ::fcntl(fd, F_SETPIPE_SZ, kBuiltinPipeBytes);
      }
    }
  }
  if (plan.in < 0) setup_failed("open /dev/null");
  Pipe report = Pipe::make();
  plan.report = report.write.get();

  bool first = req.first_process != nullptr;
  // Read at the first child the agent starts itself (~0.04 ms): the first process
  // reset every disposition of its own.
  if (!first) plan.changed_signals = &changed_dispositions();
  pid_t pid = first ? hand_to_first_process(*req.first_process, plan, argv_store, env) : start_child(plan);
  if (pid < 0) setup_failed("fork");
  report.write.reset();
  int msg[2];
  ssize_t n;
  do {
    n = ::read(report.read.get(), msg, sizeof msg);
  } while (n < 0 && errno == EINTR);
  if (n == static_cast<ssize_t>(sizeof msg)) {
    int status;
    ::waitpid(pid, &status, 0);
    spawn_failed(failure_of_stage(msg[0], msg[1]), errno_text(failed_step(msg[0], plan), msg[1]));
  }
  out.pid = pid;
  // A builtin's fork shares nothing; the first process is PID 1 of the box.
  out.pid_in_box = first ? 1 : plan.builtin ? pid : plan.pid_in_box;
  if (req.tty) {
    if (req.stdin_open) {
      out.stdin_fd = UniqueFd(::fcntl(pty.master.get(), F_DUPFD_CLOEXEC, 0));
    }
    out.stdout_fd = std::move(pty.master);
  } else {
    out.stdin_fd = std::move(in_pipe.write);
    out.stdout_fd = std::move(out_pipe.read);
    out.stderr_fd = std::move(err_pipe.read);
  }
  return out;
}

}  // namespace boxlite::guest
