#include "shim/shim.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <system_error>

#include "common/error.hpp"
#include "common/io.hpp"
#include "common/trace.hpp"
#include "engine/jail/jail.hpp"
#include "engine/vm/qemu.hpp"
#include "net/stats.hpp"
#include "protocol/main_log.hpp"
#include "shim/network.hpp"

namespace boxlite::shim {

using protocol::Frame;
using protocol::FrameType;

namespace {
constexpr uint64_t kGuestKey = 1, kListenKey = 2, kSignalKey = 3, kLifelineKey = 4, kConsoleKey = 5, kEngineLogKey = 6,
                   kNetLogKey = 7, kNetReadyKey = 8, kFirstFrameKey = 9, kGoKey = 10, kFirstClient = 16;
// What the guest's console (and QEMU's own messages) may keep on disk: twice this.
constexpr uint64_t kEngineLogBytes = 1u << 20;
constexpr int kMaxGuestErrorsLogged = 20;
// A client that lets this much pile up unread is dropped rather than buffered further.
constexpr size_t kClientOutLimit = 64u << 20;
constexpr double kStopTimeoutMs = 10000;
constexpr const char* kGuestClosed = "the guest closed its channel";

std::string tail_lines(const std::string& path, size_t lines, size_t max_bytes = 4096) {
  std::string text;
  try {
    text = read_file(path);
  } catch (const Error&) {
    return "";
  }
  if (text.size() > max_bytes) text = text.substr(text.size() - max_bytes);
  size_t pos = text.size();
  while (pos > 0 && lines > 0) {
    pos = text.rfind('\n', pos - 1);
    if (pos == std::string::npos) {
      pos = 0;
      break;
    }
    --lines;
  }
  return trim(text.substr(pos));
}

// fork+exec with PDEATHSIG: the engine must die with the shim, however the shim dies.
// The shim is single-threaded, so forking here is safe.
Child spawn_engine(const std::vector<std::string>& argv, int stdout_fd, int stderr_fd) {
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

int64_t wall_clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The box's SecurityOptions rlimits, for an agent that sets them itself (0 = none).
void set_resource_limits(proto::BoxConfig& cfg, const engine::ShimSpec& spec) {
  if (!spec.rlimit_nofile && !spec.rlimit_fsize && !spec.rlimit_nproc && !spec.rlimit_as && !spec.rlimit_cpu) return;
  proto::ResourceLimits* l = cfg.mutable_limits();
  l->set_nofile(spec.rlimit_nofile);
  l->set_fsize(spec.rlimit_fsize);
  l->set_nproc(spec.rlimit_nproc);
  l->set_as(spec.rlimit_as);
  l->set_cpu(spec.rlimit_cpu);
}
}  // namespace

struct Shim::Client {
  uint64_t id = 0;
  UniqueFd fd;
  protocol::FrameDecoder decoder;
  std::string out;
  bool hello = false;
  bool wants_out = false;
  std::map<uint32_t, uint32_t> streams;  // client stream -> guest stream
};

Shim::Shim(engine::ShimSpec spec, engine::jail::Zygote zygote) : spec_(std::move(spec)), zygote_(std::move(zygote)) {}

Shim::~Shim() {
  trace("shim: destructor");
  if (tap_closer_.joinable()) tap_closer_.join();
  if (engine_.valid()) engine_.kill_now();
  if (spec_.engine == EngineKind::Jail) engine::jail::remove_cgroups(spec_.box_id);
  trace("shim: cgroups retired");
  ::unlink(engine::shim_socket_path(spec_.box_dir).c_str());
  ::unlink(engine::agent_socket_path(spec_.box_dir).c_str());
  ::unlink(engine::net_socket_path(spec_.box_dir).c_str());
}

void Shim::drain_engine_logs() {
  console_log_.drain();
  engine_log_.drain();
  net_log_.drain();
}

void Shim::boot_failed(const std::string& stage, const std::string& why) {
  if (engine_.valid()) engine_.kill_now();
  drain_engine_logs();
  std::string msg = "box " + spec_.box_id + " failed to boot: " + stage + ": " + why;
  std::string qemu_tail = tail_lines(spec_.box_dir + "/qemu.log", 10);
  if (!qemu_tail.empty()) msg += "\n--- qemu ---\n" + qemu_tail;
  std::string console = tail_lines(engine::console_log_path(spec_.box_dir), 20);
  // A VM's console that stayed empty says something (the kernel never spoke); a
  // jail has no kernel of its own, and its box directory may be gone by the time
  // this is read (--rm).
  if (!console.empty() || spec_.engine == EngineKind::Vm) {
    msg += "\n--- console tail (" + engine::console_log_path(spec_.box_dir) + ") ---\n" +
           (console.empty() ? "(empty)" : console);
  }
  throw Error(ErrorKind::Engine, msg);
}

Frame Shim::read_guest_frame_blocking(double deadline_ms, const std::string& stage) {
  for (;;) {
    if (auto f = guest_decoder_.next()) return std::move(*f);
    if (auto st = engine_.try_wait()) boot_failed(stage, "QEMU exited (" + describe_status(*st) + ")");
    if (now_ms() > deadline_ms)
      boot_failed(stage, "timed out after " + std::to_string(static_cast<int>(spec_.boot_timeout_secs)) + " s");
    pollfd p[4] = {{guest_.get(), POLLIN, 0},
                   {console_log_.fd(), POLLIN, 0},
                   {engine_log_.fd(), POLLIN, 0},
                   {net_log_.fd(), POLLIN, 0}};
    int n = ::poll(p, 4, 50);
    drain_engine_logs();
    if (n <= 0 || !(p[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    char buf[65536];
    ssize_t r = ::read(guest_.get(), buf, sizeof buf);
    if (r == 0) boot_failed(stage, "the guest closed its channel");
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      boot_failed(stage, errno_text("read guest channel"));
    }
    guest_decoder_.feed(buf, static_cast<size_t>(r));
  }
}

void Shim::start_jail() {
  try {
    // The box's eth0 and boxlite-net need only its network namespace: made while
    // the kernel attaches its cgroups.
    engine::jail::Jail j = engine::jail::start(spec_, zygote_, [&](int box_netns) {
      if (!spec_.net.enabled) return;
      tap_ = make_jail_tap(box_netns);
      // A published port must be bound (or fail the start) before the box runs.
      // Otherwise nothing can reach the box before it sends a frame, which waits
      // in the TAP's queue until boxlite-net, started then, reads it: a box that
      // never uses its network never pays for boxlite-net (~3 ms of CPU to start,
      // ~6 MiB resident).
      if (!spec_.net.ports.empty()) {
        start_net_now();
      } else {
        ::unlink(net::stats_path(spec_.box_dir).c_str());  // no counters of an earlier run
      }
    });
    engine_ = std::move(j.init);
    guest_ = std::move(j.channel);
    warnings_ = std::move(j.warnings);
    etc_files_bound_ = j.etc_files_bound;
  } catch (const Error& e) {
    throw Error(e.kind(), "box " + spec_.box_id + " failed to start: " + e.what());
  }
}

void Shim::start_vm(double deadline) {
  if (spec_.net.enabled) {
    try {
      net_ = start_vm_network(spec_);
      net_log_ = CappedLog(std::move(net_.log), spec_.box_dir + "/net.log", kEngineLogBytes);
    } catch (const Error& e) {
      throw Error(e.kind(), "box " + spec_.box_id + " failed to start: " + e.what());
    }
  }
  agent_listen_ = unix_listen(engine::agent_socket_path(spec_.box_dir), 1);
  // Console and QEMU output go through the shim, which caps them: a hostile guest
  // can print forever without filling the host's disk.
  LogPipe console = make_log_pipe(), qemu_log = make_log_pipe();
  engine_ = spawn_engine(engine::vm::qemu_argv(spec_), console.write.get(), qemu_log.write.get());
  console_log_ = CappedLog(std::move(console.read), engine::console_log_path(spec_.box_dir), kEngineLogBytes);
  engine_log_ = CappedLog(std::move(qemu_log.read), spec_.box_dir + "/qemu.log", kEngineLogBytes);

  const std::string stage_connect = "start QEMU";
  for (;;) {
    pollfd p{agent_listen_.get(), POLLIN, 0};
    if (::poll(&p, 1, 50) > 0) break;
    if (auto st = engine_.try_wait()) boot_failed(stage_connect, "QEMU exited (" + describe_status(*st) + ")");
    if (now_ms() > deadline) boot_failed(stage_connect, "QEMU did not connect the agent channel");
  }
  guest_ = UniqueFd(::accept4(agent_listen_.get(), nullptr, nullptr, SOCK_CLOEXEC));
  if (!guest_) boot_failed(stage_connect, errno_text("accept agent channel"));
  agent_listen_.reset();
}

void Shim::wait_for_go() {
  if (!go_) return;
  char g = 0;
  ssize_t n;
  while ((n = ::read(go_.get(), &g, 1)) < 0 && errno == EINTR) {
  }
  if (n != 1 || g != 'g') {
    go_.reset();
    boot_failed("wait for the box's start", "its start was called off");
  }
  // Kept for the commit (ShimLaunch::commit), which serve() waits for.
}

// The starter's word that the box is recorded as running, or EOF: it died or failed
// before that, and nothing would reach this box (docs/storage.md, "A start nothing recorded").
void Shim::on_go_readable() {
  char c = 0;
  ssize_t n;
  while ((n = ::recv(go_.get(), &c, 1, MSG_DONTWAIT)) < 0 && errno == EINTR) {
  }
  if (n < 0 && errno == EAGAIN) return;  // the loop never blocks here
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, go_.get(), nullptr);
  go_.reset();
  if (n == 1 && c == 'c') return;
  begin_stop("its start was called off: the starting process exited before it recorded the box as running");
  stop_deadline_ms_ = now_ms() + 2000;
}

void Shim::send_hello_and_config() {
  wait_for_go();  // the configuration starts the main command
  proto::Hello ours;
  ours.set_version(protocol::kProtocolVersion);
  ours.set_peer("shim");
  send_guest(0, FrameType::Hello, ours.SerializeAsString());

  proto::BoxConfig cfg;
  // A jail's hostname is set before its capabilities are dropped; the agent could not.
  if (spec_.engine == EngineKind::Vm) cfg.set_hostname(spec_.hostname);
  cfg.set_root_disk_serial(engine::vm::kRootDiskSerial);
  for (const auto& e : spec_.env) cfg.add_env(e);
  cfg.set_working_dir(spec_.working_dir);
  cfg.set_user(spec_.user);
  cfg.set_clock_unix_ns(wall_clock_ns());
  if (spec_.engine == EngineKind::Jail) cfg.set_cpus(static_cast<uint32_t>(spec_.cpus));
  if (!spec_.main_argv.empty()) {
    proto::ExecRequest* m = cfg.mutable_main();
    for (const auto& a : spec_.main_argv) m->add_argv(a);
    m->set_tty(spec_.main_tty);
    m->set_stdin(spec_.main_stdin);
    m->set_rows(spec_.main_rows);
    m->set_cols(spec_.main_cols);
    main_.present = true;
    main_.out_credit = main_.err_credit = protocol::kInitialWindow;
  }
  if (spec_.net.enabled) {
    auto* n = cfg.mutable_network();
    // A jail's eth0 is configured by the shim: the box has no CAP_NET_ADMIN.
    n->set_configure_link(spec_.engine == EngineKind::Vm);
    n->set_interface(net::kGuestInterface);
    n->set_address(net::kGuestAddress);
    n->set_prefix_len(net::kPrefixLength);
    n->set_gateway(net::kGatewayAddress);
    n->set_dns(net::kGatewayAddress);
    n->set_host_alias(net::kHostAlias);
    n->set_host_alias_name(net::kHostAliasName);
    n->set_etc_files_bound(etc_files_bound_);
    if (!spec_.net.secrets.empty()) {
      try {
        n->set_trusted_ca_pem(read_file(spec_.net.ca_cert));
      } catch (const Error& e) {
        boot_failed("configure the box (phase 2)", std::string("read the secrets proxy CA: ") + e.what());
      }
    }
  }
  if (spec_.engine == EngineKind::Vm) {
    for (size_t i = 0; i < spec_.volumes.size(); ++i) {
      auto* v = cfg.add_volumes();
      v->set_tag(engine::volume_tag(i));
      v->set_guest_path(spec_.volumes[i].guest_path);
      v->set_read_only(spec_.volumes[i].read_only);
    }
    // A jail's init set them for the whole box already; a VM's agent sets them.
    set_resource_limits(cfg, spec_);
  }
  std::string entropy(32, '\0');
  if (::getrandom(entropy.data(), entropy.size(), 0) == static_cast<ssize_t>(entropy.size())) cfg.set_entropy(entropy);
  std::string payload = cfg.SerializeAsString();
  if (payload.size() > protocol::kMaxPayload) {
    size_t env = 0, argv = 0;
    for (const auto& e : cfg.env()) env += e.size();
    for (const auto& a : cfg.main().argv()) argv += a.size();
    boot_failed("configure the box (phase 2)",
                "the box's configuration is " + std::to_string(payload.size()) + " bytes, over the " +
                    std::to_string(protocol::kMaxPayload) + "-byte limit (its environment " + std::to_string(env) +
                    " bytes, its main command " + std::to_string(argv) +
                    " bytes): the image config's Env, Entrypoint and Cmd and the box's options together are too large");
  }
  send_guest(0, FrameType::Configure, payload);
  flush_guest();
}

void Shim::boot() {
  double t0 = now_ms();
  double deadline = t0 + spec_.boot_timeout_secs * 1000;
  if (spec_.engine == EngineKind::Vm) {
    zygote_.release();  // a VM box has no init of ours
    start_vm(deadline);
  } else {
    start_jail();
  }
  double t_engine = now_ms();
  trace("shim: engine started");
  stages_.box_spawn_ms = static_cast<int64_t>(t_engine - t0);

  // A jail's agent is this build's (the shim's own directory): it is sent our hello
  // and the box's configuration at once, without waiting for its hello first. A
  // VM's agent comes from a cached initramfs, whose version is checked first.
  bool pipelined = spec_.engine == EngineKind::Jail;
  if (pipelined) send_hello_and_config();
  Frame hello_frame = read_guest_frame_blocking(deadline, "boot kernel and start the guest agent");
  double t_hello = now_ms();
  trace("shim: hello");
  stages_.guest_boot_ms = static_cast<int64_t>(t_hello - t_engine);
  if (hello_frame.type != FrameType::Hello || hello_frame.stream != 0) {
    boot_failed("handshake", std::string("expected Hello, got ") + protocol::frame_type_name(hello_frame.type));
  }
  auto hello = protocol::parse_message<proto::Hello>(hello_frame);
  if (hello.version() != protocol::kProtocolVersion) {
    boot_failed("handshake", "guest agent speaks protocol version " + std::to_string(hello.version()) +
                                 ", this host speaks " + std::to_string(protocol::kProtocolVersion) +
                                 " (rebuild the initramfs: remove the cached one)");
  }
  if (!pipelined) send_hello_and_config();

  Frame reply = read_guest_frame_blocking(deadline, "configure the box (phase 2)");
  if (reply.stream == protocol::kMainStream && reply.type == FrameType::Started && main_.present) {
    main_.pid = protocol::parse_message<proto::ExecStarted>(reply).pid();
    reply = read_guest_frame_blocking(deadline, "configure the box (phase 2)");
  }
  if (reply.type == FrameType::Error) {
    Error err = protocol::error_from_frame(reply, "the guest");
    if (err.kind() == ErrorKind::Execution) {
      if (engine_.valid()) engine_.kill_now();
      throw with_context(err, "box " + spec_.box_id + ": cannot start its main command");
    }
    boot_failed("configure the box (phase 2)", err.what());
  }
  if (reply.type != FrameType::Configured) {
    boot_failed("configure the box (phase 2)", std::string("unexpected ") + protocol::frame_type_name(reply.type));
  }
  stages_.container_init_ms = static_cast<int64_t>(now_ms() - t_hello);
  trace("shim: configured");
  cpu_sampled_ms_ = t0;
  // boxlite-net came up alongside the boot; a port it could not publish fails the start.
  if (net_.ready) {
    try {
      wait_ready(net_, spec_, deadline);
      trace("shim: net ready");
    } catch (const Error& e) {
      if (engine_.valid()) engine_.kill_now();
      throw Error(e.kind(), "box " + spec_.box_id + " failed to start: " + e.what());
    }
  }
}

void Shim::start_net_now() {
  net_ = start_jail_netd(spec_, tap_.get());
  tap_.reset();  // boxlite-net holds it now
  net_log_ = CappedLog(std::move(net_.log), spec_.box_dir + "/net.log", kEngineLogBytes);
  trace("shim: net spawned");
}

// A box's first frame: boxlite-net starts; the box learns nothing of the wait.
// If it then fails, the box stops with its reason (on_net_ready_readable).
void Shim::on_first_frame() {
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, tap_.get(), nullptr);
  if (stopping_) {  // a box on its way down needs no network any more
    tap_.reset();
    return;
  }
  try {
    start_net_now();
  } catch (const Error& e) {
    tap_.reset();
    begin_stop(std::string("the box's network failed: ") + e.what());
    return;
  }
  add_to_epoll(net_log_.fd(), kNetLogKey);
  add_to_epoll(net_.ready.get(), kNetReadyKey);
}

void Shim::on_net_ready_readable() {
  char buf[512];
  ssize_t n = ::read(net_.ready.get(), buf, sizeof buf);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n > 0) net_said_.append(buf, static_cast<size_t>(n));
  if (net_said_ == "ok\n") {
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, net_.ready.get(), nullptr);
    net_.ready.reset();
    trace("shim: net ready");
    return;
  }
  if (n > 0 && net_said_.size() < 4096) return;  // more of the reason may follow
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, net_.ready.get(), nullptr);
  net_.ready.reset();
  std::string why = trim(net_said_);
  if (why.empty()) why = "boxlite-net exited without a reason (see " + spec_.box_dir + "/net.log)";
  begin_stop("the box's network failed: " + why);
}

