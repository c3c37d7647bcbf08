#include "guest/agent.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <vector>

#include "common/error.hpp"
#include "common/io.hpp"
#include "guest/spawn.hpp"

namespace boxlite::guest {

using protocol::FrameType;
using protocol::kInitialWindow;
using protocol::kMaxChunk;

namespace {
// Past this much unsent data toward the host, stop reading process output: the
// channel itself is the bottleneck and must not grow a buffer without bound.
constexpr size_t kChannelHighWater = 4u << 20;
// Reads of one output pipe per wake-up while it stays full: each saves a trip
// through epoll_wait; the bound keeps one exec from starving the others.
constexpr int kReadsPerWake = 4;
// A pipe read dry twice within kStreamingGapMs belongs to a process that streams
// output: its next read waits kBatchDelayMs, so that one frame carries what it
// wrote meanwhile instead of a frame (and a trip through the shim and the client)
// per write. The first output after a quiet spell goes at once.
constexpr double kStreamingGapMs = 1.0;
constexpr double kBatchDelayMs = 0.1;
constexpr uint32_t kCreditBatch = 32u << 10;
constexpr uint32_t kMaxCredit = 64u << 20;
constexpr int kTermGraceSecs = 2;

uint64_t key(uint32_t src, uint32_t stream) { return (uint64_t{src} << 32) | stream; }

// Every process of the box (the main command, execs, copies) lives in one PID
// namespace below the agent's, so the main command is PID 1 there, as in a
// container. In a jail the host made it already (the agent has no CAP_SYS_ADMIN).
void ensure_box_pid_namespace() {
  struct stat self = {};
  struct stat children = {};
  // A namespace made by unshare() has no link until its first process exists.
  if (::stat("/proc/self/ns/pid_for_children", &children) != 0 && errno == ENOENT) return;
  if (::stat("/proc/self/ns/pid", &self) == 0 && self.st_ino != children.st_ino) return;
  if (::unshare(CLONE_NEWPID) != 0) throw_errno(ErrorKind::Engine, "unshare(CLONE_NEWPID) for the box's processes");
}

}  // namespace

struct Exec {
  uint32_t stream = 0;
  pid_t pid = -1;         // the agent's view (waitpid, kill)
  pid_t pid_in_box = -1;  // the box's view, reported to the host
  bool tty = false;
  UniqueFd in, out, err, timer;
  uint32_t out_credit = kInitialWindow;
  uint32_t err_credit = kInitialWindow;
  uint32_t out_events = 0, err_events = 0, in_events = 0;
  // When each output pipe last read dry, and until when its next read waits (0: not waiting).
  double out_dry_at = -1e9, err_dry_at = -1e9;
  double out_resume_at = 0, err_resume_at = 0;
  bool out_deepened = false, err_deepened = false;  // deepen_pipe tried
  std::string stdin_buf;
  bool stdin_eof = false;
  bool stdin_gone = false;  // the process closed its stdin; further input is dropped
  uint32_t stdin_unacked = 0;
  bool reaped = false;
  int status = 0;
  bool timed_out = false;
  int kill_stage = 0;
  bool main = false;  // the box's main command
};

Agent::Agent(UniqueFd channel, std::function<void(const proto::BoxConfig&)> configure, std::function<void()> power_off)
    : channel_(std::move(channel)), configure_(std::move(configure)), power_off_(std::move(power_off)) {
  epoll_ = UniqueFd(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_) throw_errno(ErrorKind::Internal, "epoll_create1");
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  if (::sigprocmask(SIG_BLOCK, &mask, nullptr) != 0) throw_errno(ErrorKind::Internal, "sigprocmask");
  sigfd_ = UniqueFd(::signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC));
  if (!sigfd_) throw_errno(ErrorKind::Internal, "signalfd");
  ::signal(SIGPIPE, SIG_IGN);
  set_nonblocking(channel_.get());
  watch(channel_.get(), kChannel, 0, EPOLLIN);
  watch(sigfd_.get(), kSignal, 0, EPOLLIN);
}

Agent::~Agent() = default;

