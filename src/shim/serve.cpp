// The shim's loop once the box is up: one epoll set over the guest channel, the
// clients, the engine's logs, signals, the runtime's go pipe and lifeline, and the
// box's network; then the box's exit, told to every client.
#include <signal.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>

#include "common/error.hpp"
#include "common/io.hpp"
#include "common/trace.hpp"
#include "shim/shim.hpp"

namespace boxlite::shim {

using protocol::Frame;
using protocol::FrameType;

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
  add_to_epoll(guest_.get(), kGuestKey);
  add_to_epoll(listen_.get(), kListenKey);
  // Frames that arrived with the boot handshake (the main command's first output).
  try {
    while (auto f = guest_decoder_.next()) router_.on_guest_frame(*f);
  } catch (const Error& e) {
    stop_listening_to_guest(e.what());
  }
  add_to_epoll(sigfd_.get(), kSignalKey);
  if (console_log_.open()) add_to_epoll(console_log_.fd(), kConsoleKey);
  if (engine_log_.open()) add_to_epoll(engine_log_.fd(), kEngineLogKey);
  if (net_log_.open()) add_to_epoll(net_log_.fd(), kNetLogKey);
  if (lifeline_fd >= 0) add_to_epoll(lifeline_fd, kLifelineKey);
  if (go_) add_to_epoll(go_.get(), kGoKey);
  if (net_.ready) add_to_epoll(net_.ready.get(), kNetReadyKey);
  if (tap_) add_to_epoll(tap_.get(), kFirstFrameKey);

  while (process_.valid()) {
    flush_all();
    if (guest_) update_interest();
    epoll_event events[64];
    int n = ::epoll_wait(epoll_.get(), events, 64, stopping_ ? 100 : -1);
    if (n < 0 && errno != EINTR) throw_errno(ErrorKind::Internal, "epoll_wait");
    for (int i = 0; i < n; ++i) {
      uint64_t k = events[i].data.u64;
      uint32_t ev = events[i].events;
      if (k == kGuestKey) {
        if (!guest_) continue;
        if (ev & EPOLLOUT) flush_guest();
        if (ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) on_guest_readable();
      } else if (k == kListenKey) {
        accept_client();
      } else if (k == kSignalKey) {
        on_signal();
        if (engine_status_) break;
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
        on_lifeline_gone(lifeline_fd);
      } else if (auto it = clients_.find(k); it != clients_.end()) {
        if (ev & EPOLLOUT) flush_client(*it->second);
        if (ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) on_client_readable(*it->second);
      }
    }
    if (engine_status_ || !process_.valid()) break;
    if (auto st = process_.try_wait()) {
      engine_status_ = st;
      break;
    }
    if (stopping_ && now_ms() > stop_deadline_ms_) stop_engine();
  }
  say_why_the_engine_went();
  drain_engine_logs();
  trace("shim: engine gone, exit recorded");
  record_exit();
  // The box is down: tell every client, then go.
  router_.box_stopped(Error(ErrorKind::Stopped,
                            "box " + spec_.box_id + " stopped" + (stop_reason_.empty() ? "" : ": " + stop_reason_)));
  for (auto& [id, c] : clients_) {
    set_nonblocking(c->fd.get(), false);
    flush_client(*c);
  }
  clients_.clear();
  trace("shim: clients told");
}

void Shim::accept_client() {
  UniqueFd fd(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
  if (!fd) return;
  auto c = std::make_unique<Client>();
  c->id = kFirstClient + next_client_++;
  c->fd = std::move(fd);
  set_send_buffer(c->fd.get(), kClientSendBuffer);
  add_to_epoll(c->fd.get(), c->id);
  router_.add_client(c->id);
  clients_[c->id] = std::move(c);
}

void Shim::on_signal() {
  signalfd_siginfo si;
  while (::read(sigfd_.get(), &si, sizeof si) == sizeof si) {
    if (si.ssi_signo != SIGCHLD) begin_stop(std::string("shim received ") + strsignal(static_cast<int>(si.ssi_signo)));
  }
  if (auto st = process_.try_wait()) engine_status_ = st;
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

// The process that owns this (non-detached) box died or let go of it.
void Shim::on_lifeline_gone(int lifeline_fd) {
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, lifeline_fd, nullptr);
  begin_stop("the owning process exited");
  stop_deadline_ms_ = now_ms() + 2000;
}

void Shim::start_net_now() {
  net_ = start_net_on_tap(spec_, tap_.get());
  tap_.reset();  // boxlite-net holds it now
  net_log_ = CappedLog(std::move(net_.log), engine::net_log_path(spec_.box_dir), kEngineLogBytes);
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
  if (why.empty()) why = "boxlite-net exited without a reason (see " + engine::net_log_path(spec_.box_dir) + ")";
  begin_stop("the box's network failed: " + why);
}

// A guest that hangs up because its engine was killed under it: say so.
void Shim::say_why_the_engine_went() {
  bool engine_killed = engine_status_ && WIFSIGNALED(*engine_status_) && !engine_killed_by_us_;
  if (!stop_reason_.empty() && !(engine_killed && stop_reason_ == kGuestClosed)) return;
  std::string what(engine_->process_name());
  stop_reason_ = engine_status_ ? what + " exited unexpectedly (" + describe_status(*engine_status_) + ")"
                                : what + " exited unexpectedly";
}

// The box's exit record tells any runtime process why the box stopped. A shim
// killed outright cannot write it; the runtime then reports that instead.
void Shim::record_exit() {
  try {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
                  .count();
    engine::ExitRecord r{stop_reason_, ms, std::nullopt};
    if (router_.main_exit()) r.main_exit_code = router_.main_exit()->exit_code();
    engine::write_exit_record(spec_.box_dir, r, /*durable=*/!spec_.ephemeral);
  } catch (const Error& e) {
    std::fprintf(stderr, "boxlite-shim: %s\n", e.what());
  }
}

}  // namespace boxlite::shim