void Shim::send_guest(uint32_t stream, FrameType type, std::string_view payload) {
  protocol::append_frame(guest_out_, stream, type, payload);
}

void Shim::flush_guest() {
  while (!guest_out_.empty()) {
    ssize_t n = ::write(guest_.get(), guest_out_.data(), guest_out_.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) return;
      begin_stop(errno_text("write guest channel"));
      guest_out_.clear();
      return;
    }
    guest_out_.erase(0, static_cast<size_t>(n));
  }
}

void Shim::send_client(Client& c, uint32_t stream, FrameType type, std::string_view payload) {
  protocol::append_frame(c.out, stream, type, payload);
}

void Shim::flush_client(Client& c) {
  while (!c.out.empty()) {
    ssize_t n = ::send(c.fd.get(), c.out.data(), c.out.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) break;
      c.out.clear();
      return;
    }
    c.out.erase(0, static_cast<size_t>(n));
  }
}

void Shim::update_interest() {
  epoll_event ev{};
  ev.events = EPOLLIN | (guest_out_.empty() ? 0u : uint32_t{EPOLLOUT});
  ev.data.u64 = kGuestKey;
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, guest_.get(), &ev);
  for (auto& [id, c] : clients_) {
    bool want = !c->out.empty();
    if (want == c->wants_out) continue;
    c->wants_out = want;
    epoll_event cev{};
    cev.events = EPOLLIN | (want ? uint32_t{EPOLLOUT} : 0u);
    cev.data.u64 = id;
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, c->fd.get(), &cev);
  }
}