void Agent::watch(int fd, Source src, uint32_t stream, uint32_t events) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = key(src, stream);
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) throw_errno(ErrorKind::Internal, "epoll_ctl add");
}

void Agent::rewatch(int fd, Source src, uint32_t stream, uint32_t events) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = key(src, stream);
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, fd, &ev) != 0) throw_errno(ErrorKind::Internal, "epoll_ctl mod");
}

void Agent::unwatch(int fd) { ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr); }

void Agent::run() {
  proto::Hello hello;
  hello.set_version(protocol::kProtocolVersion);
  hello.set_peer("guest");
  hello.set_agent_version(BOXLITE_VERSION);
  send_msg(0, FrameType::Hello, hello);

  epoll_event events[64];
  while (running_) {
    int n = wait_events(events, 64);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno(ErrorKind::Internal, "epoll_wait");
    }
    resume_batched_output();
    for (int i = 0; i < n && running_; ++i) {
      auto src = static_cast<Source>(events[i].data.u64 >> 32);
      auto stream = static_cast<uint32_t>(events[i].data.u64);
      if (src == kChannel) {
        if (events[i].events & EPOLLOUT) on_channel_writable();
        if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) on_channel_readable();
        continue;
      }
      if (src == kSignal) {
        on_sigchld();
        continue;
      }
      auto it = execs_.find(stream);
      if (it == execs_.end()) continue;  // finished earlier in this batch
      Exec& e = *it->second;
      switch (src) {
        case kStdout:
        case kStderr: on_output(e, src); break;
        case kStdin: on_stdin_writable(e); break;
        case kTimer: on_timer(e); break;
        default: break;
      }
    }
  }
}

// Waits for events, or until the first output pipe whose read waits is due.
int Agent::wait_events(::epoll_event* events, int max) {
  std::optional<double> due;
  if (waiting_reads_ > 0) {
    for (auto& [id, e] : execs_) {
      for (double at : {e->out_resume_at, e->err_resume_at}) {
        if (at > 0) due = std::min(due.value_or(at), at);
      }
    }
    if (!due) waiting_reads_ = 0;  // none waits after all
  }
  if (!due) return ::epoll_wait(epoll_.get(), events, max, -1);
  double left_ms = std::clamp(*due - now_ms(), 0.0, kBatchDelayMs);
  timespec ts{0, static_cast<long>(left_ms * 1e6)};
  int n = ::epoll_pwait2(epoll_.get(), events, max, &ts, nullptr);
  if (n < 0 && errno == ENOSYS) {  // before Linux 5.11: millisecond timeouts
    n = ::epoll_wait(epoll_.get(), events, max, static_cast<int>(std::ceil(left_ms)));
  }
  return n;
}

// Reads the output pipes whose wait is over.
void Agent::resume_batched_output() {
  if (waiting_reads_ == 0) return;
  double now = now_ms();
  std::vector<std::pair<uint32_t, Source>> due;
  for (auto& [id, e] : execs_) {
    if (e->out_resume_at > 0 && e->out_resume_at <= now) due.emplace_back(id, kStdout);
    if (e->err_resume_at > 0 && e->err_resume_at <= now) due.emplace_back(id, kStderr);
  }
  for (auto [id, src] : due) {
    auto it = execs_.find(id);
    if (it == execs_.end()) continue;
    Exec& e = *it->second;
    (src == kStdout ? e.out_resume_at : e.err_resume_at) = 0;
    --waiting_reads_;
    on_output(e, src);
  }
}

void Agent::send(uint32_t stream, FrameType type, std::string_view payload) {
  bool was_high = queued() > kChannelHighWater;
  protocol::append_frame(outbuf_, stream, type, payload);
  on_channel_writable();
  if (!was_high && queued() > kChannelHighWater) {
    for (auto& [id, e] : execs_) update_output_interest(*e);
  }
}

