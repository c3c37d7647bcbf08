#include "engine/vm/vm_engine.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "common/error.hpp"
#include "common/io.hpp"
#include "engine/vm/qemu.hpp"

namespace boxlite::engine::vm {

namespace {

// A pipe whose write end QEMU gets as its stdout or stderr; the shim caps what
// comes out of the read end, so a hostile guest can print forever without filling
// the host's disk.
struct Pipe {
  UniqueFd read, write;
};
Pipe log_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw_errno(ErrorKind::Engine, "pipe for an engine log");
  // Room for a kernel's whole boot log while the shim is busy elsewhere.
  ::fcntl(fds[1], F_SETPIPE_SZ, 1 << 20);
  return {UniqueFd(fds[0]), UniqueFd(fds[1])};
}

// fork+exec with PDEATHSIG: QEMU must die with the shim, however the shim dies.
// The shim is single-threaded, so forking here is safe.
Child spawn_qemu(const std::vector<std::string>& argv, int stdout_fd, int stderr_fd) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) throw_errno(ErrorKind::Engine, "fork for " + argv[0]);
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    int null = ::open("/dev/null", O_RDONLY);
    if (null < 0) ::_exit(127);
    ::dup2(null, 0);
    ::dup2(stdout_fd, 1);
    ::dup2(stderr_fd, 2);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execvp(args[0], args.data());
    std::fprintf(stderr, "exec %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  return Child(pid);
}

class VmEngine final : public Engine {
 public:
  explicit VmEngine(const ShimSpec& spec) : spec_(spec) {}
  EngineKind kind() const override { return EngineKind::Vm; }
  std::string_view process_name() const override { return "the VM (QEMU)"; }
  bool has_console() const override { return true; }
  NetLink net_link() const override { return NetLink::StreamSocket; }
  bool pipelined_handshake() const override { return false; }  // its agent is a cached initramfs's: checked first

  Launched start(double deadline_ms, const std::function<void(int)>&) override {
    UniqueFd listen = unix_listen(agent_socket_path(spec_.box_dir), 1);
    Pipe console = log_pipe(), output = log_pipe();
    Launched l;
    l.process = spawn_qemu(qemu_argv(spec_), console.write.get(), output.write.get());
    l.console = std::move(console.read);
    l.output = std::move(output.read);
    for (;;) {
      pollfd p{listen.get(), POLLIN, 0};
      if (::poll(&p, 1, 50) > 0) break;
      if (auto st = l.process.try_wait()) throw Error(ErrorKind::Engine, "QEMU exited (" + describe_status(*st) + ")");
      if (now_ms() > deadline_ms) throw Error(ErrorKind::Engine, "QEMU did not connect the agent channel");
    }
    l.channel = UniqueFd(::accept4(listen.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!l.channel) throw_errno(ErrorKind::Engine, "accept agent channel");
    return l;
  }

  void configure(proto::BoxConfig& cfg) const override {
    // A jail's hostname is set before its capabilities drop; a VM's agent sets its own.
    cfg.set_hostname(spec_.hostname);
    cfg.set_root_disk_serial(kRootDiskSerial);
    if (cfg.has_network()) cfg.mutable_network()->set_configure_link(true);  // a jail's eth0 is the shim's
    for (size_t i = 0; i < spec_.volumes.size(); ++i) {
      auto* v = cfg.add_volumes();
      v->set_tag(volume_tag(i));
      v->set_guest_path(spec_.volumes[i].guest_path);
      v->set_read_only(spec_.volumes[i].read_only);
    }
    // The jail's init sets the limits for the whole box; a VM's agent sets them on
    // each process it starts (0 = none).
    if (!spec_.rlimit_nofile && !spec_.rlimit_fsize && !spec_.rlimit_nproc && !spec_.rlimit_as && !spec_.rlimit_cpu)
      return;
    auto* lim = cfg.mutable_limits();
    lim->set_nofile(spec_.rlimit_nofile);
    lim->set_fsize(spec_.rlimit_fsize);
    lim->set_nproc(spec_.rlimit_nproc);
    lim->set_as(spec_.rlimit_as);
    lim->set_cpu(spec_.rlimit_cpu);
  }

  Usage usage(pid_t process) const override {
    Usage u;
    try {
      auto statm = split(read_file("/proc/" + std::to_string(process) + "/statm"), ' ');
      if (statm.size() > 1) u.memory_bytes = std::stoull(statm[1]) * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    } catch (const std::exception&) {
    }
    u.cpu_ns = process_cpu_ns(process);
    return u;
  }

  void release() const noexcept override {}
  void freeze() const override {
    throw Error(ErrorKind::Unsupported,
                "box " + spec_.box_id + ": a VM's disk is frozen through QEMU, not its processes");
  }
  void thaw() const override {}
  bool clones_depend_on_source() const override { return true; }

 private:
  ShimSpec spec_;
};

}  // namespace

std::unique_ptr<Engine> make_vm_engine(const ShimSpec& spec) { return std::make_unique<VmEngine>(spec); }

}  // namespace boxlite::engine::vm