void Shim::begin_stop(const std::string& why) {
  if (stopping_) return;
  stopping_ = true;
  trace("shim: begin stop");
  stop_reason_ = why;
  stop_deadline_ms_ = now_ms() + kStopTimeoutMs;
  if (guest_) {
    proto::Shutdown s;
    send_guest(0, FrameType::Shutdown, s.SerializeAsString());
    flush_guest();
  }
  // The box needs no network to shut down: end boxlite-net alongside the guest's
  // shutdown; the process is reaped when the shim ends.
  if (net_.child.valid()) ::kill(net_.child.pid(), SIGKILL);
  // The TAP we watched for the box's first frame: closing it waits for an RCU grace
  // period (the kernel detaches its queue), so on a thread while the box goes down,
  // not at our exit, which the box's removal waits for. The device stays (persistent)
  // and goes with the box's network namespace.
  if (tap_) {
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, tap_.get(), nullptr);
    try {
      tap_closer_ = std::thread([fd = std::move(tap_)]() mutable { fd.reset(); });
    } catch (const std::system_error&) {
      // No thread to be had: the lambda's copy closed it here.
    }
  }
}

void Shim::stop_engine() {
  engine_killed_by_us_ = true;
  if (engine_.valid()) engine_.kill_now();
}

void Shim::drop_client(uint64_t id) {
  auto it = clients_.find(id);
  if (it == clients_.end()) return;
  for (auto [cs, gs] : it->second->streams) {
    if (gs == protocol::kMainStream) {
      // A follower left: the main command carries on without it.
      std::erase(main_.followers, std::make_pair(id, cs));
      if (main_.stdin_client == id) main_.stdin_client = 0;
      continue;
    }
    auto r = routes_.find(gs);
    if (r == routes_.end()) continue;
    r->second.client = 0;
    if (r->second.detached) {
      // It runs on unread: give back the credit its unread output took.
      for (auto [ch, credit] :
           {std::pair{proto::STDOUT, &r->second.out_credit}, std::pair{proto::STDERR, &r->second.err_credit}}) {
        proto::Credit c;
        c.set_channel(ch);
        c.set_bytes(
            static_cast<uint32_t>(protocol::kInitialWindow - std::min<uint64_t>(*credit, protocol::kInitialWindow)));
        *credit += c.bytes();
        if (c.bytes() > 0) send_guest(gs, FrameType::Credit, c.SerializeAsString());
      }
      continue;
    }
    // The exec's owner is gone: nobody can read its output, so end it.
    proto::Signal sig;
    sig.set_signo(SIGKILL);
    send_guest(gs, FrameType::Signal, sig.SerializeAsString());
  }
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, it->second->fd.get(), nullptr);
  clients_.erase(it);
}