// Output goes straight from the read buffer to the channel when nothing is queued
// before it (the usual case): one writev, no copy into the queue. What the channel
// does not take is queued, in order.
void Agent::send_output(uint32_t stream, FrameType type, std::string_view payload) {
  if (queued() > 0) return send(stream, type, payload);
  char header[protocol::kHeaderSize];
  protocol::put_header(header, stream, type, payload.size());
  iovec iov[2] = {{header, sizeof header}, {const_cast<char*>(payload.data()), payload.size()}};
  ssize_t n;
  while ((n = ::writev(channel_.get(), iov, 2)) < 0 && errno == EINTR) {
  }
  if (n < 0) {
    if (errno != EAGAIN) {
      running_ = false;  // host gone
      return;
    }
    n = 0;
  }
  auto done = static_cast<size_t>(n);
  if (done == sizeof header + payload.size()) return;
  if (done < sizeof header) outbuf_.append(header + done, sizeof header - done);
  outbuf_.append(payload.substr(done > sizeof header ? done - sizeof header : 0));
  update_channel_interest();
  if (queued() > kChannelHighWater) {
    for (auto& [id, e] : execs_) update_output_interest(*e);
  }
}

void Agent::send_error(uint32_t stream, const Error& e) { send(stream, FrameType::Error, protocol::error_payload(e)); }

void Agent::on_channel_writable() {
  bool was_high = queued() > kChannelHighWater;
  while (queued() > 0) {
    ssize_t n = ::write(channel_.get(), outbuf_.data() + outbuf_sent_, queued());
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) break;
      running_ = false;  // host gone
      return;
    }
    outbuf_sent_ += static_cast<size_t>(n);
  }
  // What was sent leaves the queue once it is half of it: no move of the rest per write.
  if (outbuf_sent_ == outbuf_.size()) {
    outbuf_.clear();
    outbuf_sent_ = 0;
  } else if (outbuf_sent_ * 2 >= outbuf_.size()) {
    outbuf_.erase(0, outbuf_sent_);
    outbuf_sent_ = 0;
  }
  update_channel_interest();
  if (was_high && queued() <= kChannelHighWater) {
    for (auto& [id, e] : execs_) update_output_interest(*e);
  }
}

void Agent::update_channel_interest() {
  bool want = queued() > 0;
  if (want == channel_wants_out_) return;
  channel_wants_out_ = want;
  rewatch(channel_.get(), kChannel, 0, EPOLLIN | (want ? uint32_t{EPOLLOUT} : 0u));
}

void Agent::on_channel_readable() {
  ssize_t n = decoder_.read_from(channel_.get());
  if (n < 0) {
    if (errno == EAGAIN || errno == EINTR) return;
    std::fprintf(stderr, "boxlite-guest: channel read failed: %s\n", std::strerror(errno));
    running_ = false;
    return;
  }
  if (n == 0) {
    std::fprintf(stderr, "boxlite-guest: host closed the channel\n");
    running_ = false;
    return;
  }
  while (running_) {
    auto frame = decoder_.next();
    if (!frame) break;
    dispatch(*frame);
  }
}

void Agent::dispatch(const protocol::Frame& f) {
  try {
    if (f.type == FrameType::Hello) return handle_hello(f);
    if (!hello_done_) throw Error(ErrorKind::Rpc, "expected Hello first");
    if (f.stream == 0) {
      switch (f.type) {
        case FrameType::Configure: return handle_configure(f);
        case FrameType::Ping: return send(0, FrameType::Pong, {});
        case FrameType::Shutdown:
          for (auto& [id, e] : execs_) ::kill(-e->pid, SIGKILL);
          power_off_();
          running_ = false;
          return;
        default:
          throw Error(ErrorKind::Rpc, std::string("unexpected ") + protocol::frame_type_name(f.type) + " on stream 0");
      }
    }
    if (f.type == FrameType::Exec) return handle_exec(f);
    auto it = execs_.find(f.stream);
    if (it == execs_.end()) return;  // late frame for a finished exec
    Exec& e = *it->second;
    switch (f.type) {
      case FrameType::Stdin: return handle_stdin(e, f);
      case FrameType::StdinEof: return handle_stdin_eof(e);
      case FrameType::Credit: return handle_credit(e, f);
      case FrameType::Signal: return handle_signal(e, f);
      case FrameType::Resize: return handle_resize(e, f);
      default: throw Error(ErrorKind::Rpc, std::string("unexpected ") + protocol::frame_type_name(f.type));
    }
  } catch (const Error& err) {
    send_error(f.stream, err);
  }
}