void Shim::on_guest_readable() {
  char buf[65536];
  ssize_t n = ::read(guest_.get(), buf, sizeof buf);
  if (n < 0) {
    if (errno == EINTR || errno == EAGAIN) return;
    begin_stop(errno_text("read guest channel"));
    return;
  }
  if (n == 0) {
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, guest_.get(), nullptr);
    guest_.reset();
    begin_stop(kGuestClosed);
    return;
  }
  guest_decoder_.feed(buf, static_cast<size_t>(n));
  try {
    while (auto f = guest_decoder_.next()) on_guest_frame(*f);
  } catch (const Error& e) {
    // A hostile or broken guest: stop listening to it and stop the box.
    std::fprintf(stderr, "boxlite-shim: %s\n", e.what());
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, guest_.get(), nullptr);
    guest_.reset();
    stopping_ = true;
    stop_reason_ = std::string("guest protocol violation: ") + e.what();
    stop_engine();
  }
}

void Shim::on_guest_frame(Frame& f) {
  if (f.stream == 0) {
    // What the guest says goes to shim.log only a few times: it may say it forever.
    if (f.type == FrameType::Error && ++guest_errors_logged_ <= kMaxGuestErrorsLogged) {
      Error e = protocol::error_from_frame(f, "the guest");
      std::fprintf(stderr, "boxlite-shim: guest error: %.512s%s\n", e.what(),
                   guest_errors_logged_ == kMaxGuestErrorsLogged ? " (further guest errors are not logged)" : "");
    }
    return;  // Pong and anything else on the control stream
  }
  if (f.stream == protocol::kMainStream && main_.present) return on_main_frame(f);
  auto r = routes_.find(f.stream);
  if (r == routes_.end())
    throw Error(ErrorKind::Rpc, "guest sent " + std::string(protocol::frame_type_name(f.type)) + " on unknown stream " +
                                    std::to_string(f.stream));
  Route& route = r->second;
  if (f.type == FrameType::Stdout || f.type == FrameType::Stderr) {
    uint64_t& credit = f.type == FrameType::Stdout ? route.out_credit : route.err_credit;
    if (f.payload.size() > credit)
      throw Error(ErrorKind::Rpc, "guest sent output beyond its credit on stream " + std::to_string(f.stream));
    credit -= f.payload.size();
  }
  bool closes = f.type == FrameType::Exit || f.type == FrameType::Error;
  if (f.type == FrameType::Started) ++commands_executed_;
  if (f.type == FrameType::Error) ++exec_errors_;
  if (route.client == 0 && route.detached && (f.type == FrameType::Stdout || f.type == FrameType::Stderr)) {
    proto::Credit back;  // discarded: the process may go on writing
    back.set_channel(f.type == FrameType::Stdout ? proto::STDOUT : proto::STDERR);
    back.set_bytes(static_cast<uint32_t>(f.payload.size()));
    (f.type == FrameType::Stdout ? route.out_credit : route.err_credit) += f.payload.size();
    send_guest(f.stream, FrameType::Credit, back.SerializeAsString());
  }
  if (route.client != 0) {
    auto c = clients_.find(route.client);
    if (c != clients_.end()) {
      send_client(*c->second, route.client_stream, f.type, f.payload);
      if (closes) c->second->streams.erase(route.client_stream);
    }
  }
  if (closes) routes_.erase(r);
}

void Shim::on_client_readable(Client& c) {
  char buf[65536];
  ssize_t n = ::recv(c.fd.get(), buf, sizeof buf, 0);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    drop_client(c.id);
    return;
  }
  c.decoder.feed(buf, static_cast<size_t>(n));
  uint64_t id = c.id;
  try {
    while (clients_.count(id)) {
      auto f = c.decoder.next();
      if (!f) break;
      on_client_frame(c, *f);
    }
  } catch (const Error& e) {
    send_client(c, 0, FrameType::Error, protocol::error_payload(e));
    flush_client(c);
    drop_client(id);
  }
}

void Shim::on_client_frame(Client& c, Frame& f) {
  if (!c.hello) {
    if (f.type != FrameType::Hello) throw Error(ErrorKind::Rpc, "expected Hello first");
    auto h = protocol::parse_message<proto::Hello>(f);
    if (h.version() != protocol::kProtocolVersion) {
      throw Error(ErrorKind::Rpc, "protocol version mismatch: client speaks " + std::to_string(h.version()) +
                                      ", shim speaks " + std::to_string(protocol::kProtocolVersion));
    }
    c.hello = true;
    proto::Hello ours;
    ours.set_version(protocol::kProtocolVersion);
    ours.set_peer("shim");
    send_client(c, 0, FrameType::Hello, ours.SerializeAsString());
    return;
  }
  if (f.stream == 0) {
    switch (f.type) {
      case FrameType::Ping: send_client(c, 0, FrameType::Pong, {}); return;
      case FrameType::Shutdown: begin_stop("stop requested"); return;
      case FrameType::Metrics: send_client(c, 0, FrameType::Metrics, stats().SerializeAsString()); return;
      default:
        throw Error(ErrorKind::Rpc, std::string("unexpected ") + protocol::frame_type_name(f.type) + " on stream 0");
    }
  }
  if (f.type == FrameType::Attach) return attach_main(c, f);
  if (f.type == FrameType::Exec) {
    if (c.streams.count(f.stream))
      throw Error(ErrorKind::Rpc, "stream " + std::to_string(f.stream) + " already in use");
    if (main_.exit) {
      send_client(c, f.stream, FrameType::Error,
                  protocol::error_payload(Error(
                      ErrorKind::InvalidState,
                      "Cannot exec box " + spec_.box_id + ": it is stopped, and its main command has already exited")));
      return;
    }
    if (stopping_ || !guest_) {
      send_client(c, f.stream, FrameType::Error,
                  protocol::error_payload(Error(ErrorKind::Stopped, "box " + spec_.box_id + " is stopping")));
      ++exec_errors_;
      return;
    }
    uint32_t gs = next_stream_++;
    if (next_stream_ == 0) next_stream_ = protocol::kMainStream + 1;
    auto req = protocol::parse_message<proto::ExecRequest>(f);
    routes_[gs] = Route{c.id, f.stream, protocol::kInitialWindow, protocol::kInitialWindow, req.detach()};
    c.streams[f.stream] = gs;
    send_guest(gs, FrameType::Exec, f.payload);
    return;
  }
  auto s = c.streams.find(f.stream);
  if (s == c.streams.end()) return;  // the exec already ended
  if (s->second == protocol::kMainStream) return on_main_client_frame(c, f);
  if (f.type == FrameType::Credit) {
    auto credit = protocol::parse_message<proto::Credit>(f);
    Route& r = routes_[s->second];
    if (credit.channel() == proto::STDOUT) r.out_credit += credit.bytes();
    if (credit.channel() == proto::STDERR) r.err_credit += credit.bytes();
  }
  switch (f.type) {
    case FrameType::Stdin:
    case FrameType::StdinEof:
    case FrameType::Credit:
    case FrameType::Signal:
    case FrameType::Resize: send_guest(s->second, f.type, f.payload); return;
    default:
      throw Error(ErrorKind::Rpc, std::string("unexpected ") + protocol::frame_type_name(f.type) + " from client");
  }
}