void Agent::handle_hello(const protocol::Frame& f) {
  auto hello = protocol::parse_message<proto::Hello>(f);
  if (hello.version() != protocol::kProtocolVersion) {
    send_error(0, Error(ErrorKind::Rpc, "protocol version mismatch: guest speaks " +
                                            std::to_string(protocol::kProtocolVersion) + ", host speaks " +
                                            std::to_string(hello.version())));
    return;
  }
  hello_done_ = true;
}

void Agent::handle_configure(const protocol::Frame& f) {
  if (configured_) throw Error(ErrorKind::InvalidState, "box is already configured");
  config_ = protocol::parse_message<proto::BoxConfig>(f);
  // A jail's root shows the host's through "/.." until the first process detached it.
  if (first_.waiting_socket) await_first_process_isolated(first_.waiting());
  configure_(config_);
  if (!first_.waiting_socket) ensure_box_pid_namespace();  // a jail's init made it
  // The first child made now is PID 1 of that namespace.
  if (config_.main().argv_size() > 0) {
    start_exec(protocol::kMainStream, config_.main(), /*main=*/true);
  } else {
    start_holder_init();
  }
  configured_ = true;
  send_msg(0, FrameType::Configured, proto::Configured{});
}

void Agent::set_proc_swap(ProcSwap swap) { first_.swap = swap; }

void Agent::set_waiting_first_process(pid_t pid, UniqueFd socket) {
  first_.waiting_pid = pid;
  first_.waiting_socket = std::move(socket);
}