std::pair<uint64_t, uint64_t> Shim::engine_usage() {
  if (spec_.engine == EngineKind::Jail) {
    if (auto u = engine::jail::usage(spec_.box_id)) return {u->cpu_ns, u->memory_bytes};
    return {engine::jail::process_cpu_ns(engine_.pid()), 0};
  }
  uint64_t rss = 0;
  try {
    auto statm = split(read_file("/proc/" + std::to_string(engine_.pid()) + "/statm"), ' ');
    if (statm.size() > 1) rss = std::stoull(statm[1]) * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  } catch (const std::exception&) {
  }
  return {engine::jail::process_cpu_ns(engine_.pid()), rss};
}

proto::BoxStats Shim::stats() {
  proto::BoxStats s;
  s.set_commands_executed(commands_executed_);
  s.set_exec_errors(exec_errors_);
  auto [cpu_ns, mem] = engine_usage();
  double now = now_ms();
  if (now > cpu_sampled_ms_ && cpu_ns >= cpu_sampled_ns_) {
    s.set_cpu_percent(static_cast<double>(cpu_ns - cpu_sampled_ns_) / 1e6 / (now - cpu_sampled_ms_) * 100.0);
  }
  cpu_sampled_ms_ = now;
  cpu_sampled_ns_ = cpu_ns;
  s.set_memory_bytes(mem);
  return s;
}

// Appends to what earlier runs of the box logged.
bool Shim::open_main_log() {
  std::string path = protocol::main_log_path(spec_.box_dir);
  main_.log = UniqueFd(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
  if (!main_.log) {
    // Logged once; the box and its followers go on without its log.
    std::fprintf(stderr, "boxlite-shim: %s\n", errno_text("open " + path).c_str());
    main_.log_failed = true;
    return false;
  }
  struct stat st {};
  if (::fstat(main_.log.get(), &st) == 0) main_.log_bytes = static_cast<uint64_t>(st.st_size);
  return true;
}

void Shim::log_main_output(const Frame& f) {
  if (!main_.log && (main_.log_failed || !open_main_log())) return;
  if (main_.log_bytes > protocol::kMainLogRotateBytes) {
    std::string path = protocol::main_log_path(spec_.box_dir);
    if (::rename(path.c_str(), protocol::main_log_old_path(spec_.box_dir).c_str()) == 0) {
      main_.log = UniqueFd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600));
      main_.log_bytes = 0;
      if (!main_.log) return;
    }
  }
  std::string rec = protocol::encode_frame(0, f.type, f.payload);
  try {
    write_all(main_.log.get(), rec.data(), rec.size());
    main_.log_bytes += rec.size();
  } catch (const Error& e) {
    // A full disk loses log lines, never the box.
    std::fprintf(stderr, "boxlite-shim: main.log: %s\n", e.what());
  }
}

// The main command's output goes to its log (which never blocks it: credit comes
// straight back) and to whoever follows it; its exit stops the box.
void Shim::on_main_frame(Frame& f) {
  switch (f.type) {
    case FrameType::Started: main_.pid = protocol::parse_message<proto::ExecStarted>(f).pid(); return;
    case FrameType::Stdout:
    case FrameType::Stderr: {
      uint64_t& credit = f.type == FrameType::Stdout ? main_.out_credit : main_.err_credit;
      if (f.payload.size() > credit) throw Error(ErrorKind::Rpc, "guest sent main command output beyond its credit");
      log_main_output(f);
      proto::Credit back;
      back.set_channel(f.type == FrameType::Stdout ? proto::STDOUT : proto::STDERR);
      back.set_bytes(static_cast<uint32_t>(f.payload.size()));
      send_guest(protocol::kMainStream, FrameType::Credit, back.SerializeAsString());
      for (auto [cid, cs] : main_.followers) {
        if (auto c = clients_.find(cid); c != clients_.end()) send_client(*c->second, cs, f.type, f.payload);
      }
      return;
    }
    case FrameType::Credit:  // stdin credit: the stdin writer may send more
      if (auto c = clients_.find(main_.stdin_client); c != clients_.end()) {
        send_client(*c->second, main_.stdin_stream, f.type, f.payload);
      }
      return;
    case FrameType::Exit:
    case FrameType::Error: {
      proto::ExecExit ex;
      if (f.type == FrameType::Exit) {
        ex = protocol::parse_message<proto::ExecExit>(f);
      } else {
        ex.set_exit_code(-1);
      }
      if (main_.exit) return;
      main_.exit = ex;
      for (auto [cid, cs] : main_.followers) {
        auto c = clients_.find(cid);
        if (c == clients_.end()) continue;
        send_client(*c->second, cs, f.type, f.payload);
        c->second->streams.erase(cs);
      }
      main_.followers.clear();
      main_.stdin_client = 0;
      begin_stop("main command exited with code " + std::to_string(ex.exit_code()));
      return;
    }
    default:
      throw Error(ErrorKind::Rpc,
                  std::string("unexpected ") + protocol::frame_type_name(f.type) + " on the main command's stream");
  }
}

void Shim::attach_main(Client& c, Frame& f) {
  auto fail = [&](ErrorKind kind, const std::string& msg) {
    send_client(c, f.stream, FrameType::Error, protocol::error_payload(Error(kind, msg)));
  };
  if (c.streams.count(f.stream)) throw Error(ErrorKind::Rpc, "stream " + std::to_string(f.stream) + " already in use");
  auto req = protocol::parse_message<proto::AttachRequest>(f);
  if (!main_.present) return fail(ErrorKind::NotFound, "box " + spec_.box_id + " has no main command to attach to");
  if (req.stdin() && main_.stdin_client != 0) {
    return fail(ErrorKind::InvalidState,
                "box " + spec_.box_id + ": another client already writes the main command's stdin");
  }
  std::vector<Frame> history = protocol::read_main_log(spec_.box_dir);
  uint64_t history_bytes = 0;
  for (const auto& h : history) history_bytes += h.payload.size();
  proto::ExecStarted started;
  started.set_pid(main_.pid);
  started.set_history_bytes(history_bytes);
  send_client(c, f.stream, FrameType::Started, started.SerializeAsString());
  for (const auto& h : history) send_client(c, f.stream, h.type, h.payload);
  if (main_.exit) {
    send_client(c, f.stream, FrameType::Exit, main_.exit->SerializeAsString());
    return;
  }
  c.streams[f.stream] = protocol::kMainStream;
  main_.followers.emplace_back(c.id, f.stream);
  if (req.stdin()) {
    main_.stdin_client = c.id;
    main_.stdin_stream = f.stream;
  }
}

void Shim::on_main_client_frame(Client& c, Frame& f) {
  switch (f.type) {
    case FrameType::Stdin:
    case FrameType::StdinEof:
      if (main_.stdin_client != c.id || main_.stdin_stream != f.stream) return;  // a follower without stdin
      send_guest(protocol::kMainStream, f.type, f.payload);
      return;
    case FrameType::Credit: return;  // the shim itself grants the main command's output credit
    case FrameType::Signal:
    case FrameType::Resize: send_guest(protocol::kMainStream, f.type, f.payload); return;
    default:
      throw Error(ErrorKind::Rpc, std::string("unexpected ") + protocol::frame_type_name(f.type) + " from client");
  }
}

// <box_dir>/exit.json tells any runtime process why the box stopped. A shim
// killed outright cannot write it; the runtime then reports that instead.
void Shim::record_exit() {
  try {
    engine::ExitRecord r{stop_reason_, wall_clock_ns() / 1000000, std::nullopt};
    if (main_.exit) r.main_exit_code = main_.exit->exit_code();
    engine::write_exit_record(spec_.box_dir, r, /*durable=*/!spec_.ephemeral);
  } catch (const Error& e) {
    std::fprintf(stderr, "boxlite-shim: %s\n", e.what());
  }
}

void Shim::listen() {
  std::string sock = engine::shim_socket_path(spec_.box_dir);
  listen_ = unix_listen(sock);
  ::chmod(sock.c_str(), 0600);
  set_nonblocking(listen_.get());
}

void Shim::add_to_epoll(int fd, uint64_t key) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = key;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) throw_errno(ErrorKind::Internal, "epoll_ctl");
}