void Agent::start_holder_init() {
  FirstProcess first = std::exchange(first_, FirstProcess{});
  if (first.waiting_socket) {
    start_holder_in(first.waiting());
    return;
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw_errno(ErrorKind::Engine, "pipe for the box's init");
  UniqueFd report_r(fds[0]), report_w(fds[1]);
  pid_t pid = ::fork();
  if (pid < 0) throw_errno(ErrorKind::Engine, "fork the box's init");
  if (pid == 0) {
    if (int err = put_box_proc_in_place(first.swap); err != 0) {
      (void)!::write(report_w.get(), &err, sizeof err);
      ::_exit(127);
    }
    // Nothing of the agent's (its channel, the report pipe) stays open in the box's PID 1.
    if (!close_descriptors_from(0)) ::_exit(127);
    run_holder_init();
  }
  report_w.reset();
  int err = 0;
  ssize_t n;
  while ((n = ::read(report_r.get(), &err, sizeof err)) < 0 && errno == EINTR) {
  }
  if (n == static_cast<ssize_t>(sizeof err)) {
    ::waitpid(pid, nullptr, 0);
    throw_errno(ErrorKind::Engine, "mount the box's /proc", err);
  }
}

void Agent::handle_exec(const protocol::Frame& f) {
  if (!configured_) throw Error(ErrorKind::InvalidState, "box is not configured yet");
  if (main_exited_) throw Error(ErrorKind::InvalidState, "the box's main command has already exited");
  if (f.stream == protocol::kMainStream || execs_.count(f.stream)) {
    throw Error(ErrorKind::Rpc, "stream " + std::to_string(f.stream) + " is already in use");
  }
  start_exec(f.stream, protocol::parse_message<proto::ExecRequest>(f), /*main=*/false);
}

void Agent::start_exec(uint32_t stream, const proto::ExecRequest& req, bool main) {
  SpawnRequest sr;
  sr.argv.assign(req.argv().begin(), req.argv().end());
  sr.env = env_merge({config_.env().begin(), config_.env().end()}, {req.env().begin(), req.env().end()});
  sr.cwd = req.cwd().empty() ? config_.working_dir() : req.cwd();
  sr.user = req.user().empty() ? config_.user() : req.user();
  sr.tty = req.tty();
  sr.rows = req.rows();
  sr.cols = req.cols();
  sr.stdin_open = req.stdin();
  sr.cpus = config_.cpus();
  const proto::ResourceLimits& limits = config_.limits();
  sr.limits = {limits.nofile(), limits.fsize(), limits.nproc(), limits.as(), limits.cpu()};
  // The first process, whichever it is (configure starts the main command or the
  // holder init before anything else), gets the box's /proc.
  FirstProcess first = std::exchange(first_, FirstProcess{});
  sr.proc_swap = first.swap;
  WaitingFirstProcess waiting = first.waiting();
  if (first.waiting_socket) sr.first_process = &waiting;
  if (!req.builtin().empty()) {
    // Builtins (copies) act for the host on the whole box, as docker cp does: root,
    // from "/", on plain pipes, whatever the box's default user and directory.
    sr.builtin = req.builtin();
    sr.builtin_args.assign(req.builtin_args().begin(), req.builtin_args().end());
    sr.user = "0";
    sr.cwd = "/";
    sr.tty = false;
  }
  Spawned sp = spawn_process(sr);

  auto e = std::make_unique<Exec>();
  e->main = main;
  e->stream = stream;
  e->pid = sp.pid;
  e->pid_in_box = sp.pid_in_box;
  e->tty = sr.tty;
  e->in = std::move(sp.stdin_fd);
  e->out = std::move(sp.stdout_fd);
  e->err = std::move(sp.stderr_fd);
  for (int fd : {e->in.get(), e->out.get(), e->err.get()}) {
    if (fd >= 0) set_nonblocking(fd);
  }
  if (e->out) watch(e->out.get(), kStdout, stream, 0);
  if (e->err) watch(e->err.get(), kStderr, stream, 0);
  if (e->in) watch(e->in.get(), kStdin, stream, 0);
  if (req.timeout_secs() > 0) {
    e->timer = UniqueFd(::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
    if (!e->timer) throw_errno(ErrorKind::Internal, "timerfd_create");
    itimerspec its{};
    // Clamped before the conversion (a double past long long's range is undefined
    // behaviour there): a century is as good as no deadline.
    double secs = std::min(req.timeout_secs(), 100.0 * 365 * 24 * 3600);
    its.it_value.tv_sec = static_cast<time_t>(secs);
    its.it_value.tv_nsec = static_cast<long>((secs - static_cast<double>(its.it_value.tv_sec)) * 1e9);
    if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0) its.it_value.tv_nsec = 1;
    ::timerfd_settime(e->timer.get(), 0, &its, nullptr);
    watch(e->timer.get(), kTimer, stream, EPOLLIN);
  }
  pids_[e->pid] = stream;
  Exec& ref = *e;
  execs_[stream] = std::move(e);
  proto::ExecStarted started;
  started.set_pid(ref.pid_in_box);
  send_msg(stream, FrameType::Started, started);
  update_output_interest(ref);
}

void Agent::update_output_interest(Exec& e) {
  bool channel_ok = queued() <= kChannelHighWater;
  auto update = [&](UniqueFd& fd, Source src, uint32_t credit, double resume_at, uint32_t& current) {
    if (!fd) return;
    uint32_t want = (channel_ok && credit > 0 && resume_at == 0) ? uint32_t{EPOLLIN} : 0u;
    if (want == current) return;
    current = want;
    rewatch(fd.get(), src, e.stream, want);
  };
  update(e.out, kStdout, e.out_credit, e.out_resume_at, e.out_events);
  update(e.err, kStderr, e.err_credit, e.err_resume_at, e.err_events);
}

void Agent::on_output(Exec& e, Source src) {
  UniqueFd& fd = src == kStdout ? e.out : e.err;
  uint32_t& credit = src == kStdout ? e.out_credit : e.err_credit;
  // An event epoll reported before this pipe's read began to wait: the wait stands.
  if ((src == kStdout ? e.out_resume_at : e.err_resume_at) > 0) return;
  char* buf = read_buf_.get();
  for (int round = 0; round < kReadsPerWake; ++round) {
    if (!fd || credit == 0 || queued() > kChannelHighWater || !running_) break;
    size_t want = std::min<size_t>(credit, kMaxChunk);
    ssize_t n = ::read(fd.get(), buf, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    if (n <= 0) {  // EOF, or EIO from a PTY whose last slave closed
      unwatch(fd.get());
      if (e.tty && e.in) {
        unwatch(e.in.get());
        e.in.reset();
      }
      fd.reset();
      double& resume_at = src == kStdout ? e.out_resume_at : e.err_resume_at;
      if (resume_at > 0) --waiting_reads_;
      resume_at = 0;
      maybe_finish(e);  // may end e
      return;
    }
    credit -= static_cast<uint32_t>(n);
    send_output(e.stream, src == kStdout ? FrameType::Stdout : FrameType::Stderr,
                std::string_view(buf, static_cast<size_t>(n)));
    if (static_cast<size_t>(n) < want) {  // read dry
      double now = now_ms();
      double& dry_at = src == kStdout ? e.out_dry_at : e.err_dry_at;
      if (now - dry_at < kStreamingGapMs) {
        (src == kStdout ? e.out_resume_at : e.err_resume_at) = now + kBatchDelayMs;
        ++waiting_reads_;
        deepen_pipe(e, src);
      }
      dry_at = now;
      break;
    }
  }
  update_output_interest(e);
}

// A streaming process's pipe holds a whole chunk, so that one read takes what it
// wrote while its next read waited. Best effort: pipes are charged to the box's
// user (pipe-user-pages-soft), and the default depth works too.
void Agent::deepen_pipe(Exec& e, Source src) {
  bool& deepened = src == kStdout ? e.out_deepened : e.err_deepened;
  if (deepened || e.tty) return;
  deepened = true;
  ::fcntl((src == kStdout ? e.out : e.err).get(), F_SETPIPE_SZ, static_cast<int>(kMaxChunk));
}

void Agent::handle_credit(Exec& e, const protocol::Frame& f) {
  auto c = protocol::parse_message<proto::Credit>(f);
  auto add = [](uint32_t& credit, uint32_t bytes) {
    credit = std::min<uint64_t>(uint64_t{credit} + bytes, kMaxCredit);
  };
  if (c.channel() == proto::STDOUT) add(e.out_credit, c.bytes());
  if (c.channel() == proto::STDERR) add(e.err_credit, c.bytes());
  update_output_interest(e);
}

void Agent::handle_stdin(Exec& e, const protocol::Frame& f) {
  if (!e.in || e.stdin_gone || e.stdin_eof) {
    // Nobody will read it: hand the credit straight back so the host never stalls.
    proto::Credit c;
    c.set_channel(proto::STDIN);
    c.set_bytes(static_cast<uint32_t>(f.payload.size()));
    send_msg(e.stream, FrameType::Credit, c);
    return;
  }
  if (e.stdin_buf.size() + f.payload.size() > 2 * size_t{kInitialWindow}) {
    throw Error(ErrorKind::Rpc, "stdin sent beyond the granted window on stream " + std::to_string(e.stream));
  }
  e.stdin_buf += f.payload;
  on_stdin_writable(e);
}

void Agent::handle_stdin_eof(Exec& e) {
  e.stdin_eof = true;
  if (e.stdin_buf.empty()) close_stdin(e);
}

void Agent::close_stdin(Exec& e) {
  if (!e.in) return;
  if (e.tty) {
    char eot = 4;  // a PTY has no half-close: send the terminal's EOF character
    (void)!::write(e.in.get(), &eot, 1);
  }
  unwatch(e.in.get());
  e.in.reset();
}

void Agent::on_stdin_writable(Exec& e) {
  if (!e.in) return;
  while (!e.stdin_buf.empty()) {
    ssize_t n = ::write(e.in.get(), e.stdin_buf.data(), e.stdin_buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) break;
      // EPIPE: the process closed stdin. Drop what is queued; keep the host unblocked.
      e.stdin_unacked += static_cast<uint32_t>(e.stdin_buf.size());
      e.stdin_buf.clear();
      e.stdin_gone = true;
      unwatch(e.in.get());
      e.in.reset();
      break;
    }
    e.stdin_buf.erase(0, static_cast<size_t>(n));
    e.stdin_unacked += static_cast<uint32_t>(n);
  }
  if (e.stdin_unacked >= kCreditBatch || (e.stdin_buf.empty() && e.stdin_unacked > 0)) {
    proto::Credit c;
    c.set_channel(proto::STDIN);
    c.set_bytes(e.stdin_unacked);
    e.stdin_unacked = 0;
    send_msg(e.stream, FrameType::Credit, c);
  }
  if (!e.in) return;
  if (e.stdin_buf.empty() && e.stdin_eof) {
    close_stdin(e);
    return;
  }
  uint32_t want = e.stdin_buf.empty() ? 0u : uint32_t{EPOLLOUT};
  if (want != e.in_events) {
    e.in_events = want;
    rewatch(e.in.get(), kStdin, e.stream, want);
  }
}

void Agent::handle_signal(Exec& e, const protocol::Frame& f) {
  auto s = protocol::parse_message<proto::Signal>(f);
  if (s.signo() <= 0 || s.signo() >= NSIG)
    throw Error(ErrorKind::InvalidArgument, "invalid signal " + std::to_string(s.signo()));
  if (e.reaped && s.signo() != SIGKILL) return;
  // SIGKILL takes the whole process group, so nothing the exec started survives.
  ::kill(s.signo() == SIGKILL ? -e.pid : e.pid, s.signo());
}

void Agent::handle_resize(Exec& e, const protocol::Frame& f) {
  auto r = protocol::parse_message<proto::Resize>(f);
  if (!e.tty || !e.out) return;
  winsize ws{};
  ws.ws_row = static_cast<unsigned short>(r.rows());
  ws.ws_col = static_cast<unsigned short>(r.cols());
  ::ioctl(e.out.get(), TIOCSWINSZ, &ws);
}

void Agent::on_timer(Exec& e) {
  uint64_t expirations;
  (void)!::read(e.timer.get(), &expirations, sizeof expirations);
  if (e.kill_stage == 0) {
    e.timed_out = true;
    e.kill_stage = 1;
    ::kill(-e.pid, SIGTERM);
    itimerspec its{};
    its.it_value.tv_sec = kTermGraceSecs;
    ::timerfd_settime(e.timer.get(), 0, &its, nullptr);
  } else {
    // Again every second: a group that is still forking can outrun one SIGKILL.
    ::kill(-e.pid, SIGKILL);
    itimerspec its{};
    its.it_value.tv_sec = 1;
    ::timerfd_settime(e.timer.get(), 0, &its, nullptr);
  }
}

void Agent::on_sigchld() {
  signalfd_siginfo si;
  while (::read(sigfd_.get(), &si, sizeof si) == sizeof si) {
  }
  for (;;) {
    int status;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) break;
    auto it = pids_.find(pid);
    if (it == pids_.end()) continue;  // an orphan we reaped as init
    auto eit = execs_.find(it->second);
    pids_.erase(it);
    if (eit == execs_.end()) continue;
    eit->second->reaped = true;
    eit->second->status = status;
    maybe_finish(*eit->second);
  }
}

void Agent::maybe_finish(Exec& e) {
  if (!e.reaped || e.out || e.err) return;
  if (e.timed_out) ::kill(-e.pid, SIGKILL);  // stragglers in the group
  proto::ExecExit ex;
  if (WIFEXITED(e.status)) {
    ex.set_exit_code(WEXITSTATUS(e.status));
  } else if (WIFSIGNALED(e.status)) {
    ex.set_exit_code(-WTERMSIG(e.status));
    ex.set_signal(WTERMSIG(e.status));
  }
  ex.set_timed_out(e.timed_out);
  uint32_t stream = e.stream;
  if (e.main) main_exited_ = true;
  waiting_reads_ -= (e.out_resume_at > 0) + (e.err_resume_at > 0);
  if (e.in) unwatch(e.in.get());
  if (e.timer) unwatch(e.timer.get());
  execs_.erase(stream);  // e is gone from here on
  send_msg(stream, FrameType::Exit, ex);
}

}  // namespace boxlite::guest