void Shim::serve(int lifeline_fd) {
  epoll_ = UniqueFd(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_) throw_errno(ErrorKind::Internal, "epoll_create1");
  if (!listen_) listen();
  set_nonblocking(guest_.get());
  sigset_t mask;
  sigemptyset(&mask);
  for (int s : {SIGCHLD, SIGTERM, SIGINT, SIGHUP}) sigaddset(&mask, s);
  ::sigprocmask(SIG_BLOCK, &mask, nullptr);
  sigfd_ = UniqueFd(::signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC));
  auto add = [&](int fd, uint64_t key) { add_to_epoll(fd, key); };
  add(guest_.get(), kGuestKey);
  add(listen_.get(), kListenKey);
  // Frames that arrived with the boot handshake (the main command's first output).
  try {
    while (auto f = guest_decoder_.next()) on_guest_frame(*f);
  } catch (const Error& e) {
    stopping_ = true;
    stop_reason_ = std::string("guest protocol violation: ") + e.what();
    stop_engine();
  }
  add(sigfd_.get(), kSignalKey);
  if (console_log_.open()) add(console_log_.fd(), kConsoleKey);
  if (engine_log_.open()) add(engine_log_.fd(), kEngineLogKey);
  if (net_log_.open()) add(net_log_.fd(), kNetLogKey);
  if (lifeline_fd >= 0) add(lifeline_fd, kLifelineKey);
  if (go_) add(go_.get(), kGoKey);
  if (net_.ready) add(net_.ready.get(), kNetReadyKey);
  if (tap_) add(tap_.get(), kFirstFrameKey);

  while (engine_.valid()) {
    flush_guest();
    for (auto& [id, c] : clients_) flush_client(*c);
    for (auto it = clients_.begin(); it != clients_.end();) {
      auto next = std::next(it);
      if (it->second->out.size() > kClientOutLimit) drop_client(it->first);
      it = next;
    }
    if (guest_) update_interest();
    int timeout = stopping_ ? 100 : -1;
    epoll_event events[64];
    int n = ::epoll_wait(epoll_.get(), events, 64, timeout);
    if (n < 0 && errno != EINTR) throw_errno(ErrorKind::Internal, "epoll_wait");
    for (int i = 0; i < n; ++i) {
      uint64_t k = events[i].data.u64;
      if (k == kGuestKey) {
        if (!guest_) continue;
        if (events[i].events & EPOLLOUT) flush_guest();
        if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) on_guest_readable();
      } else if (k == kListenKey) {
        UniqueFd fd(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
        if (!fd) continue;
        auto c = std::make_unique<Client>();
        c->id = kFirstClient + next_client_++;
        c->fd = std::move(fd);
        add(c->fd.get(), c->id);
        clients_[c->id] = std::move(c);
      } else if (k == kSignalKey) {
        signalfd_siginfo si;
        while (::read(sigfd_.get(), &si, sizeof si) == sizeof si) {
          if (si.ssi_signo != SIGCHLD)
            begin_stop(std::string("shim received ") + strsignal(static_cast<int>(si.ssi_signo)));
        }
        if (auto st = engine_.try_wait()) {
          engine_status_ = st;
          break;
        }
      } else if (k == kConsoleKey || k == kEngineLogKey || k == kNetLogKey) {
        CappedLog& log = k == kConsoleKey ? console_log_ : k == kEngineLogKey ? engine_log_ : net_log_;
        int fd = log.fd();
        log.drain();
        if (!log.open()) ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
      } else if (k == kNetReadyKey) {
        on_net_ready_readable();
      } else if (k == kFirstFrameKey) {
        if (tap_) on_first_frame();
      } else if (k == kGoKey) {
        if (go_) on_go_readable();
      } else if (k == kLifelineKey) {
        // The process that owns this (non-detached) box died or let go of it.
        ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, lifeline_fd, nullptr);
        begin_stop("the owning process exited");
        stop_deadline_ms_ = now_ms() + 2000;
      } else {
        auto it = clients_.find(k);
        if (it == clients_.end()) continue;
        if (events[i].events & EPOLLOUT) flush_client(*it->second);
        if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) on_client_readable(*it->second);
      }
    }
    if (!engine_.valid()) break;
    if (auto st = engine_.try_wait()) {
      engine_status_ = st;
      break;
    }
    if (stopping_ && now_ms() > stop_deadline_ms_) stop_engine();
  }
  // A guest that hangs up because its engine was killed under it: say so.
  bool engine_killed = engine_status_ && WIFSIGNALED(*engine_status_) && !engine_killed_by_us_;
  if (stop_reason_.empty() || (engine_killed && stop_reason_ == kGuestClosed)) {
    std::string what = spec_.engine == EngineKind::Vm ? "the VM (QEMU)" : "the box's init";
    stop_reason_ = engine_status_ ? what + " exited unexpectedly (" + describe_status(*engine_status_) + ")"
                                  : what + " exited unexpectedly";
  }
  drain_engine_logs();
  trace("shim: engine gone, exit recorded");
  record_exit();
  // The box is down: tell every client, then go.
  std::string err = protocol::error_payload(Error(
      ErrorKind::Stopped, "box " + spec_.box_id + " stopped" + (stop_reason_.empty() ? "" : ": " + stop_reason_)));
  for (auto& [id, c] : clients_) {
    for (auto [cs, gs] : c->streams) send_client(*c, cs, FrameType::Error, err);
    send_client(*c, 0, FrameType::Error, err);
    set_nonblocking(c->fd.get(), false);
    flush_client(*c);
  }
  clients_.clear();
  trace("shim: clients told");
}

}  // namespace boxlite::shim
